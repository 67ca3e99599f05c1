"""The external app's own Lambda: one step of a user's signup, chosen by the task name.

The kit invokes it with {"batchId", "task", "input", "attempt", "executionArn"}; ``input`` is the
execution input's ``tasks.<task name>``. Raise an exception *named* RetryableTaskError to be
retried with backoff, NonRetryableTaskError to go to the dead-letter queue at once.
"""


class RetryableTaskError(Exception):
    """Retried by the kit's Retry rule of that name (exponential backoff, full jitter)."""


class NonRetryableTaskError(Exception):
    """Never retried: the task goes to the dead-letter queue with its context."""


def handler(event: dict, context: object) -> dict:
    task, data = event["task"], event.get("input") or {}
    email = data.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise NonRetryableTaskError(f"{task}: input.email must be an e-mail address")
    if data.get("busyUntilAttempt", 0) > event.get("attempt", 0):
        raise RetryableTaskError(f"{task}: the mail service is busy (attempt {event['attempt'] + 1})")
    return {"task": task, "email": email, "done": True}

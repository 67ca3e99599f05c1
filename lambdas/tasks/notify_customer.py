"""Example task: send the order confirmation."""

from fanout_runtime.errors import NonRetryableTaskError
from tasks.handler import TaskEvent, task_handler


@task_handler
def handler(task: TaskEvent) -> dict:
    email = task.payload.get("email")
    if not isinstance(email, str) or "@" not in email:
        raise NonRetryableTaskError("input.email must be an e-mail address")
    return {"notified": email, "channel": "email"}

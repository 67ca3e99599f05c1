"""Example task: charge the order's amount (idempotent per batch: the charge id is derived)."""

import hashlib

from fanout_runtime.errors import NonRetryableTaskError
from tasks.handler import TaskEvent, task_handler


@task_handler
def handler(task: TaskEvent) -> dict:
    amount = task.payload.get("amountCents")
    currency = task.payload.get("currency", "EUR")
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        raise NonRetryableTaskError("input.amountCents must be a positive integer (cents)")
    # Same batch -> same key, so a retried charge is not charged twice by the payment provider.
    key = hashlib.sha256(f"{task.batch_id}:{amount}:{currency}".encode()).hexdigest()[:16]
    return {"chargeId": f"ch_{key}", "amountCents": amount, "currency": currency}

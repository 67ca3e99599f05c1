"""Example task: reserve stock for every order line."""

from fanout_runtime.errors import NonRetryableTaskError
from tasks.handler import TaskEvent, task_handler


@task_handler
def handler(task: TaskEvent) -> dict:
    items = task.payload.get("items", [])
    if not isinstance(items, list) or not all(
        isinstance(i, dict) and isinstance(i.get("sku"), str) and isinstance(i.get("qty"), int)
        and i["qty"] > 0
        for i in items
    ):
        raise NonRetryableTaskError('input.items must be a list of {"sku": str, "qty": int > 0}')
    return {
        "reservations": [
            {"sku": i["sku"], "qty": i["qty"], "reservationId": f"{task.batch_id}:{i['sku']}"}
            for i in items
        ]
    }

"""Example Map child: processes a batch of items (ItemBatcher) and records each success in the
completion ledger, once per item however often the batch is delivered (Express children are
at-least-once). Replace ``process_item`` with your work; keep it idempotent.

Event: ``{"batchId", "items": [{"index": 0, "item": {...}}, ...], "attempt", "executionArn"}``.
A RetryableTaskError fails the whole batch, which Step Functions retries; items already recorded
are not counted again.
"""

from fanout_common.errors import NonRetryableTaskError
from fanout_common.ledger_runtime import ledger_from_env
from fanout_common.worker import (
    SIMULATE_KEY,
    TaskEvent,
    logger,
    raise_simulated_failure,
    tracer,
)


def process_item(item: dict) -> dict:
    """The example work: a checksum of the item's fields."""
    if not isinstance(item, dict):
        raise NonRetryableTaskError(f"item must be a JSON object, got {type(item).__name__}")
    return {
        "fields": len(item),
        "checksum": sum(map(ord, repr(sorted(item.items())))) % 65536,
    }


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event, context):
    batch_id = event["batchId"]
    attempt = int(event.get("attempt") or 0)
    logger.append_keys(batch_id=batch_id, attempt=attempt + 1)
    ledger = ledger_from_env()
    results = []
    for entry in event["items"]:
        index, item = entry["index"], entry["item"]
        logger.append_keys(task_id=f"item-{index}")
        if isinstance(item, dict) and item.get(SIMULATE_KEY):
            raise_simulated_failure(
                TaskEvent(
                    batch_id,
                    f"item-{index}",
                    item,
                    attempt,
                    event.get("executionArn", ""),
                )
            )
        results.append(process_item(item))
        ledger.record_success(batch_id, str(index), decide=False)
    logger.info("items processed", extra={"count": len(results)})
    return {"processed": len(results)}

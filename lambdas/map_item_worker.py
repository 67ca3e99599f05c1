"""Example Map child: processes a batch of items (ItemBatcher). Replace ``process_item`` with your
work; keep it idempotent (Express children are at-least-once, and a retried batch runs its
items again). It keeps no count of its own: Step Functions counts the map run's items, and a batch
that exhausts its retries is dead-lettered and fails its child execution.

Written as a function of your own would be: ``fanout_runtime`` (the runtime layer: the event, the
error names, the fault switch) and Powertools, nothing else of the kit.

Event: ``{"batchId", "items": [{"index": 0, "item": {...}}, ...], "attempt", "executionArn"}``.
A RetryableTaskError fails the whole batch, which Step Functions retries.
"""

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_runtime import faults
from fanout_runtime.errors import NonRetryableTaskError

logger = Logger()
tracer = Tracer()


def process_item(item: dict[str, Any]) -> dict[str, int]:
    """The example work: a checksum of the item's fields."""
    if not isinstance(item, dict):
        raise NonRetryableTaskError(f"item must be a JSON object, got {type(item).__name__}")
    return {
        "fields": len(item),
        "checksum": sum(map(ord, repr(sorted(item.items())))) % 65536,
    }


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    batch_id = event["batchId"]
    attempt = int(event.get("attempt") or 0)
    # Thread-local keys, cleared at the end: in-process runs (the local engine) share the logger.
    logger.thread_safe_append_keys(batch_id=batch_id, attempt=attempt + 1)
    try:
        results = []
        for entry in event["items"]:
            index, item = entry["index"], entry["item"]
            faults.raise_simulated_failure(item, f"item-{index}", attempt)
            results.append(process_item(item))
        logger.info("items processed", extra={"count": len(results)})
        return {"processed": len(results)}
    finally:
        logger.thread_safe_clear_keys()

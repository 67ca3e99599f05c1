"""Example Map child: processes a batch of items (ItemBatcher). Replace ``process_item`` with your
work; keep it idempotent (Express children are at-least-once, and a retried batch runs its
items again). It keeps no count of its own: Step Functions counts the map run's items, and a batch
that exhausts its retries is dead-lettered and fails its child execution.

Written as a function of your own would be: ``fanout_runtime`` (the runtime layer: the event, the
error names, the fault switch) and Powertools, nothing else of the kit.

Event: ``{"batchId", "items": [{"index": 0, "item": {...}}, ...], "attempt", "executionArn"}``.
An item that fails is reported on its own (``batchItemFailures``, ``fanout_runtime.events``): only
it is retried (if its error is RetryableTaskError), dead-lettered and counted failed; its
neighbours count succeeded. An error outside the per-item work (or a function stopped by a
timeout, out of memory, a crash) still fails the whole batch.
"""

from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_runtime import faults
from fanout_runtime.errors import NonRetryableTaskError
from fanout_runtime.events import batch_item_failure, batch_item_failures

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
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    batch_id = event["batchId"]
    attempt = int(event.get("attempt") or 0)
    # Thread-local keys, cleared at the end: in-process runs (the local engine) share the logger.
    logger.thread_safe_append_keys(batch_id=batch_id, attempt=attempt + 1)
    try:
        results, failures = [], []
        for entry in event["items"]:
            index, item = entry["index"], entry["item"]
            try:
                faults.raise_simulated_failure(item, f"item-{index}", attempt)
                results.append(process_item(item))
            except Exception as exc:  # this item only (a stopped function still stops the batch)
                logger.warning("item failed", extra={"index": index, "error": type(exc).__name__})
                failures.append(batch_item_failure(index, exc))
        logger.info("items processed", extra={"count": len(results), "failed": len(failures)})
        return batch_item_failures(failures, processed=len(results))
    finally:
        logger.thread_safe_clear_keys()

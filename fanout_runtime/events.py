"""The events your functions receive from the fan-out kit, as typed definitions with parse helpers.

Every ``attempt`` is 0-based: 0 on the first try, 1 on the first retry, and so on.

* **ParallelFanOut task** (``FanOutTask``), invoked once per batch and attempt::

      {"batchId": "orders-42", "task": "ChargePayment", "input": <the execution input's tasks.ChargePayment>,
       "attempt": 0, "executionArn": "arn:aws:states:...:execution:..."}

  ``attempt`` is Step Functions' ``$$.State.RetryCount`` of the task's state.

* **DistributedMapFanOut worker**, invoked once per batch of items (``map.items_per_batch``) and
  attempt. ``items`` holds ``{"index", "item"}`` pairs, not the items themselves: ``index`` is the
  item's 0-based position in the manifest (or the inline ``items`` list), ``item`` the item as
  given (a CSV manifest's rows are objects of strings, keyed by the header row)::

      {"batchId": "orders-42", "items": [{"index": 0, "item": {...}}, {"index": 1, "item": {...}}],
       "attempt": 0, "executionArn": "arn:aws:states:...:execution:<parent>/<child>..."}

  ``attempt`` is the child's ``$$.State.RetryCount``: a retry runs the whole batch again, so make
  the work per item idempotent. Return a JSON object with a ``processed`` field (``MapWorkerResult``,
  e.g. the number of items processed): the child's "Items processed" state reads it; a return
  without it fails the child, whose items then count as failed and go to the DLQ.

  **Per-item failures** (``batch_item_failures``): to fail only some items of the batch, return
  them instead of raising, in the spirit of SQS's partial batch responses ("Reporting batch item
  failures", https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html#services-sqs-batchfailurereporting)::

      {"processed": 19, "batchItemFailures": [{"itemIndex": 17, "error": "RetryableTaskError",
                                               "cause": "the image service answered 503"}]}

  ``itemIndex`` is the failed item's ``index`` (as in the event); ``error`` (default
  ``NonRetryableTaskError``) is named as an exception would be: ``RetryableTaskError`` or a name of
  the worker's ``retry_on`` is retried for that item only (the worker is invoked again with only the
  failed items, ``attempt`` counting that item's tries in the child), with the worker's
  ``retryable`` policy (backoff, full jitter) within the child's time (an Express child: its
  5 minutes); any other name is not retried. The items that still fail are dead-lettered (one DLQ
  message per child listing only them, each with its ``error`` and ``cause``), counted failed and
  redriven; the others count succeeded. An empty list means every item succeeded. A response whose
  ``batchItemFailures`` is not a list of such objects, names an index not in the batch, or repeats
  one, fails the whole batch (dead-lettered with a cause naming the fault), as SQS treats an invalid
  response as a complete failure. Raising still fails the whole batch.

* **CompletionLedger processing function**, invoked synchronously by the ledger's consumers for
  each child message::

      {"batchId": "orders-42", "childId": "line-7", "payload": {...}, "attempt": 0}

  From the SQS intake ``attempt`` is the message's ApproximateReceiveCount - 1; from the Kinesis
  intake it is always 0 (a Kinesis record carries no attempt counter). An error (any exception)
  fails the child's attempt: the message is retried, then dead-lettered and counted FAILED.

Each ``parse_*`` helper checks the event and returns it typed; a malformed event raises
``NonRetryableTaskError`` naming the field (a retry cannot fix it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from fanout_runtime.errors import NonRetryableTaskError

# What a ParallelFanOut task's function may return (bytes of compact JSON): the Invoke connector's
# output carries it whole (States.DataLimitExceeded past 256 KiB, which no Catch catches), and the
# kit's payload budget counts every task output at this bound. Return a reference (an S3 key) to
# larger results; this repository's example tasks fail as not retryable past it.
TASK_OUTPUT_MAX_BYTES = 64 * 1024


class TaskEvent(TypedDict):
    """The event of a ParallelFanOut task."""

    batchId: str
    task: str
    input: Any  # the execution input's tasks.<task name> (a JSON object in this kit's inputs)
    attempt: int  # 0-based
    executionArn: str


class MapItem(TypedDict):
    """One item of a Map worker's batch."""

    index: int  # 0-based position in the manifest or the inline items
    item: Any  # the item as given (a CSV row: an object of strings)


class MapWorkerEvent(TypedDict):
    """The event of a DistributedMapFanOut worker."""

    batchId: str
    items: list[MapItem]
    attempt: int  # 0-based; a retry runs the whole batch again
    executionArn: str  # the child execution's


class MapWorkerResult(TypedDict):
    """What a DistributedMapFanOut worker returns (more fields are allowed and dropped)."""

    processed: Any  # e.g. how many items the batch processed


class BatchItemFailure(TypedDict, total=False):
    """One failed item of a Map worker's batch (``itemIndex`` required)."""

    itemIndex: int  # the item's ``index`` in the event
    error: str  # an error name: RetryableTaskError (or one of retry_on) is retried for this item
    cause: str  # what happened (kept to BATCH_ITEM_CAUSE_MAX characters)


class MapWorkerPartialResult(TypedDict):
    """A Map worker's answer when some items of its batch failed."""

    processed: Any
    batchItemFailures: list[BatchItemFailure]


BATCH_ITEM_FAILURES = "batchItemFailures"  # the response field the Map child reads
BATCH_ITEM_ERROR_MAX = 256  # characters of an item's error name (as Step Functions' Error)
BATCH_ITEM_CAUSE_MAX = 1024  # characters of an item's cause kept in its DLQ message


def batch_item_failure(index: int, error: BaseException | str = "NonRetryableTaskError", cause: str | None = None) -> BatchItemFailure:
    """One entry: ``batch_item_failure(17, exc)`` names the exception's class and message (as the
    Lambda runtime would report it raised); ``batch_item_failure(17, "RetryableTaskError", "503")``."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"batch_item_failure: index must be the item's int index, got {index!r}")
    if isinstance(error, BaseException):
        name, text = type(error).__name__, str(error) if cause is None else cause
    else:
        name, text = str(error), cause or ""
    return BatchItemFailure(itemIndex=index, error=name[:BATCH_ITEM_ERROR_MAX], cause=text[:BATCH_ITEM_CAUSE_MAX])


def batch_item_failures(failures: list[BatchItemFailure], processed: Any) -> MapWorkerPartialResult | MapWorkerResult:
    """The worker's response: ``{"processed", "batchItemFailures"}``, or only ``{"processed"}``
    when nothing failed (an empty list would cost the child one more step)."""
    if not failures:
        return MapWorkerResult(processed=processed)
    return MapWorkerPartialResult(processed=processed, batchItemFailures=list(failures))


class LedgerChildEvent(TypedDict):
    """The event of a CompletionLedger processing function."""

    batchId: str
    childId: str
    payload: dict[str, Any]
    attempt: int  # 0-based (SQS: ApproximateReceiveCount - 1; Kinesis: always 0)


def _object(event: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(event, Mapping):
        raise NonRetryableTaskError(f"{what}: must be a JSON object, got {type(event).__name__}")
    return event


def _field(event: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in event:
        raise NonRetryableTaskError(f"{what}.{key}: missing")
    value = event[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        raise NonRetryableTaskError(f"{what}.{key}: must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _attempt(event: Mapping[str, Any], what: str) -> int:
    attempt = _field(event, "attempt", int, what)
    if attempt < 0:
        raise NonRetryableTaskError(f"{what}.attempt: must be 0 or more (0-based), got {attempt}")
    return attempt


def parse_task_event(event: Any) -> TaskEvent:
    """A ParallelFanOut task's event, checked."""
    what = "task event"
    event = _object(event, what)
    return TaskEvent(
        batchId=_field(event, "batchId", str, what),
        task=_field(event, "task", str, what),
        input=event.get("input"),
        attempt=_attempt(event, what),
        executionArn=_field(event, "executionArn", str, what),
    )


def parse_map_worker_event(event: Any) -> MapWorkerEvent:
    """A DistributedMapFanOut worker's event, checked (every item an ``{"index", "item"}`` pair)."""
    what = "map worker event"
    event = _object(event, what)
    items = _field(event, "items", list, what)
    pairs: list[MapItem] = []
    for i, pair in enumerate(items):
        where = f"{what}.items[{i}]"
        pair = _object(pair, where)
        if "item" not in pair:
            raise NonRetryableTaskError(f"{where}.item: missing (items are {{\"index\", \"item\"}} pairs)")
        pairs.append(MapItem(index=_field(pair, "index", int, where), item=pair["item"]))
    return MapWorkerEvent(
        batchId=_field(event, "batchId", str, what),
        items=pairs,
        attempt=_attempt(event, what),
        executionArn=_field(event, "executionArn", str, what),
    )


def parse_ledger_child_event(event: Any) -> LedgerChildEvent:
    """A CompletionLedger processing function's event, checked."""
    what = "ledger child event"
    event = _object(event, what)
    return LedgerChildEvent(
        batchId=_field(event, "batchId", str, what),
        childId=_field(event, "childId", str, what),
        payload=dict(_object(event.get("payload", {}), f"{what}.payload")),
        attempt=_attempt(event, what),
    )

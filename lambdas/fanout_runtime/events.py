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
  e.g. the number of items processed): the child's ResultSelector reads ``$.Payload.processed``;
  a return without it fails the child, whose items then count as failed and go to the DLQ.

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

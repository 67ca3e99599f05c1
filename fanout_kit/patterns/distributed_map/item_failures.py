"""Per-item failures inside a Map batch (pure logic; ``fanout_kit/patterns/distributed_map/handlers/retry_failed_items.py`` runs it).

A worker may answer ``{"processed", "batchItemFailures": [{"itemIndex", "error", "cause"}]}``
(``fanout_runtime.events``) instead of failing its whole batch. The Map child then invokes the kit's
RetryFailedItems function, which

1. checks the answer against the batch it was given (``check_failures``): a list of objects, each
   ``itemIndex`` an index of that batch, none twice; anything else fails the whole batch closed,
   as SQS treats an invalid partial batch response as a complete failure;
2. retries only the failed items whose error is retryable (``RetryableTaskError`` or the worker's
   ``retry_on``): it invokes the worker again with only those entries, in rounds, with the
   worker's ``retryable`` policy (exponential backoff capped by ``max_delay_seconds``, full jitter
   as the state machine's Retriers), at most ``max_attempts`` rounds and never past the time the
   child has left (its function timeout, sized at synth from the Express 5 minutes);
3. dead-letters the items that still fail, with their own error and cause (one message per child
   listing only them), and returns the child's verdict: ``ItemsPartiallyFailed`` with a cause
   listing the failed indexes (``map_results.partial_cause``), which the parent's fan-in reads back
   from the map run's FAILED results to count items, not children.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fanout_runtime.events import BATCH_ITEM_CAUSE_MAX, BATCH_ITEM_ERROR_MAX, BATCH_ITEM_FAILURES

from .result_files import ITEMS_DEAD_LETTERED, ITEMS_PARTIALLY_FAILED, partial_cause

INVALID_BATCH_ITEM_FAILURES = "InvalidBatchItemFailures"
DEFAULT_ITEM_ERROR = "NonRetryableTaskError"  # an entry without "error": not retried
RETRYABLE = "RetryableTaskError"
# Lambda API errors of an Invoke (the function did not run, or its answer was lost): the round's
# items are tried again, as the transient policy retries them for the whole batch.
LAMBDA_TRANSIENT_CODES = (
    "ServiceException", "TooManyRequestsException", "AWSLambdaException", "SdkClientException", "EC2ThrottledException",
)
INVOKE_OVERHEAD_SECONDS = 2.0  # an Invoke's own latency on top of the function's run


class InvalidBatchItemFailures(Exception):
    """The worker's ``batchItemFailures`` is not what the contract says (the message names the field)."""


@dataclass(frozen=True)
class ItemFailure:
    index: int
    error: str
    cause: str


@dataclass(frozen=True)
class Policy:
    """The worker's retryable policy and error names, as the construct passes them."""

    interval_seconds: float
    max_attempts: int
    backoff_rate: float
    max_delay_seconds: float
    retry_on: tuple[str, ...] = ()
    never_retry: tuple[str, ...] = ()
    worker_timeout_seconds: float = 60.0

    def retryable(self, error: str) -> bool:
        return error not in self.never_retry and (error == RETRYABLE or error in self.retry_on)

    def ceiling(self, round_number: int) -> float:
        """The backoff ceiling before retry round ``round_number`` (1-based)."""
        return min(self.interval_seconds * self.backoff_rate ** (round_number - 1), self.max_delay_seconds)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> "Policy":
        return cls(
            interval_seconds=float(raw["intervalSeconds"]),
            max_attempts=int(raw["maxAttempts"]),
            backoff_rate=float(raw["backoffRate"]),
            max_delay_seconds=float(raw["maxDelaySeconds"]),
            retry_on=tuple(raw.get("retryOn") or ()),
            never_retry=tuple(raw.get("neverRetry") or ()),
            worker_timeout_seconds=float(raw.get("workerTimeoutSeconds", 60)),
        )


def _text(value: Any, limit: int) -> str:
    return (value if isinstance(value, str) else "" if value is None else str(value))[:limit]


def check_failures(response: Any, items: Sequence[Mapping[str, Any]]) -> list[ItemFailure]:
    """The failures a worker's answer reports for ``items`` (the entries it was invoked with);
    InvalidBatchItemFailures naming the fault if the answer is malformed."""
    where = f"the worker's {BATCH_ITEM_FAILURES}"
    raw = response.get(BATCH_ITEM_FAILURES) if isinstance(response, Mapping) else None
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidBatchItemFailures(
            f"{where}: must be a list of {{\"itemIndex\", \"error\", \"cause\"}} objects, got {type(raw).__name__}"
        )
    known = {entry.get("index") for entry in items if isinstance(entry, Mapping)}
    seen: set[int] = set()
    failures = []
    for n, failure in enumerate(raw):
        at = f"{where}[{n}]"
        if not isinstance(failure, Mapping):
            raise InvalidBatchItemFailures(f"{at}: must be an object with itemIndex, got {type(failure).__name__}")
        index = failure.get("itemIndex")
        if isinstance(index, bool) or not isinstance(index, int):
            raise InvalidBatchItemFailures(f"{at}.itemIndex: must be the item's int index, got {repr(index)[:100]}")
        if index not in known:
            span = f"{min(known)}..{max(known)}" if known else "none"
            raise InvalidBatchItemFailures(
                f"{at}.itemIndex: {index} is not an index of this batch ({len(known)} item(s), indexes {span})"
            )
        if index in seen:
            raise InvalidBatchItemFailures(f"{at}.itemIndex: {index} is listed twice")
        seen.add(index)
        error = _text(failure.get("error"), BATCH_ITEM_ERROR_MAX) or DEFAULT_ITEM_ERROR
        failures.append(ItemFailure(index, error, _text(failure.get("cause"), BATCH_ITEM_CAUSE_MAX)))
    return failures


@dataclass
class Outcome:
    """What the rounds ended with."""

    items: int  # the batch's items
    failed: list[tuple[dict[str, Any], ItemFailure]] = field(default_factory=list)  # (entry, why)
    rounds: int = 0  # worker invocations made here
    waits: list[float] = field(default_factory=list)
    malformed: str | None = None  # the fault of a malformed first answer (whole batch failed)

    @property
    def failed_indexes(self) -> list[int]:
        return sorted(f.index for _, f in self.failed)

    def verdict(self) -> dict[str, Any]:
        """The child's: no error (every item succeeded in the end), ItemsDeadLettered (the first
        answer was malformed: the whole batch went to the DLQ) or ItemsPartiallyFailed."""
        if self.malformed is not None:
            return {"error": ITEMS_DEAD_LETTERED, "cause": self.malformed[:2000], "failed": self.items}
        if not self.failed:
            return {"error": None, "cause": None, "failed": 0}
        kinds = sorted({f.error for _, f in self.failed})
        message = (
            f"{len(self.failed)} of {self.items} item(s) failed ({', '.join(kinds)}) after "
            f"{self.rounds} retry round(s); the others succeeded; the failed items and their causes are in the DLQ"
        )
        ordered = [f for _, f in sorted(self.failed, key=lambda pair: pair[1].index)]
        cause = partial_cause(self.failed_indexes, self.items, message, [f.error for f in ordered], [f.cause for f in ordered])
        return {"error": ITEMS_PARTIALLY_FAILED, "cause": cause,
                "failed": len(self.failed)}


Invoke = Callable[[list[dict[str, Any]], int], tuple[Any, str | None, str]]  # (entries, attempt) -> (answer, error, cause)


def run_rounds(
    items: Sequence[dict[str, Any]],
    response: Any,
    policy: Policy,
    *,
    invoke: Invoke,
    seconds_left: Callable[[], float],
    sleep: Callable[[float], None],
    draw: Callable[[float, float], float] = random.uniform,
) -> Outcome:
    """Check the first answer, then retry the retryable failed items in rounds (see the module)."""
    outcome = Outcome(items=len(items))
    try:
        failures = check_failures(response, items)
    except InvalidBatchItemFailures as exc:
        outcome.malformed = f"{INVALID_BATCH_ITEM_FAILURES}: {exc}; the whole batch is dead-lettered"
        outcome.failed = [(dict(e), ItemFailure(e.get("index"), INVALID_BATCH_ITEM_FAILURES, str(exc))) for e in items]
        return outcome
    by_index = {e.get("index"): dict(e) for e in items}
    pending = [(by_index[f.index], f) for f in failures]
    round_number = 0
    while pending:
        retry = [(e, f) for e, f in pending if policy.retryable(f.error)]
        outcome.failed += [(e, f) for e, f in pending if not policy.retryable(f.error)]
        pending = []
        if not retry:
            break
        if round_number >= policy.max_attempts:
            outcome.failed += retry
            break
        round_number += 1
        wait = draw(0.0, policy.ceiling(round_number))
        if seconds_left() < wait + policy.worker_timeout_seconds + INVOKE_OVERHEAD_SECONDS:
            outcome.failed += [
                (e, ItemFailure(f.index, f.error, (f.cause + " (not retried again: the child's time is spent)")[:BATCH_ITEM_CAUSE_MAX]))
                for e, f in retry
            ]
            break
        sleep(wait)
        outcome.waits.append(wait)
        entries = [e for e, _ in retry]
        answer, error, cause = invoke(entries, round_number)
        outcome.rounds += 1
        if error is not None:  # the invocation failed as a whole: every entry of the round failed
            why = lambda f: ItemFailure(f.index, error[:BATCH_ITEM_ERROR_MAX], _text(cause, BATCH_ITEM_CAUSE_MAX))  # noqa: E731
            pending = [(e, why(f)) for e, f in retry]
            continue
        try:
            again = check_failures(answer, entries)
        except InvalidBatchItemFailures as exc:
            outcome.failed += [(e, ItemFailure(f.index, INVALID_BATCH_ITEM_FAILURES, str(exc))) for e, f in retry]
            break
        pending = [(by_index[f.index], f) for f in again]
    return outcome


def dead_letter_bodies(
    outcome: Outcome, *, batch_id: str, task: str, execution_arn: str, child_execution_arn: str,
    failed_at: str, max_bytes: int = 200 * 1024,
) -> list[dict[str, Any]]:
    """The DLQ messages of the failed items: one per child (more only past ``max_bytes`` of JSON),
    each listing only failed items (``items``: their ``{"index", "item"}``) and each item's own
    error and cause (``itemErrors``), in the shape of the child's own DLQ step."""
    import json

    import json as _json

    if not outcome.failed:
        return []
    verdict = outcome.verdict()
    kinds = sorted({f.error for _, f in outcome.failed})
    # One error name for the message when the items share it (as a whole-batch message has);
    # each item's own error and cause are in itemErrors.
    error = kinds[0] if len(kinds) == 1 else verdict["error"]
    cause = verdict["cause"]
    try:
        cause = _json.loads(cause).get("message", cause)
    except (ValueError, AttributeError, TypeError):
        pass
    bodies: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    size = 0
    for entry, failure in sorted(outcome.failed, key=lambda pair: pair[1].index):
        part = {"index": failure.index, "error": failure.error, "cause": failure.cause}
        grow = len(json.dumps(entry)) + len(json.dumps(part)) + 2
        if current is None or (current["items"] and size + grow > max_bytes):
            current = {
                "batchId": batch_id, "task": task, "items": [], "itemErrors": [],
                "error": error, "cause": cause,
                "executionArn": execution_arn, "childExecutionArn": child_execution_arn, "failedAt": failed_at,
            }
            bodies.append(current)
            size = len(json.dumps(current))
        current["items"].append(entry)
        current["itemErrors"].append(part)
        size += grow
    return bodies

"""What the ledger's Lambda handlers share: the child message, the ledger built from the
environment, the example child work, and the winner's follow-up (finalize or alarm).

Child message (SQS body or Kinesis record data, JSON)::

    {"batchId": "orders-42", "childId": "line-7",     # or "index": 7 (0-based) instead of childId
     "total": 10,                                     # optional if the batch was registered up front
     "payload": {...}}                                # the child's work; may hold simulateFailure

Environment: LEDGER_TABLE_NAME, LEDGER_FAILURE_THRESHOLD (default 0), LEDGER_TTL_DAYS (30),
LEDGER_DEADLINE_MINUTES (0: no deadline for batches created by their first message),
LEDGER_COUNTER_SHARDS (1: one counter item per batch; K > 1: the sharded counter),
FINALIZER_FUNCTION_NAME (the UpdateFinalStatus function), STATUS_TABLE_NAME (the status table:
the winner of a FAILED verdict writes the batch's FAILED record there), FANOUT_ENV,
CHILD_FUNCTION_NAME (the app's processing function, invoked for each child's work; the construct
always sets it, since ``processing_function`` is required. Unset, the example work below runs:
only the consumers driven directly by the ledger race tests on moto server, which invoke no
function, rely on that).
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import boto3

from fanout_runtime import faults

from fanout_kit.shared.final_status import ledger_results_at, record_counted_failure
from .ledger import InvalidChildMessage, Ledger, LedgerError, LedgerResult
from .work_record import DEFAULT_LEASE_SECONDS, LEASE_MARGIN_SECONDS, WORK_SUCCEEDED, Claim, WorkRecords
from fanout_kit.shared.metric_names import BATCH_COMPLETED_METRIC, BATCH_FAILED_METRIC
from fanout_kit.shared.observability import MetricUnit, ledger_metrics, logger


class ChildWorkFailed(LedgerError):
    """The processing function returned a function error: the message is retried (and, once its
    retries are exhausted, counted FAILED by the DLQ / on-failure recorder)."""


class FinalizeFailed(LedgerError):
    """UpdateFinalStatus returned a function error; the message is retried (the winner keeps the
    right to finalize until it succeeds, see Ledger.acknowledge_finish)."""


@dataclass(frozen=True)
class ChildMessage:
    batch_id: str
    child_id: str
    total: int | None
    index: int | None
    payload: dict[str, Any]

    @classmethod
    def parse(cls, body: Any) -> "ChildMessage":
        if not isinstance(body, Mapping):
            raise InvalidChildMessage(f"child message must be a JSON object, got {type(body).__name__}")
        batch_id, child_id, index, total = (body.get(k) for k in ("batchId", "childId", "index", "total"))
        if not isinstance(batch_id, str) or not batch_id:
            raise InvalidChildMessage(f"batchId: must be a non-empty string, got {batch_id!r}")
        if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
            raise InvalidChildMessage(f"index: must be a whole number >= 0, got {index!r}")
        if child_id is None and index is None:
            raise InvalidChildMessage("childId or index: one is required to identify the child")
        if child_id is not None and (not isinstance(child_id, str) or not child_id):
            raise InvalidChildMessage(f"childId: must be a non-empty string, got {child_id!r}")
        if total is not None and (not isinstance(total, int) or isinstance(total, bool) or total < 1):
            raise InvalidChildMessage(f"total: must be a whole number >= 1, got {total!r}")
        payload = body.get("payload") or {}
        if not isinstance(payload, Mapping):
            raise InvalidChildMessage(f"payload: must be a JSON object, got {type(payload).__name__}")
        return cls(batch_id, child_id if child_id is not None else str(index), total, index, dict(payload))


@functools.cache
def dynamodb_client() -> Any:
    return boto3.client("dynamodb")


@functools.cache
def lambda_client() -> Any:
    return boto3.client("lambda")


def ledger_from_env(client: Any | None = None) -> Ledger:
    deadline_minutes = int(os.environ.get("LEDGER_DEADLINE_MINUTES", "0"))
    return Ledger(
        client or dynamodb_client(),
        os.environ["LEDGER_TABLE_NAME"],
        failure_threshold=int(os.environ.get("LEDGER_FAILURE_THRESHOLD", "0")),
        ttl_days=int(os.environ.get("LEDGER_TTL_DAYS", "30")),
        deadline_seconds=deadline_minutes * 60 or None,
        counter_shards=int(os.environ.get("LEDGER_COUNTER_SHARDS", "1")),
    )


def work_records_from_env(client: Any | None = None) -> WorkRecords:
    return WorkRecords(
        client or dynamodb_client(),
        os.environ["LEDGER_TABLE_NAME"],
        ttl_days=int(os.environ.get("LEDGER_TTL_DAYS", "30")),
    )


def lease_seconds(context: Any | None) -> float:
    """How long a delivery holds its child's work claim: the invocation's remaining time (it cannot
    outlive it) plus a margin; Lambda's maximum timeout without a context."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if not callable(remaining):
        return DEFAULT_LEASE_SECONDS
    return remaining() / 1000 + LEASE_MARGIN_SECONDS


def record(ledger: Ledger, message: ChildMessage, *, failure_reason: str | None = None) -> LedgerResult:
    """Count the child in the ledger: a success, or a failure with its reason (once, whatever
    the number of calls)."""
    where = dict(total=message.total, index=message.index)
    if failure_reason is None:
        return ledger.record_success(message.batch_id, message.child_id, **where)
    return ledger.record_failure(message.batch_id, message.child_id, reason=failure_reason, **where)


def process_child(
    ledger: Ledger,
    work: WorkRecords,
    message: ChildMessage,
    run_work: Callable[[], Any],
    *,
    lease: float = DEFAULT_LEASE_SECONDS,
) -> LedgerResult:
    """A consumer's delivery of a child: claim its work (fanout_kit.patterns.completion_ledger.work_record), run it unless
    it already succeeded, store the outcome on the work record, then count the child.

    Raises (the message is retried): the work's own error (after storing FAILED),
    ChildWorkInProgress (another delivery holds the claim), LedgerContention (the counter stayed
    contended: the outcome is stored, so the redelivery only records it)."""
    token = uuid.uuid4().hex
    claim = work.claim(message.batch_id, message.child_id, token, lease_seconds=lease)
    if claim is Claim.SUCCEEDED:
        logger.info("work succeeded on an earlier delivery; recording it without running it again")
        return record(ledger, message)
    if claim is Claim.DEAD_LETTERED:
        return record(ledger, message, failure_reason="dead-lettered before this delivery")
    try:
        run_work()
    except Exception as exc:
        try:
            work.failed(message.batch_id, message.child_id, token, f"{type(exc).__name__}: {exc}")
        except Exception:  # the lease then simply expires; the work's error is what matters
            logger.warning("could not store the failed work outcome", exc_info=True)
        raise
    if not work.succeeded(message.batch_id, message.child_id, token):
        logger.warning("work succeeded after the child was dead-lettered (its claim had expired); it stays FAILED")
        return record(ledger, message, failure_reason="dead-lettered while its work ran past its claim")
    return record(ledger, message)


def process_dead_letter(ledger: Ledger, work: WorkRecords, message: ChildMessage, reason: str) -> LedgerResult:
    """A recorder of a child whose message's retries are exhausted (SQS DLQ, Kinesis on-failure):
    counted SUCCEEDED if its work succeeded (the message only lost the race for the counter), else
    FAILED for good. Raises ChildWorkInProgress while a delivery still holds the work's claim."""
    if work.settle_dead_letter(message.batch_id, message.child_id) == WORK_SUCCEEDED:
        logger.info("dead-lettered child whose work succeeded: counted succeeded")
        return record(ledger, message)
    return record(ledger, message, failure_reason=reason)


def work_then_record(message: ChildMessage, attempt: int, source: str, context: Any | None = None) -> dict[str, Any]:
    """A consumer's delivery (``process_child``) with the environment's ledger, then the winner's
    follow-up. A failure of the work is logged and raised, so the message is retried."""
    ledger = ledger_from_env()

    def run() -> None:
        try:
            do_child_work(message, attempt)
        except Exception:
            logger.warning("child work failed", extra={"attempt": attempt + 1}, exc_info=True)
            raise

    result = process_child(ledger, work_records_from_env(), message, run, lease=lease_seconds(context))
    return finish(ledger, result, f"ledger:{source}:{message.child_id}").to_dict()


def record_dead_letter(message: ChildMessage, source: str, reason: str) -> dict[str, Any]:
    """``process_dead_letter`` with the environment's ledger, then the winner's follow-up."""
    ledger = ledger_from_env()
    result = process_dead_letter(ledger, work_records_from_env(), message, reason)
    return finish(ledger, result, f"ledger:{source}:{message.child_id}").to_dict()


def do_child_work(message: ChildMessage, attempt: int) -> dict[str, Any]:
    """The child's work: the processing function (CHILD_FUNCTION_NAME), invoked synchronously
    with ``{"batchId", "childId", "payload", "attempt"}``; without one (the race tests only), the
    example work, where
    ``payload.simulateFailure`` fails it on purpose, exactly like the example tasks
    (``fanout_runtime.faults``): {"mode": "transient", "times": N} fails the first N attempts,
    "permanent" and "fatal" every attempt (so the message ends in the DLQ)."""
    function_name = os.environ.get("CHILD_FUNCTION_NAME")
    if function_name:
        return invoke_processing_function(lambda_client(), function_name, message, attempt)
    faults.raise_simulated_failure(message.payload, message.child_id, attempt)
    return {"childId": message.child_id, "processed": True}


def invoke_processing_function(client: Any, function_name: str, message: ChildMessage, attempt: int) -> dict[str, Any]:
    """One child's work by the app's function; its function error fails the child's attempt."""
    event = {"batchId": message.batch_id, "childId": message.child_id, "payload": message.payload, "attempt": attempt}
    response = client.invoke(FunctionName=function_name, InvocationType="RequestResponse", Payload=json.dumps(event).encode())
    body = response["Payload"].read()
    if response.get("FunctionError"):
        raise ChildWorkFailed(f"child {message.child_id} of batch {message.batch_id}: {function_name} failed: {body[:500]!r}")
    return json.loads(body or b"null")


def invoke_finalizer(
    client: Any, function_name: str, batch_id: str, identity: str, results_at: str | None = None
) -> dict[str, Any]:
    """Invoke UpdateFinalStatus synchronously with the event the workflows use (``resultsAt``:
    where the batch's results are, the ledger's child marks)."""
    response = client.invoke(
        FunctionName=function_name,
        InvocationType="RequestResponse",
        Payload=json.dumps({"batchId": batch_id, "executionArn": identity, "results": {},
                            **({"resultsAt": results_at} if results_at else {})}).encode(),
    )
    body = response["Payload"].read()
    if response.get("FunctionError"):
        raise FinalizeFailed(f"batch {batch_id}: UpdateFinalStatus failed: {body[:500]!r}")
    return json.loads(body or b"{}")


def finish(ledger: Ledger, result: LedgerResult, identity: str) -> LedgerResult:
    """The winner's follow-up; a no-op for every other outcome. ``identity`` names the finisher
    (``ledger:<source>:<childId>``) and becomes the status record's executionArn/finalizedBy."""
    if result.must_finalize or result.must_alarm:
        ledger_metrics.set_default_dimensions(environment=os.environ.get("FANOUT_ENV", "local"))
    if result.must_finalize:
        final = invoke_finalizer(
            lambda_client(), os.environ["FINALIZER_FUNCTION_NAME"], result.batch_id, identity,
            ledger_results_at(ledger.table_name, result.batch_id),
        )
        ledger_metrics.add_metric(name=BATCH_COMPLETED_METRIC, unit=MetricUnit.Count, value=1)
        logger.info("batch completed and finalized", extra={"ledger": result.to_dict(), "final": final})
        ledger.acknowledge_finish(result.batch_id, result.child_id or "", identity)
    elif result.must_alarm:
        recorded = None
        if os.environ.get("STATUS_TABLE_NAME"):
            recorded = record_counted_failure(
                dynamodb_client(),
                os.environ["STATUS_TABLE_NAME"],
                batch_id=result.batch_id,
                execution_arn=identity,
                failed_items=result.failed or 0,
                total_items=result.total or 0,
                now=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                results_at=ledger_results_at(ledger.table_name, result.batch_id),
            )
        ledger_metrics.add_metric(name=BATCH_FAILED_METRIC, unit=MetricUnit.Count, value=1)
        logger.error("batch FAILED", extra={"ledger": result.to_dict(), "finishedBy": identity,
                                            "statusRecord": recorded})
        ledger.acknowledge_finish(result.batch_id, result.child_id or "", identity)
    else:
        logger.info("child recorded", extra={"ledger": result.to_dict()})
    return result


__all__ = [
    "ChildMessage",
    "FinalizeFailed",
    "do_child_work",
    "finish",
    "invoke_finalizer",
    "ledger_from_env",
    "process_child",
    "process_dead_letter",
    "record_dead_letter",
    "work_records_from_env",
    "work_then_record",
]

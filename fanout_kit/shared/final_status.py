"""The batch status record and its transition rules (one item per batch, keyed by ``batchId``).

Transitions, each enforced by a DynamoDB condition so that concurrent, retried or duplicated
calls cannot break them:

* (none)   -> SUCCEEDED  UpdateFinalStatus, when every task of an execution succeeded.
* (none)   -> FAILED     the workflow's RecordBatchFailure step (direct DynamoDB integration).
* FAILED   -> FAILED     a later (redrive) execution failed again; it becomes the one to redrive.
* FAILED   -> SUCCEEDED  only by a redrive execution that names the recorded failed execution
                         (``redriveOf``) and re-ran every task that execution recorded as failed;
                         or by the recorded execution itself when the failure guard recorded it
                         (``failedExecutionError`` set: it failed outside the workflow's own
                         decision, e.g. UpdateFinalStatus exhausted its retries) and Step Functions'
                         RedriveExecution resumed it at UpdateFinalStatus, which it reaches only
                         when every task succeeded.
* (none)/FAILED -> FAILED  the execution-failure guard (EventBridge rule on FAILED, TIMED_OUT,
                         ABORTED executions), with ``failedExecutionError``; never over SUCCEEDED.
* SUCCEEDED is final: a repeated UpdateFinalStatus is a no-op and a late failure never overwrites it.

Which fields say what. The current status: ``status``, ``executionArn`` (the execution that wrote
it), ``updatedAt``; when SUCCEEDED also ``finalizedBy``, ``finalizedAt``, ``ranTasks``, ``redriveOf``;
when FAILED the failure fields (``FAILURE_FIELDS``: ``failedTasks`` or ``failedItems`` /
``totalItems`` / ``failureError`` / ``resultsKey``, or the guard's ``failedExecutionError`` /
``failedExecutionStatus``). History: ``failedRuns`` (how many runs of the batch were recorded
FAILED) and ``previousFailure``. A success over a FAILED record (a redrive, or the guarded execution
resumed) moves that record's failure fields into ``previousFailure`` (with ``executionArn`` and
``failedAt``: the failed run and when it was recorded) and removes them, in the same conditional
write, so a SUCCEEDED record never carries a failure as if it were current.

So the final status is written exactly once, and a FAILED batch is never flipped to SUCCEEDED by a
retry or a repeat of an old call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fanout_runtime.errors import FinalStatusConflict

SUCCEEDED = "SUCCEEDED"
FAILED = "FAILED"
# The execution error of a batch whose fan-in found no positive evidence for every task or item
# (the workflow recorded it FAILED; a redrive runs it again).
BATCH_NOT_CONFIRMED = "BatchNotConfirmed"

# Used verbatim by the state machine's RecordBatchFailure DynamoDB UpdateItem (fanout_kit/shared/states.py).
FAILURE_UPDATE_EXPRESSION = (
    "SET #status = :failed, failedTasks = :failedTasks, executionArn = :executionArn, "
    "resultsAt = :executionArn, updatedAt = :updatedAt ADD failedRuns :one"
)
# The Map workflow records counts instead of task names (same condition).
# failedItems: items not confirmed succeeded (failed, timed out, aborted, or all of them when the
# map run itself failed); resultsKey: the map run's ResultWriter manifest ("" if none).
MAP_FAILURE_UPDATE_EXPRESSION = (
    "SET #status = :failed, failedItems = :failedItems, totalItems = :totalItems, "
    "failureError = :failureError, resultsKey = :resultsKey, "
    "executionArn = :executionArn, updatedAt = :updatedAt ADD failedRuns :one"
)
FAILURE_CONDITION_EXPRESSION = "attribute_not_exists(batchId) OR #status = :failed"

# Where a batch's results are (``resultsAt``, read by ``fanout results``): the Parallel's execution
# (its history holds each task's outcome), the Map's ResultWriter manifest (``s3://BUCKET/KEY``;
# a FAILED Map record has its key in ``resultsKey``, in the batch data bucket), the ledger's child
# marks (``dynamodb://TABLE/BATCH#ID``: the partition they are in). Written with every SUCCEEDED
# record (UpdateFinalStatus), and with the FAILED records of the Parallel and the ledger.
S3_RESULTS = "s3://"
LEDGER_RESULTS = "dynamodb://"


def s3_results_at(bucket: str, key: str) -> str:
    return f"{S3_RESULTS}{bucket}/{key}"


def ledger_results_at(table: str, batch_id: str) -> str:
    return f"{LEDGER_RESULTS}{table}/BATCH#{batch_id}"
FAILURE_EXPRESSION_NAMES = {"#status": "status"}

# Written by the execution-failure guard (fanout_kit/shared/handlers/record_execution_failure.py) only.
GUARD_FAILURE_UPDATE_EXPRESSION = (
    "SET #status = :failed, executionArn = :executionArn, failedExecutionError = :error, "
    "failedExecutionStatus = :executionStatus, updatedAt = :updatedAt ADD failedRuns :one"
)
# This very execution was recorded FAILED by the guard and has been redriven (RedriveExecution).
_GUARD_RECORDED_THIS_EXECUTION = (
    "(#status = :failed AND executionArn = :executionArn AND attribute_exists(failedExecutionError))"
)
_FIRST_SUCCESS_CONDITION = f"attribute_not_exists(batchId) OR {_GUARD_RECORDED_THIS_EXECUTION}"
_REDRIVE_SUCCESS_CONDITION = f"(#status = :failed AND executionArn = :redriveOf) OR {_GUARD_RECORDED_THIS_EXECUTION}"


# The fields that describe a FAILED verdict (RecordBatchFailure of either workflow, the ledger's
# counted failure, the guard): current while FAILED, moved to previousFailure by a success.
FAILURE_FIELDS = (
    "failedTasks",
    "failedItems",
    "totalItems",
    "failureError",
    "resultsKey",
    "failedExecutionError",
    "failedExecutionStatus",
)
_MOVE_ATTEMPTS = 3  # a FAILED record that changes between our read and our write: read it again


@dataclass(frozen=True)
class FinalizeResult:
    outcome: str  # "FINALIZED" (this call wrote SUCCEEDED) or "ALREADY_FINALIZED" (no-op)
    batch_id: str
    finalized_by: str

    def to_dict(self) -> dict[str, str]:
        return {"outcome": self.outcome, "batchId": self.batch_id, "finalizedBy": self.finalized_by}


def _plain(item: dict[str, Any] | None) -> dict[str, Any]:
    """DynamoDB attribute-value map -> plain dict (only the types this table uses)."""
    out: dict[str, Any] = {}
    for key, value in (item or {}).items():
        (kind, inner), = value.items()
        out[key] = int(inner) if kind == "N" else sorted(inner) if kind == "SS" else _plain(inner) if kind == "M" else inner
    return out


def _attribute(value: Any) -> dict[str, Any]:
    """Plain value -> DynamoDB attribute value (the types _plain reads back)."""
    if isinstance(value, bool) or not isinstance(value, (int, str, list, dict)):
        raise TypeError(f"unexpected status record value {value!r}")
    if isinstance(value, int):
        return {"N": str(value)}
    if isinstance(value, list):
        return {"SS": list(value)}
    if isinstance(value, dict):
        return {"M": {k: _attribute(v) for k, v in value.items()}}
    return {"S": value}


def previous_failure(record: dict[str, Any]) -> dict[str, Any]:
    """What a success keeps of the FAILED record it replaces (``previousFailure``)."""
    kept = {k: record[k] for k in FAILURE_FIELDS if k in record}
    kept["executionArn"] = record.get("executionArn", "")
    kept["failedAt"] = record.get("updatedAt", "")
    return kept


def read_status(client: Any, table_name: str, batch_id: str) -> dict[str, Any] | None:
    """The batch's status record as a plain dict (strongly consistent), or None."""
    item = client.get_item(
        TableName=table_name, Key={"batchId": {"S": batch_id}}, ConsistentRead=True
    ).get("Item")
    return _plain(item) if item else None


def record_success(
    client: Any,
    table_name: str,
    *,
    batch_id: str,
    execution_arn: str,
    ran_tasks: Iterable[str],
    now: str,
    redrive_of: str | None = None,
    results_at: str | None = None,
) -> FinalizeResult:
    """Write SUCCEEDED exactly once (with ``resultsAt``, where the batch's results are); a repeat is a no-op; a FAILED verdict is never overwritten
    except by the redrive of the execution that recorded it (or by that execution itself when the
    guard recorded it). Over a FAILED record, the failure fields move to ``previousFailure``.

    One conditional write on the usual path (no record yet). Over a FAILED record: the write is
    also conditioned on the record being the one read (``updatedAt``), so what moves to
    ``previousFailure`` is exactly what is replaced; a record changed in between is read again."""
    ran = sorted(set(ran_tasks))
    recorded = None
    if redrive_of is not None:
        recorded = read_status(client, table_name, batch_id)
        if recorded and recorded.get("status") == FAILED:
            missing = sorted(set(recorded.get("failedTasks", [])) - set(ran))
            if missing:
                raise FinalStatusConflict(
                    f"batch {batch_id}: the redrive of {redrive_of} did not re-run "
                    f"{', '.join(missing)}, which that execution recorded as failed; "
                    "include them in tasks"
                )
        elif recorded is None:
            raise FinalStatusConflict(
                f"batch {batch_id}: the redrive names {redrive_of}, but no FAILED record exists for it"
            )
    for _ in range(_MOVE_ATTEMPTS):
        replaces = recorded if recorded and recorded.get("status") == FAILED else None
        try:
            _write_success(
                client, table_name, batch_id=batch_id, execution_arn=execution_arn, ran=ran, now=now,
                redrive_of=redrive_of, replaces=replaces, results_at=results_at,
            )
        except client.exceptions.ConditionalCheckFailedException as exc:
            old = _plain(exc.response.get("Item"))
            if old.get("status") == SUCCEEDED:
                return FinalizeResult("ALREADY_FINALIZED", batch_id, old.get("finalizedBy", ""))
            if old.get("status") == FAILED and _may_finalize(old, execution_arn, redrive_of) and old != replaces:
                recorded = old  # a FAILED record this execution may replace: move its failure fields
                continue
            if old.get("status") == FAILED:
                raise FinalStatusConflict(
                    f"batch {batch_id} was recorded FAILED by {old.get('executionArn')}; a FAILED batch "
                    "is finalized only by a redrive of that execution (input field redriveOf): run "
                    f"`fanout dlq redrive [--workflow map] --batch {batch_id}`"
                ) from exc
            raise FinalStatusConflict(
                f"batch {batch_id}: the redrive names {redrive_of}, but no FAILED record exists for it"
            ) from exc
        return FinalizeResult("FINALIZED", batch_id, execution_arn)
    raise FinalStatusConflict(
        f"batch {batch_id}: its FAILED record changed {_MOVE_ATTEMPTS} times while this execution "
        "finalized it; nothing was written, retry UpdateFinalStatus"
    )


def _may_finalize(old: dict[str, Any], execution_arn: str, redrive_of: str | None) -> bool:
    """The FAILED record ``old`` is one this execution may replace by SUCCEEDED (the conditions
    below, evaluated on a record read back)."""
    guarded_self = old.get("executionArn") == execution_arn and "failedExecutionError" in old
    return guarded_self or (redrive_of is not None and old.get("executionArn") == redrive_of)


def _write_success(
    client: Any,
    table_name: str,
    *,
    batch_id: str,
    execution_arn: str,
    ran: list[str],
    now: str,
    redrive_of: str | None,
    replaces: dict[str, Any] | None,
    results_at: str | None = None,
) -> None:
    """SUCCEEDED where there is no record (``replaces`` None), or over the FAILED record
    ``replaces`` exactly as read (same ``updatedAt``) if this execution may finalize it."""
    values: dict[str, Any] = {
        ":succeeded": {"S": SUCCEEDED},
        ":executionArn": {"S": execution_arn},
        ":now": {"S": now},
    }
    update = "SET #status = :succeeded, executionArn = :executionArn, finalizedBy = :executionArn, "
    update += "finalizedAt = :now, updatedAt = :now"
    if redrive_of is not None:
        values[":redriveOf"] = {"S": redrive_of}
        update += ", redriveOf = :redriveOf"
    if results_at:
        values[":resultsAt"] = {"S": results_at}
        update += ", resultsAt = :resultsAt"
    if ran:
        update += ", ranTasks = :ranTasks"
        values[":ranTasks"] = {"SS": ran}
    if replaces is None:
        condition = "attribute_not_exists(batchId)"
    else:
        # The failed run becomes history: previousFailure, and its fields leave the current status.
        update += ", previousFailure = :previousFailure REMOVE " + ", ".join(FAILURE_FIELDS)
        values[":previousFailure"] = _attribute(previous_failure(replaces))
        values[":failed"] = {"S": FAILED}
        values[":seenUpdatedAt"] = {"S": replaces.get("updatedAt", "")}
        allowed = _FIRST_SUCCESS_CONDITION if redrive_of is None else _REDRIVE_SUCCESS_CONDITION
        condition = f"({allowed}) AND updatedAt = :seenUpdatedAt"
    client.update_item(
        TableName=table_name,
        Key={"batchId": {"S": batch_id}},
        UpdateExpression=update,
        ConditionExpression=condition,
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues=values,
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )


def record_execution_failure(
    client: Any,
    table_name: str,
    *,
    batch_id: str,
    execution_arn: str,
    execution_status: str,
    error: str,
    now: str,
    event_key: str,
) -> tuple[str, dict[str, Any]]:
    """The guard's write: FAILED for an execution that ended outside the workflow's own decision,
    under the same condition as the workflow's RecordBatchFailure (no record yet, or FAILED), so a
    SUCCEEDED batch is never touched; and only once per event (``event_key``: the execution and
    its stop date, the same in every delivery of one status change), so a retried or duplicated
    EventBridge delivery adds nothing to ``failedRuns``.

    Returns (outcome, the record before when nothing was written): "RECORDED"; "DUPLICATE" (this
    event was recorded already); "NOT_RECORDED" (the record is SUCCEEDED)."""
    try:
        client.update_item(
            TableName=table_name,
            Key={"batchId": {"S": batch_id}},
            UpdateExpression=GUARD_FAILURE_UPDATE_EXPRESSION + ", guardEvents :event",
            ConditionExpression=f"({FAILURE_CONDITION_EXPRESSION}) AND NOT contains(guardEvents, :eventKey)",
            ExpressionAttributeNames=FAILURE_EXPRESSION_NAMES,
            ExpressionAttributeValues={
                ":failed": {"S": FAILED},
                ":executionArn": {"S": execution_arn},
                ":error": {"S": error or "(none)"},
                ":executionStatus": {"S": execution_status},
                ":updatedAt": {"S": now},
                ":one": {"N": "1"},
                ":event": {"SS": [event_key]},
                ":eventKey": {"S": event_key},
            },
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except client.exceptions.ConditionalCheckFailedException as exc:
        old = _plain(exc.response.get("Item"))
        return ("DUPLICATE" if event_key in old.get("guardEvents", []) else "NOT_RECORDED"), old
    return "RECORDED", {}


def mark_guard_dead_lettered(client: Any, table_name: str, *, batch_id: str, event_key: str) -> None:
    """After the guard's DLQ send for this event: a later delivery of it sends nothing (an ADD to
    a string set is idempotent; the record exists, the guard's write or a SUCCEEDED one)."""
    client.update_item(
        TableName=table_name,
        Key={"batchId": {"S": batch_id}},
        UpdateExpression="ADD guardDeadLettered :event",
        ConditionExpression="attribute_exists(batchId)",
        ExpressionAttributeValues={":event": {"SS": [event_key]}},
    )


def record_counted_failure(
    client: Any,
    table_name: str,
    *,
    batch_id: str,
    execution_arn: str,
    failed_items: int,
    total_items: int,
    now: str,
    results_at: str | None = None,
) -> str:
    """The FAILED record of a batch decided by counts (the completion ledger's consumers): the same
    item the Map workflow's failure step writes (``MAP_FAILURE_UPDATE_EXPRESSION``). Idempotent per
    ``execution_arn`` (the ledger's winner may repeat its follow-up): returns "RECORDED", or
    "ALREADY_RECORDED" when this finisher's FAILED record is there already. A SUCCEEDED record is
    never overwritten (FinalStatusConflict)."""
    try:
        client.update_item(
            TableName=table_name,
            Key={"batchId": {"S": batch_id}},
            UpdateExpression=MAP_FAILURE_UPDATE_EXPRESSION.replace("SET ", "SET resultsAt = :resultsAt, ", 1),
            ConditionExpression="attribute_not_exists(batchId) OR (#status = :failed AND executionArn <> :executionArn)",
            ExpressionAttributeNames=FAILURE_EXPRESSION_NAMES,
            ExpressionAttributeValues={
                ":resultsAt": {"S": results_at or ""},
                ":failed": {"S": FAILED},
                ":failedItems": {"N": str(failed_items)},
                ":totalItems": {"N": str(total_items)},
                ":failureError": {"S": "ItemsFailed"},
                ":resultsKey": {"S": ""},
                ":executionArn": {"S": execution_arn},
                ":updatedAt": {"S": now},
                ":one": {"N": "1"},
            },
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except client.exceptions.ConditionalCheckFailedException as exc:
        old = _plain(exc.response.get("Item"))
        if old.get("status") == FAILED:
            return "ALREADY_RECORDED"
        raise FinalStatusConflict(
            f"batch {batch_id} has a {old.get('status')} record by {old.get('executionArn')}; "
            "a FAILED verdict of the ledger does not overwrite it"
        ) from exc
    return "RECORDED"

"""Execution-failure guard: the target of an EventBridge rule on this workflow's
"Step Functions Execution Status Change" events with status FAILED, TIMED_OUT or ABORTED.

An execution can end without the workflow's own verdict: UpdateFinalStatus exhausted its retries
(every task succeeded), the execution timed out or was stopped. Then nothing in the workflow
recorded it. This function leaves the trace:

* the batch's status record becomes FAILED (``failedExecutionError`` names the error), under the same
  condition as the workflow's RecordBatchFailure: only if there is no record yet or it is FAILED,
  never over SUCCEEDED;
* the context (batch, execution, status, error, cause, how to recover) goes to the workflow's
  dead-letter queue, so the DLQ alarm pages someone.

Failures the workflow reported itself (``BatchFailed``: recorded, its tasks dead-lettered;
``BatchNotConfirmed``: recorded, no positive evidence for every task or item;
``FinalStatusConflict``: a refused duplicate) and executions that never started a batch
(``InvalidInput``, ``InvalidManifest``: the caller got the error, nothing ran) are left alone.

The failure stays *at* the failed step (no Catch to a Fail state), so the console's Redrive
(RedriveExecution) resumes the execution at that step without re-running the tasks that succeeded;
record_success lets that very execution finalize over the guard's FAILED record.

Once per event: EventBridge delivers at least once and retries, and Lambda retries an
asynchronous invocation that failed. The FAILED write is conditioned on the event not being
recorded yet (``guardEvents``: the execution ARN and its stop date), so a second delivery adds
nothing to ``failedRuns``; the DLQ send is followed by a mark (``guardDeadLettered``), so a second
delivery sends no second message. An event that cannot be recorded at all (the table or the queue
refuses, past Lambda's retries; or EventBridge cannot invoke the function) is kept: the rule target
and the function's asynchronous invocations both have the workflow's DLQ as on-failure destination.

When the event carries no input (Step Functions leaves it out of events it would make too large),
the batch id comes from sfn:DescribeExecution of this very execution, not from its name.

EventBridge delivers Step Functions events on a best-effort basis; the ExecutionsFailed and
ExecutionsTimedOut alarms are the backstop.
"""

import functools
import json
import os
from datetime import datetime, timezone
from typing import Any

import boto3
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.shared.final_status import BATCH_NOT_CONFIRMED, mark_guard_dead_lettered, record_execution_failure
from fanout_kit.shared.observability import logger, tracer

DETAIL_TYPE = "Step Functions Execution Status Change"
WATCHED_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")
WORKFLOW_REPORTED = ("BatchFailed", BATCH_NOT_CONFIRMED, "FinalStatusConflict")
NOTHING_RAN = ("InvalidInput", "InvalidManifest")
RECOVERY = {
    "FAILED": "every step before the failed one succeeded: Redrive the execution (console, or "
    "aws stepfunctions redrive-execution) to resume at the failed step without re-running them",
    "TIMED_OUT": "Redrive the execution (it resumes at the step that was running) or raise "
    "executionTimeoutMinutes; a redrive gets a fresh execution timeout",
    "ABORTED": "someone stopped it: Redrive it to resume where it stopped, or leave the batch FAILED",
}


@functools.cache
def _dynamodb() -> Any:
    return boto3.client("dynamodb")


@functools.cache
def _sqs() -> Any:
    return boto3.client("sqs")


@functools.cache
def _sfn() -> Any:
    return boto3.client("stepfunctions")


def execution_input(detail: dict[str, Any]) -> str | None:
    """The execution's input: from the event, or, when the event carries none (Step Functions
    leaves ``input`` out, ``inputDetails.included`` false, when it would make the event too large),
    from sfn:DescribeExecution of this very execution."""
    included = (detail.get("inputDetails") or {}).get("included", True)
    if detail.get("input") is not None and included:
        return detail["input"]
    return _sfn().describe_execution(executionArn=detail["executionArn"]).get("input")


def batch_id_of(detail: dict[str, Any]) -> str:
    """The batchId of the execution's input, else the execution name (the workflows' default
    when the input names none)."""
    try:
        given = json.loads(execution_input(detail) or "{}").get("batchId")
    except (ValueError, AttributeError):
        given = None
    return given if isinstance(given, str) and given else detail["name"]


def event_key(event: dict[str, Any]) -> str:
    """One failure of one execution: its ARN and stop date (a redriven execution that fails again
    stops at another date), the same in every delivery of the event."""
    detail = event["detail"]
    stopped = detail.get("stopDate")
    return f"{detail['executionArn']}@{stopped if stopped is not None else event.get('id', '')}"


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    detail = event["detail"]
    status, error = detail.get("status"), detail.get("error") or ""
    execution_arn = detail["executionArn"]
    logger.append_keys(execution_arn=execution_arn, status=status, error=error)
    if event.get("detail-type") != DETAIL_TYPE or status not in WATCHED_STATUSES:
        logger.warning("not a failed-execution event; ignored")
        return {"action": "ignored"}
    if error in WORKFLOW_REPORTED or error in NOTHING_RAN:
        logger.info("the workflow reported this outcome itself; nothing to record")
        return {"action": "none", "reason": error}
    batch_id = batch_id_of(detail)
    key = event_key(event)
    logger.append_keys(batch_id=batch_id)
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    table = os.environ["STATUS_TABLE_NAME"]
    outcome, before = record_execution_failure(
        _dynamodb(),
        table,
        batch_id=batch_id,
        execution_arn=execution_arn,
        execution_status=status,
        error=error or status,
        now=now,
        event_key=key,
    )
    if key in before.get("guardDeadLettered", []):
        logger.info("this event was recorded and dead-lettered before (a repeated delivery): nothing to do")
        return {"action": "duplicate", "batchId": batch_id}
    recorded = outcome in ("RECORDED", "DUPLICATE")  # DUPLICATE: recorded by an earlier delivery
    message = {
        "kind": "execution",
        "batchId": batch_id,
        "executionArn": execution_arn,
        "stateMachineArn": detail.get("stateMachineArn"),
        "status": status,
        "error": error or status,
        "cause": detail.get("cause"),
        "failedAt": now,
        "statusRecorded": recorded,
        "recovery": RECOVERY[status],
    }
    # Sent, then marked: a delivery that dies in between sends again (at least once, never lost);
    # a delivery after the mark sends nothing.
    _sqs().send_message(QueueUrl=os.environ["DEAD_LETTER_QUEUE_URL"], MessageBody=json.dumps(message))
    mark_guard_dead_lettered(_dynamodb(), table, batch_id=batch_id, event_key=key)
    logger.error("execution ended without the workflow's verdict", extra={"statusRecorded": recorded})
    return {"action": "recorded" if recorded else "dead-lettered", "batchId": batch_id}

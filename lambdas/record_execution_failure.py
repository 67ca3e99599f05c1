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
``FinalStatusConflict``: a refused duplicate) and executions that never started a batch
(``InvalidInput``, ``InvalidManifest``: the caller got the error, nothing ran) are left alone.

The failure stays *at* the failed step (no Catch to a Fail state), so the console's Redrive
(RedriveExecution) resumes the execution at that step without re-running the tasks that succeeded;
record_success lets that very execution finalize over the guard's FAILED record.

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

from fanout_common.final_status import record_execution_failure
from fanout_common.observability import logger, tracer

DETAIL_TYPE = "Step Functions Execution Status Change"
WATCHED_STATUSES = ("FAILED", "TIMED_OUT", "ABORTED")
WORKFLOW_REPORTED = ("BatchFailed", "FinalStatusConflict")
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


def batch_id_of(detail: dict[str, Any]) -> str:
    """The batchId of the execution's input, else the execution name (the workflows' default)."""
    try:
        given = json.loads(detail.get("input") or "{}").get("batchId")
    except (ValueError, AttributeError):
        given = None
    return given if isinstance(given, str) and given else detail["name"]


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
    logger.append_keys(batch_id=batch_id)
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    recorded = record_execution_failure(
        _dynamodb(),
        os.environ["STATUS_TABLE_NAME"],
        batch_id=batch_id,
        execution_arn=execution_arn,
        execution_status=status,
        error=error or status,
        now=now,
    )
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
    _sqs().send_message(QueueUrl=os.environ["DEAD_LETTER_QUEUE_URL"], MessageBody=json.dumps(message))
    logger.error("execution ended without the workflow's verdict", extra={"statusRecorded": recorded})
    return {"action": "recorded" if recorded else "dead-lettered", "batchId": batch_id}

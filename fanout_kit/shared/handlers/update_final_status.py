"""UpdateFinalStatus: reached only when every task of the batch succeeded. Writes the batch's
SUCCEEDED record exactly once (see fanout_kit.shared.final_status for the rules), with ``resultsAt``:
where the batch's results are (``fanout results``)."""

import functools
import os
from datetime import datetime, timezone
from typing import Any

import boto3
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.shared.final_status import record_success, s3_results_at
from fanout_kit.shared.observability import logger, tracer


@functools.cache
def _dynamodb() -> Any:
    return boto3.client("dynamodb")


def results_at(event: dict[str, Any]) -> str:
    """The Map's ResultWriter manifest (``resultWriterDetails``: the Distributed Map's
    ``ResultWriterDetails``), the ledger's marks (``resultsAt``, given by its consumer), else the
    execution itself (the Parallel: its history)."""
    details = event.get("resultWriterDetails")
    if isinstance(details, dict) and details.get("Bucket") and details.get("Key"):
        return s3_results_at(details["Bucket"], details["Key"])
    return event.get("resultsAt") or event["executionArn"]


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    batch_id = event["batchId"]
    logger.append_keys(batch_id=batch_id, execution_arn=event.get("executionArn"))
    # results: {task name: {"task", "status", ...}} from the Parallel state; SKIPPED tasks (a
    # redrive's) did not run in this execution.
    results = event.get("results") or {}
    ran = [name for name, r in results.items() if r.get("status") == "SUCCEEDED"]
    result = record_success(
        _dynamodb(),
        os.environ["STATUS_TABLE_NAME"],
        batch_id=batch_id,
        execution_arn=event["executionArn"],
        ran_tasks=ran,
        redrive_of=event.get("redriveOf"),
        now=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        results_at=results_at(event),
    )
    logger.info("final status", extra=result.to_dict())
    return result.to_dict()

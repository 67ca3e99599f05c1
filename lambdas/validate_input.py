"""ValidateInput: first state of the Parallel workflow. Normalizes the execution input or fails
the execution at once with ``InvalidInput`` naming every bad field (nothing has run yet)."""

import os

from aws_lambda_powertools import Logger, Tracer

from fanout_common.validation import validate_batch_input

logger = Logger()
tracer = Tracer()


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event, context):
    task_names = [n for n in os.environ["TASK_NAMES"].split(",") if n]
    normalized = validate_batch_input(
        event.get("input"), task_names, execution_name=event.get("executionName")
    )
    logger.append_keys(batch_id=normalized["batchId"])
    logger.info("input accepted", extra={"tasks": sorted(normalized["tasks"])})
    return normalized

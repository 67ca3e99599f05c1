"""ValidateInput: first state of the Parallel workflow. Normalizes the execution input or fails
the execution at once with ``InvalidInput`` naming every bad field (nothing has run yet)."""

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.shared.observability import logger, tracer
from fanout_kit.patterns.parallel.validation import validate_batch_input


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    task_names = [n for n in os.environ["TASK_NAMES"].split(",") if n]
    normalized = validate_batch_input(
        event.get("input"), task_names, execution_name=event.get("executionName")
    )
    logger.append_keys(batch_id=normalized["batchId"])
    logger.info("input accepted", extra={"tasks": sorted(normalized["tasks"])})
    return normalized

"""How this app's example tasks are written: ``logic(task) -> output`` wrapped into a Lambda
handler with Powertools (structured logs with batch id, task id and attempt on every line, X-Ray
tracing, metrics TaskSucceeded / TaskFailed / TaskRetried per task) and the kit's runtime contract
(``fanout_runtime``: the event, the error names, the fault switch, the output cap).

This is the app's own code, as yours would be: it imports ``fanout_runtime`` (the runtime layer
the constructs attach) and Powertools (the Powertools layer of KitFunction), nothing else of the
kit, so each task's code asset holds only ``tasks/`` (``stacks/app_functions.py``).

The state machine invokes each task with::

    {"batchId": "...", "task": "ChargePayment", "input": {...the task's payload...},
     "attempt": 0, "executionArn": "arn:aws:states:...:execution:..."}

A task returns a JSON object (its output) or raises: ``RetryableTaskError`` to be retried with
backoff, ``NonRetryableTaskError`` to go straight to the dead-letter queue, anything else is not
retried either (unless the task names it in ``retry_on``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_runtime import faults
from fanout_runtime.errors import NonRetryableTaskError
from fanout_runtime.events import TASK_OUTPUT_MAX_BYTES

TASK_SUCCEEDED_METRIC = "TaskSucceeded"
TASK_FAILED_METRIC = "TaskFailed"
TASK_RETRIED_METRIC = "TaskRetried"

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@dataclass(frozen=True)
class TaskEvent:
    batch_id: str
    task: str
    payload: dict[str, Any]
    attempt: int  # 0-based
    execution_arn: str

    @classmethod
    def parse(cls, event: Mapping[str, Any]) -> "TaskEvent":
        try:
            return cls(
                batch_id=str(event["batchId"]),
                task=str(event["task"]),
                payload=dict(event.get("input") or {}),
                attempt=int(event.get("attempt") or 0),
                execution_arn=str(event.get("executionArn") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise NonRetryableTaskError(
                f"task event must carry batchId, task, input, attempt: {exc}"
            ) from exc


def check_output_size(task: TaskEvent, output: Any) -> None:
    """An output over TASK_OUTPUT_MAX_BYTES would fail the whole execution with
    States.DataLimitExceeded (no Catch runs): fail the task instead, not retryable (its work ran;
    running it again returns the same output), so it is dead-lettered with its context."""
    size = len(json.dumps(output, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    if size > TASK_OUTPUT_MAX_BYTES:
        raise NonRetryableTaskError(
            f"{task.task} output: {size:,} bytes of JSON, over the {TASK_OUTPUT_MAX_BYTES:,}-byte cap; "
            "return a reference to large results (an S3 key), not the data"
        )


def task_handler(
    logic: Callable[[TaskEvent], dict[str, Any]],
) -> Callable[[dict[str, Any], LambdaContext], dict[str, Any]]:
    """Turn ``logic(task) -> output`` into a Lambda handler (module docstring)."""

    @tracer.capture_lambda_handler
    @logger.inject_lambda_context
    @metrics.log_metrics
    @functools.wraps(logic)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        task = TaskEvent.parse(event)
        # This invocation's keys only: the local engine runs every handler in one process
        # (Parallel branches on threads), where plain append_keys would leak into other lines.
        logger.thread_safe_append_keys(batch_id=task.batch_id, task_id=task.task, attempt=task.attempt + 1)
        try:
            if task.attempt:
                metrics.add_metric(name=TASK_RETRIED_METRIC, unit=MetricUnit.Count, value=1)
            try:
                faults.raise_simulated_failure(task.payload, task.task, task.attempt)
                output = logic(task)
                check_output_size(task, output)
            except Exception as exc:
                metrics.add_metric(name=TASK_FAILED_METRIC, unit=MetricUnit.Count, value=1)
                logger.warning("task failed", extra={"error": type(exc).__name__})
                raise
            metrics.add_metric(name=TASK_SUCCEEDED_METRIC, unit=MetricUnit.Count, value=1)
            logger.info("task succeeded")
            return output
        finally:
            logger.thread_safe_clear_keys()

    return handler

"""What every child task Lambda shares: the event it receives and the demo's fault switch.

The state machine invokes each task with::

    {"batchId": "...", "task": "ChargePayment", "input": {...the task's payload...},
     "attempt": 0, "executionArn": "arn:aws:states:...:execution:..."}

``attempt`` is ``$$.State.RetryCount`` (0 on the first try). A task returns a JSON object (its
output) or raises: ``RetryableTaskError`` to be retried with backoff, ``NonRetryableTaskError`` to
go straight to the dead-letter queue, anything else is treated as not retryable either.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_runtime.errors import NonRetryableTaskError, RetryableTaskError

from .limits import TASK_OUTPUT_MAX_BYTES, over_cap_message, payload_size
from .metric_names import TASK_FAILED_METRIC, TASK_RETRIED_METRIC, TASK_SUCCEEDED_METRIC
from .observability import MetricUnit, logger, metrics, tracer
from .simulation import MODES, SIMULATE_KEY

HANG_SECONDS = 900  # Lambda's maximum timeout: a "hang" outlives any function's timeout


def hang(seconds: float) -> None:
    """Mode "timeout" (or "hang"): keep running until Lambda stops the function at its timeout (AWS
    then reports ``Sandbox.Timedout``, or ``Lambda.Unknown``). The local engine replaces this with its
    simulated clock."""
    time.sleep(seconds)


def exhaust_memory() -> None:
    """Mode "oom": allocate until Lambda stops the function at its memory size (AWS then reports
    ``Runtime.OutOfMemory``, or ``Lambda.Unknown``). The local engine replaces this."""
    hoard = []
    while True:
        hoard.append(bytearray(64 * 1024 * 1024))


def crash() -> None:
    """Mode "crash": the runtime process exits mid-invocation (AWS then reports
    ``Runtime.ExitError``, or ``Lambda.Unknown``). The local engine replaces this."""
    os._exit(1)


@dataclass(frozen=True)
class TaskEvent:
    batch_id: str
    task: str
    payload: dict[str, Any]
    attempt: int
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


def raise_simulated_failure(event: TaskEvent) -> None:
    """Fail on purpose when the payload asks for it, so Retry, Catch and the DLQ can be watched.

    ``"simulateFailure": {"mode": "transient", "times": 2}`` fails the first 2 attempts with a
    retryable error; ``{"mode": "permanent"}`` fails every attempt (retries exhaust, DLQ);
    ``{"mode": "fatal"}`` fails with a non-retryable error (no retry, DLQ);
    ``{"mode": "timeout"}`` (or ``"hang"``) runs past the function's timeout on every attempt;
    ``{"mode": "oom"}`` runs out of memory, ``{"mode": "crash"}`` exits the runtime, every attempt.
    """
    spec = event.payload.get(SIMULATE_KEY)
    if not spec:
        return
    if not isinstance(spec, Mapping) or spec.get("mode") not in MODES:
        modes = "|".join(f'"{m}"' for m in MODES)
        raise NonRetryableTaskError(f'input.{SIMULATE_KEY} must be {{"mode": {modes}, "times": N}}, got {spec!r}')
    mode = spec["mode"]
    if mode in ("timeout", "hang"):
        hang(HANG_SECONDS)
    if mode == "oom":
        exhaust_memory()
    if mode == "crash":
        crash()
    where = f"{event.task} (attempt {event.attempt + 1})"
    if mode == "fatal":
        raise NonRetryableTaskError(f"simulated non-retryable failure of {where}")
    if mode == "permanent":
        raise RetryableTaskError(f"simulated permanent failure of {where}")
    if event.attempt < int(spec.get("times", 1)):
        raise RetryableTaskError(f"simulated transient failure of {where}")


def check_output_size(task: TaskEvent, output: Any) -> None:
    """An output over TASK_OUTPUT_MAX_BYTES would fail the whole execution with
    States.DataLimitExceeded (no Catch runs): fail the task instead, not retryable (its work ran;
    running it again returns the same output), so it is dead-lettered with its context."""
    size = payload_size(output)
    if size > TASK_OUTPUT_MAX_BYTES:
        raise NonRetryableTaskError(
            over_cap_message(
                f"{task.task} output", size, TASK_OUTPUT_MAX_BYTES,
                "return a reference to large results (an S3 key), not the data",
            )
        )


def task_handler(
    logic: Callable[[TaskEvent], dict[str, Any]],
) -> Callable[[dict[str, Any], LambdaContext], dict[str, Any]]:
    """Turn ``logic(task) -> output`` into a Lambda handler with structured logs (batch id, task
    id and attempt on every line), X-Ray tracing, metrics (TaskSucceeded / TaskFailed /
    TaskRetried, per task) and the demo's fault switch."""

    @tracer.capture_lambda_handler
    @logger.inject_lambda_context
    @metrics.log_metrics
    @functools.wraps(logic)
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        task = TaskEvent.parse(event)
        # This invocation's keys only: in Lambda one process runs one invocation at a time, but the
        # local engine runs every handler in one process (Parallel branches on threads), where
        # plain append_keys would leak task_id/attempt into the next function's lines.
        logger.thread_safe_append_keys(batch_id=task.batch_id, task_id=task.task, attempt=task.attempt + 1)
        try:
            if task.attempt:
                metrics.add_metric(name=TASK_RETRIED_METRIC, unit=MetricUnit.Count, value=1)
            try:
                raise_simulated_failure(task)
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

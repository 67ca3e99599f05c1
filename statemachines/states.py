"""State builders both workflows use."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from lambdas.fanout_common import errors
from statemachines.retry_policy import LAMBDA_TRANSIENT_ERRORS, RetrySettings

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stacks.config import TaskSpec


def retry_props(settings: RetrySettings, errors_: Sequence[str]) -> dict:
    """Keyword arguments of ``State.add_retry`` for this policy (exponential, capped, full jitter)."""
    return dict(
        errors=list(errors_),
        interval=Duration.seconds(settings.interval_seconds),
        max_attempts=settings.max_attempts,
        backoff_rate=settings.backoff_rate,
        max_delay=Duration.seconds(settings.max_delay_seconds),
        jitter_strategy=sfn.JitterType.FULL,
    )


def invoke(scope: Construct, state_id: str, fn: lambda_.IFunction, payload: dict, **kw) -> tasks.LambdaInvoke:
    return tasks.LambdaInvoke(
        scope,
        state_id,
        lambda_function=fn,
        payload=sfn.TaskInput.from_object(payload),
        # arn:aws:states:::lambda:invoke (not the bare function ARN): Lambda API errors then surface
        # as Lambda.ServiceException etc., which the Retry rules below match.
        payload_response_only=False,
        retry_on_service_exceptions=False,  # our own Retry rules below, from configuration
        **kw,
    )


def add_task_retries(task: sfn.TaskStateBase, spec: "TaskSpec") -> None:
    """The Retry rules of a child task, first match wins: a non-retryable error is never retried
    (MaxAttempts 0, stated explicitly), then the Lambda service's transient errors, then the
    task's own retryable error, each with its configured backoff."""
    task.add_retry(errors=[errors.NON_RETRYABLE], max_attempts=0)
    task.add_retry(**retry_props(spec.transient, LAMBDA_TRANSIENT_ERRORS))
    task.add_retry(**retry_props(spec.retryable, [errors.RETRYABLE]))

"""State builders both workflows use."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from dataclasses import dataclass

from aws_cdk import aws_dynamodb as dynamodb

from fanout_runtime import errors
from fanout_runtime.errors import FINAL_STATUS_CONFLICT
from fanout_kit.shared.final_status import (
    BATCH_NOT_CONFIRMED,
    FAILED,
    FAILURE_CONDITION_EXPRESSION,
    FAILURE_EXPRESSION_NAMES,
    SUCCEEDED,
)
from fanout_kit.shared.retry_policy import (
    AMBIGUOUS_ERRORS,
    DYNAMODB_TRANSIENT_ERRORS,
    KIT_LAMBDA_RETRY_ERRORS,
    LAMBDA_TRANSIENT_ERRORS,
    RetrySettings,
)


@dataclass(frozen=True)
class WorkflowTask:
    """A child task as the workflows see it: its function, and the Retry rules of its Invoke."""

    name: str
    function: lambda_.IFunction
    description: str
    transient: RetrySettings  # Lambda service errors
    retryable: RetrySettings  # the task raised RetryableTaskError (or one of retry_on)
    ambiguous: RetrySettings  # it timed out, ran out of memory or crashed (AMBIGUOUS_ERRORS)
    retry_on: tuple[str, ...] = ()  # the task's own error names retried like RetryableTaskError
    never_retry: tuple[str, ...] = ()  # the task's own error names dead-lettered at once


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


# How much longer a Lambda task state waits than the function may run. Step Functions' task timeout
# covers the whole Invoke call: the function's init phase (up to 10 s on demand, not counted in the
# function's own timeout), its run (up to the function timeout) and the call's own latency. A
# state timeout equal to the function timeout can fire while the function is still finishing
# successfully: the task then fails States.Timeout and is retried or dead-lettered although its
# work was done. The margin keeps the state from timing out before the function does.
TASK_TIMEOUT_MARGIN_SECONDS = 30
LAMBDA_DEFAULT_TIMEOUT_SECONDS = 3  # a function created without a timeout


def task_timeout_for(fn: lambda_.IFunction) -> int:
    """The TimeoutSeconds of a task state invoking ``fn``: its timeout plus the margin."""
    timeout = getattr(fn, "timeout", None)
    seconds = int(timeout.to_seconds()) if timeout is not None else LAMBDA_DEFAULT_TIMEOUT_SECONDS
    return seconds + TASK_TIMEOUT_MARGIN_SECONDS


def invoke(scope: Construct, state_id: str, fn: lambda_.IFunction, payload: dict, **kw) -> tasks.LambdaInvoke:
    """Every Lambda task of the kit: the Invoke integration with a task timeout derived from the
    function's own (``task_timeout_for``), never set by hand."""
    if "task_timeout" in kw or "timeout" in kw:
        raise ValueError(
            f"{state_id}: the task timeout is derived from the function's timeout "
            f"(+{TASK_TIMEOUT_MARGIN_SECONDS} s); set the function's timeout instead"
        )
    return tasks.LambdaInvoke(
        scope,
        state_id,
        lambda_function=fn,
        payload=sfn.TaskInput.from_object(payload),
        # arn:aws:states:::lambda:invoke (not the bare function ARN): Lambda API errors then surface
        # as Lambda.ServiceException etc., which the Retry rules below match.
        payload_response_only=False,
        retry_on_service_exceptions=False,  # our own Retry rules below, from configuration
        task_timeout=sfn.Timeout.duration(Duration.seconds(task_timeout_for(fn))),
        **kw,
    )


def add_task_retries(task: sfn.TaskStateBase, spec: WorkflowTask) -> None:
    """The Retry rules of a child task, first match wins: a non-retryable error (and the task's
    ``never_retry`` names) is never retried (MaxAttempts 0, stated explicitly); an ambiguous outcome
    (timeout, out of memory, crash: the work may be done) only as ``spec.ambiguous`` says (default
    0: caught and dead-lettered); then the Lambda service's transient errors, then the retryable
    error (and the task's ``retry_on`` names), each with its configured backoff. Any other error is
    not retried: the Catch dead-letters it."""
    task.add_retry(errors=[errors.NON_RETRYABLE, *spec.never_retry], max_attempts=0)
    task.add_retry(**retry_props(spec.ambiguous, AMBIGUOUS_ERRORS))
    task.add_retry(**retry_props(spec.transient, LAMBDA_TRANSIENT_ERRORS))
    task.add_retry(**retry_props(spec.retryable, [errors.RETRYABLE, *spec.retry_on]))


# Set by a workflow's not-confirmed states (with $.failure.cause): the fan-in lacks positive evidence.
NOT_CONFIRMED_PATH = "$.failure.notConfirmed"
NOT_CONFIRMED_CAUSE_PATH = "$.failure.cause"


def finalize_or_fail(
    scope: Construct,
    *,
    status_write_retry: RetrySettings,
    update_final_status: lambda_.IFunction,
    update_payload: dict,
    status_table: dynamodb.ITable,
    failure_update_expression: str,
    failure_values: dict[str, tasks.DynamoAttributeValue],
    failure_cause_path: str,
    failure_comment: str,
) -> tuple[tasks.LambdaInvoke, tasks.DynamoUpdateItem]:
    """The two ends of a workflow: UpdateFinalStatus (SUCCEEDED exactly once) and
    RecordBatchFailure -> BatchFailed (FAILED recorded, never over a SUCCEEDED batch; the
    execution then fails with ``BatchFailed`` and the given cause), or -> BatchNotConfirmed when
    the state carries ``$.failure.notConfirmed`` (the fan-in found no positive evidence for every
    task or item: the execution fails with ``BatchNotConfirmed`` and ``$.failure.cause``).
    Returns (update, record)."""
    update = invoke(
        scope,
        "UpdateFinalStatus",
        update_final_status,
        update_payload,
        comment="Writes SUCCEEDED exactly once (conditional write); reached only if all succeeded",
        result_selector={"outcome.$": "$.Payload.outcome", "finalizedBy.$": "$.Payload.finalizedBy"},
        result_path="$.finalStatus",
    )
    # Idempotent (a conditional write): an ambiguous outcome is retried too.
    update.add_retry(**retry_props(status_write_retry, KIT_LAMBDA_RETRY_ERRORS))
    batch_failed = sfn.Fail(scope, "BatchFailed", error="BatchFailed", cause_path=failure_cause_path)
    not_confirmed = sfn.Fail(
        scope,
        BATCH_NOT_CONFIRMED,
        comment="Recorded FAILED: the counts or markers did not confirm every task or item",
        error=BATCH_NOT_CONFIRMED,
        cause_path=NOT_CONFIRMED_CAUSE_PATH,
    )
    verdict = (  # presence first: a missing path in a comparison is a runtime error
        sfn.Choice(scope, "Confirmed failure?")
        .when(sfn.Condition.is_present(NOT_CONFIRMED_PATH), not_confirmed)
        .otherwise(batch_failed)
    )
    record = tasks.DynamoUpdateItem(
        scope,
        "RecordBatchFailure",
        comment=failure_comment,
        table=status_table,
        key={"batchId": tasks.DynamoAttributeValue.from_string(sfn.JsonPath.string_at("$.batchId"))},
        update_expression=failure_update_expression,
        condition_expression=FAILURE_CONDITION_EXPRESSION,
        expression_attribute_names=FAILURE_EXPRESSION_NAMES,
        expression_attribute_values={
            ":failed": tasks.DynamoAttributeValue.from_string(FAILED),
            **failure_values,
            ":executionArn": tasks.DynamoAttributeValue.from_string(sfn.JsonPath.string_at("$$.Execution.Id")),
            ":updatedAt": tasks.DynamoAttributeValue.from_string(sfn.JsonPath.string_at("$$.State.EnteredTime")),
            ":one": tasks.DynamoAttributeValue.from_number(1),
        },
        result_path=sfn.JsonPath.DISCARD,
    )
    record.add_retry(**retry_props(status_write_retry, DYNAMODB_TRANSIENT_ERRORS))
    # The batch already SUCCEEDED (another run finalized it): keep that record, still fail this run.
    # (Its error is discarded: a Cause next to the whole batch state could outgrow 256 KiB.)
    record.add_catch(verdict, errors=["DynamoDB.ConditionalCheckFailedException"], result_path=sfn.JsonPath.DISCARD)
    record.next(verdict)
    return update, record


def input_check(
    scope: Construct, state_id: str, fn: lambda_.IFunction, *, retry: RetrySettings, comment: str
) -> tasks.LambdaInvoke:
    """A workflow's first state: the Lambda gets the execution input and name, returns the
    normalized input (or fails the execution with a named error); retried on Lambda service errors
    and ambiguous outcomes (it only reads and checks; PrepareBatch's one write is keyed by the
    execution)."""
    state = invoke(
        scope,
        state_id,
        fn,
        {"input.$": "$", "executionName.$": "$$.Execution.Name"},
        comment=comment,
        output_path="$.Payload",
    )
    state.add_retry(**retry_props(retry, KIT_LAMBDA_RETRY_ERRORS))
    return state


ALREADY_FINALIZED = "ALREADY_FINALIZED"


def redrive_command(workflow: str) -> str:
    """The command that redrives a FAILED batch of this workflow (the batch id follows)."""
    return "fanout dlq redrive --batch" if workflow == "parallel" else f"fanout dlq redrive --workflow {workflow} --batch"


def finished_batch_check(
    scope: Construct,
    *,
    retry: RetrySettings,
    status_table: dynamodb.ITable,
    proceed: sfn.IChainable,
    redrive_path: str | None,
    workflow: str = "parallel",
) -> sfn.IChainable:
    """Read the batch's status record first (direct DynamoDB GetItem, strongly consistent), so
    that a duplicate start (a console double-click, a client retry) runs no task:

    * SUCCEEDED -> the execution succeeds at once with ``finalStatus.outcome = ALREADY_FINALIZED``;
    * FAILED and not a redrive (``redrive_path`` null, or the workflow has none) -> it fails at
      once with ``FinalStatusConflict``, the error UpdateFinalStatus would have given at the end;
    * otherwise (no record, or the redrive of a FAILED batch) -> ``proceed``.

    The conflict's cause gives the recovery that works whatever the failure: ``fanout dlq redrive``
    (a new execution with ``redriveOf``). Not the console's Redrive: RedriveExecution resumes the
    failed execution at its unsuccessful step and does not re-run the steps that succeeded
    (API_RedriveExecution), so after ``BatchFailed`` it only re-runs that Fail state.
    """
    read = tasks.DynamoGetItem(
        scope,
        "ReadBatchStatus",
        comment="A batch that already has a final record runs nothing again",
        table=status_table,
        key={"batchId": tasks.DynamoAttributeValue.from_string(sfn.JsonPath.string_at("$.batchId"))},
        consistent_read=True,
        expression_attribute_names={"#status": "status"},
        projection_expression=[
            tasks.DynamoProjectionExpression().with_attribute("#status"),
            tasks.DynamoProjectionExpression().with_attribute("executionArn"),
            tasks.DynamoProjectionExpression().with_attribute("finalizedBy"),
        ],
        result_path="$.recorded",
    )
    read.add_retry(**retry_props(retry, DYNAMODB_TRANSIENT_ERRORS))
    already = sfn.Pass(
        scope,
        "AlreadyFinalized",
        comment="A duplicate start of a SUCCEEDED batch: nothing runs, the recorded verdict stands",
        parameters={"outcome": ALREADY_FINALIZED, "finalizedBy.$": "$.recorded.Item.finalizedBy.S"},
        result_path="$.finalStatus",
    )
    conflict = sfn.Fail(
        scope,
        "DuplicateOfFailedBatch",
        comment="A FAILED batch runs again only as a redrive of the execution that recorded it",
        error=FINAL_STATUS_CONFLICT,
        cause_path=sfn.JsonPath.format(
            "batch {} was recorded FAILED by {}; a FAILED batch is finalized only by a redrive of that "
            f"execution: run `{redrive_command(workflow)} {{}}` (a new execution of its dead-lettered "
            "work, input field redriveOf). Redrive in the console re-runs only the step that failed, "
            "which after BatchFailed finalizes nothing",
            sfn.JsonPath.string_at("$.batchId"),
            sfn.JsonPath.string_at("$.recorded.Item.executionArn.S"),
            sfn.JsonPath.string_at("$.batchId"),
        ),
    )
    # Two Choices: a missing path in a comparison is a runtime error, so presence is tested first.
    status = "$.recorded.Item.status.S"
    final = sfn.Choice(scope, "BatchAlreadyFinal?").when(sfn.Condition.string_equals(status, SUCCEEDED), already)
    if redrive_path is None:
        final.when(sfn.Condition.string_equals(status, FAILED), conflict)
    else:
        final.when(
            sfn.Condition.and_(sfn.Condition.string_equals(status, FAILED), sfn.Condition.is_null(redrive_path)),
            conflict,
        )
    final.otherwise(proceed)
    recorded = (  # the first rule is the usual path (happy-path tools follow first rules)
        sfn.Choice(scope, "BatchRecorded?")
        .when(sfn.Condition.not_(sfn.Condition.is_present("$.recorded.Item")), proceed)
        .otherwise(final)
    )
    return read.next(recorded)

"""The Parallel fan-out workflow, built from configuration (one branch per configured task).

Shape (JSONPath, no variables)::

    ValidateInput ─▶ ReadBatchStatus ─▶ BatchRecorded? ─▶ BatchAlreadyFinal?
                       SUCCEEDED ─▶ AlreadyFinalized (end) · FAILED, not a redrive ─▶ DuplicateOfFailedBatch (Fail)
                 ─▶ RunTasks (Parallel: one branch per task, siblings never cancelled)
                       branch T: Run T? ─▶ Input T ─▶ Run T ──(Retry; Catch States.ALL)──▶ DeadLetter T ─▶ T failed
                                    └──▶ Skip T (redrive only)
                 ─▶ EveryTaskReported? ─▶ AllTasksSucceeded?
                       every branch SUCCEEDED (SKIPPED in a redrive only) ─▶ UpdateFinalStatus ─▶ (end)
                       a task without a marker, or with one not SUCCEEDED/FAILED/SKIPPED-in-a-redrive
                         ─▶ T not confirmed ─▶ UnconfirmedTask ─▶ RecordBatchFailure ─▶ BatchNotConfirmed (Fail)
                       otherwise ─▶ CountFailedTasks ─▶ RecordBatchFailure ─▶ BatchFailed (Fail)

A branch whose task exhausted its retries ends *successfully* with ``{"status": "FAILED"}`` after the
DLQ send, so its siblings keep running; the decision after the Parallel state reads those markers
(fail-closed: UpdateFinalStatus needs positive evidence that every branch succeeded).

Payload budget (``fanout_kit.shared.limits``, checked by ``fanout_kit/shared/payload_budget.py``): a branch
starts with the whole state, but ``Input T`` keeps only the ids and T's own payload before T runs,
so the error its Catch merges (a Cause of up to 32,768 characters) never lands next to the other
tasks' payloads; the DLQ send's and the failure record's Catches discard their error; the
SUCCEEDED marker does not carry the task's output.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from fanout_kit.shared.final_status import (
    BATCH_NOT_CONFIRMED,
    FAILED,
    FAILURE_UPDATE_EXPRESSION,
    SUCCEEDED,
)
from fanout_kit.shared.retry_policy import SQS_TRANSIENT_ERRORS, RetrySettings
from fanout_kit.shared.states import (
    WorkflowTask,
    add_task_retries,
    finalize_or_fail,
    finished_batch_check,
    input_check,
    invoke,
    retry_props,
)

SKIPPED = "SKIPPED"
FAILURES_PATH = "$.outcome.failedTasks"
# The count of failed tasks, computed by a Pass before the failure is recorded: a Fail state's
# CausePath may use only States.Format, JsonToString, ArrayGetItem, Base64Encode/Decode, Hash and
# UUID (https://docs.aws.amazon.com/step-functions/latest/dg/state-fail.html), not ArrayLength.
FAILED_COUNT_PATH = "$.outcome.failedCount.value"


def _branch(
    scope: Construct, spec: WorkflowTask, dlq_send_retry: RetrySettings, dlq: sqs.IQueue
) -> sfn.IChainable:
    name = spec.name
    own_input = sfn.Pass(
        scope,
        f"Input {name}",
        comment=f"Keeps the ids and {name}'s own payload: a failure's error is merged into this, "
        "never into the whole execution input",
        parameters={"batchId.$": "$.batchId", "redriveOf.$": "$.redriveOf", "input.$": f"$.tasks.{name}"},
    )
    run = invoke(
        scope,
        f"Run {name}",
        spec.function,
        {
            "batchId.$": "$.batchId",
            "task": name,
            "input.$": "$.input",
            "attempt.$": "$$.State.RetryCount",
            "executionArn.$": "$$.Execution.Id",
        },
        comment=spec.description,
        # The marker only: the task's output stays in the history (TaskSucceeded), not in the state.
        result_selector={"task": name, "status": SUCCEEDED},
    )
    add_task_retries(run, spec)

    failed_marker = {"task": name, "status": FAILED, "failedTask": name, "error.$": "$.failure.Error"}
    dead_lettered = sfn.Pass(
        scope, f"{name} dead-lettered", parameters={**failed_marker, "deadLettered": True}
    )
    not_dead_lettered = sfn.Pass(
        scope,
        f"{name} failed, DLQ send failed",
        comment="The DLQ send exhausted its retries: the context and the send's error stay in this "
        "execution's history",
        parameters={**failed_marker, "deadLettered": False},
    )
    dead_letter = tasks.SqsSendMessage(
        scope,
        f"DeadLetter {name}",
        comment=f"Sends the exhausted {name} task with its full context to the dead-letter queue",
        queue=dlq,
        message_body=sfn.TaskInput.from_object(
            {
                "batchId.$": "$.batchId",
                "task": name,
                "input.$": "$.input",
                "error.$": "$.failure.Error",
                "cause.$": "$.failure.Cause",
                "executionArn.$": "$$.Execution.Id",
                "stateMachineArn.$": "$$.StateMachine.Id",
                "redriveOf.$": "$.redriveOf",
                "failedAt.$": "$$.State.EnteredTime",
                "retryPolicy": {
                    "retryableMaxAttempts": spec.retryable.max_attempts,
                    "transientMaxAttempts": spec.transient.max_attempts,
                    "ambiguousMaxAttempts": spec.ambiguous.max_attempts,
                },
            }
        ),
        result_path=sfn.JsonPath.DISCARD,
    )
    dead_letter.add_retry(**retry_props(dlq_send_retry, SQS_TRANSIENT_ERRORS))
    # Its error is not kept (a second Cause next to the task's could outgrow 256 KiB): the
    # history has it, in DeadLetter T's TaskFailed event.
    dead_letter.add_catch(not_dead_lettered, errors=[sfn.Errors.ALL], result_path=sfn.JsonPath.DISCARD)
    run.add_catch(dead_letter.next(dead_lettered), errors=[sfn.Errors.ALL], result_path="$.failure")

    skip = sfn.Pass(
        scope,
        f"Skip {name}",
        comment="Only a redrive runs a subset of the tasks; the others succeeded in the redriven run",
        parameters={"task": name, "status": SKIPPED},
    )
    return (
        sfn.Choice(scope, f"Run {name}?")
        .when(sfn.Condition.is_present(f"$.tasks.{name}"), own_input.next(run))
        .otherwise(skip)
    )


def build_parallel_workflow(
    scope: Construct,
    *,
    child_tasks: Sequence[WorkflowTask],
    validate_input: lambda_.IFunction,
    update_final_status: lambda_.IFunction,
    dlq: sqs.IQueue,
    status_table: dynamodb.ITable,
    dlq_send_retry: RetrySettings,
    status_write_retry: RetrySettings,
) -> sfn.IChainable:
    """One branch per task of ``child_tasks``; ``dlq_send_retry`` retries each branch's DLQ send,
    ``status_write_retry`` the input check and the status reads and writes."""
    validate = input_check(
        scope,
        "ValidateInput",
        validate_input,
        retry=status_write_retry,
        comment="Fails the execution with InvalidInput (naming the field) before any task runs",
    )

    parallel = sfn.Parallel(
        scope,
        "RunTasks",
        comment="One branch per task; a failed task ends its branch with a FAILED marker, so "
        "siblings are never cancelled",
        # Branch results keyed by task name. (Index-then-field paths such as
        # $.results[0].status are avoided on purpose: moto 5.2.5 evaluates them to a list.)
        result_selector={
            "byTask": {f"{b.name}.$": f"$[{i}]" for i, b in enumerate(child_tasks)},
            "failedTasks.$": "$[*].failedTask",
        },
        result_path="$.outcome",
    )
    for task in child_tasks:
        parallel.branch(_branch(scope, task, dlq_send_retry, dlq))

    update, record_failure = finalize_or_fail(
        scope,
        status_write_retry=status_write_retry,
        update_final_status=update_final_status,
        update_payload={
            "batchId.$": "$.batchId",
            "executionArn.$": "$$.Execution.Id",
            "redriveOf.$": "$.redriveOf",
            "results.$": "$.outcome.byTask",
        },
        status_table=status_table,
        failure_update_expression=FAILURE_UPDATE_EXPRESSION,
        failure_values={
            ":failedTasks": tasks.DynamoAttributeValue.from_string_set(sfn.JsonPath.list_at(FAILURES_PATH)),
        },
        failure_cause_path=sfn.JsonPath.format(
            "{} of {} tasks failed: {} (retries exhausted, or not retryable; context: the dead-letter "
            "queue, or the history of this execution if the send failed)",
            sfn.JsonPath.string_at(FAILED_COUNT_PATH),
            str(len(child_tasks)),
            sfn.JsonPath.json_to_string(sfn.JsonPath.list_at(FAILURES_PATH)),
        ),
        failure_comment="Records FAILED with the failed tasks; never overwrites a SUCCEEDED batch",
    )

    # Fail closed: finalize only with a SUCCEEDED marker from every configured task (SKIPPED only
    # in a redrive, where ValidateInput let the input name only some tasks). A task without a
    # marker, or with one the verdict does not know, is not confirmed: the batch is recorded FAILED
    # with that task (so a redrive re-runs it) and the execution fails BatchNotConfirmed.
    # Two Choices, presence first: a missing path in a comparison is a runtime error.
    unconfirmed = sfn.Pass(
        scope,
        "UnconfirmedTask",
        comment="The task without a marker is recorded as failed: a redrive must re-run it",
        parameters={"failedTasks.$": "States.Array($.failure.task)"},
        result_path="$.outcome",
    )
    unconfirmed.next(record_failure)
    missing: dict[str, sfn.Pass] = {}
    for b in child_tasks:
        missing[b.name] = sfn.Pass(
            scope,
            f"{b.name} not confirmed",
            parameters={
                "error": BATCH_NOT_CONFIRMED,
                "notConfirmed": True,
                "task": b.name,
                "cause": f"task {b.name} left no SUCCEEDED or FAILED marker (nor SKIPPED in a redrive): "
                "whether it ran is not known, so the batch is not finalized; redrive the batch with "
                f"{b.name} in tasks",
            },
            result_path="$.failure",
        )
        missing[b.name].next(unconfirmed)

    def status(b: WorkflowTask) -> str:
        return f"$.outcome.byTask.{b.name}.status"

    def skipped_in_redrive(b: WorkflowTask) -> sfn.Condition:
        return sfn.Condition.and_(
            sfn.Condition.string_equals(status(b), SKIPPED), sfn.Condition.is_string("$.redriveOf")
        )

    def known(b: WorkflowTask) -> sfn.Condition:
        return sfn.Condition.or_(
            sfn.Condition.string_equals(status(b), SUCCEEDED),
            sfn.Condition.string_equals(status(b), FAILED),
            skipped_in_redrive(b),
        )

    all_succeeded = sfn.Condition.and_(
        *[
            sfn.Condition.or_(sfn.Condition.string_equals(status(b), SUCCEEDED), skipped_in_redrive(b))
            for b in child_tasks
        ]
    )
    count_failures = sfn.Pass(
        scope,
        "CountFailedTasks",
        comment="How many tasks failed, for BatchFailed's cause",
        parameters={"value": sfn.JsonPath.array_length(sfn.JsonPath.list_at(FAILURES_PATH))},
        result_path="$.outcome.failedCount",
    )
    decide = sfn.Choice(scope, "AllTasksSucceeded?").when(all_succeeded, update)
    for b in child_tasks:
        decide.when(sfn.Condition.not_(known(b)), missing[b.name])
    decide.otherwise(count_failures.next(record_failure))
    markers = sfn.Choice(scope, "EveryTaskReported?").when(
        sfn.Condition.and_(*[sfn.Condition.is_present(status(b)) for b in child_tasks]), decide
    )
    for b in child_tasks:
        markers.when(sfn.Condition.not_(sfn.Condition.is_present(status(b))), missing[b.name])
    markers.otherwise(decide)  # (unreachable: one of the rules above matches)
    parallel.next(markers)
    return validate.next(
        finished_batch_check(scope, retry=status_write_retry, status_table=status_table, proceed=parallel, redrive_path="$.redriveOf")
    )

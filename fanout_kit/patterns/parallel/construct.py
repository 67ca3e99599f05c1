"""ParallelFanOut: a fixed set of child tasks (your Lambda functions) run in a Parallel state.

Each task has its own Retry rules and a Catch that sends it, with its full context, to the
dead-letter queue; a failed task never cancels its siblings; UpdateFinalStatus writes the batch's
SUCCEEDED record once, only when every task succeeded (fanout_kit/patterns/parallel/definition.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from fanout_kit.shared.functions import KitFunction
from fanout_kit.shared.settings import TASK_NAME, AlarmThresholds, ResourceSettings, WorkflowRetries, check_type
from fanout_kit.shared.workflow import FanOutWorkflow
from fanout_kit.shared.checks import ConfigError
from fanout_kit.shared.limits import PARALLEL_INPUT_MAX_BYTES
from fanout_kit.patterns.parallel.definition import build_parallel_workflow
from fanout_kit.shared.retry_policy import RetrySettings, check_error_names
from fanout_kit.shared.states import WorkflowTask


@dataclass(frozen=True)
class FanOutTask:
    """One child task: your function, invoked with ``{batchId, task, input, attempt, executionArn}``
    (``input`` is the execution input's ``tasks.<name>``; ``fanout_runtime.events``).

    ``retry_on``: exception names (as your function reports them, e.g. a library's
    ``ThrottlingException``) retried with the ``retryable`` policy, like RetryableTaskError, without
    wrapping them; ``never_retry``: names dead-lettered at once, like NonRetryableTaskError. Any other
    exception is not retried either (it is dead-lettered); ``never_retry`` states it in the first
    Retry rule, so it holds against any later rule."""

    name: str  # PascalCase letters/digits, at most 40
    function: lambda_.IFunction
    description: str = ""
    transient: RetrySettings | None = None  # None: the workflow's retries.transient
    retryable: RetrySettings | None = None  # None: the workflow's retries.retryable
    ambiguous: RetrySettings | None = None  # None: the workflow's retries.ambiguous (timeouts, crashes)
    retry_on: Sequence[str] = ()
    never_retry: Sequence[str] = ()


def workflow_tasks(tasks: Sequence[FanOutTask], retries: WorkflowRetries, prop: str = "tasks") -> list[WorkflowTask]:
    """The tasks as the workflow builder takes them, checked; errors name ``prop[i].field``."""
    if isinstance(tasks, (str, bytes)) or not isinstance(tasks, Sequence) or not tasks:
        raise ConfigError(f"{prop}: must be a non-empty list of FanOutTask")
    seen: set[str] = set()
    result = []
    for i, task in enumerate(tasks):
        where = f"{prop}[{i}]"
        if not isinstance(task, FanOutTask):
            raise ConfigError(f"{where}: must be a FanOutTask(name, function, ...), got {type(task).__name__}")
        if not isinstance(task.name, str) or not TASK_NAME.match(task.name):
            raise ConfigError(f"{where}.name: must be PascalCase letters/digits, at most 40, got {task.name!r}")
        if task.name in seen:
            raise ConfigError(f"{where}.name: {task.name} is used twice")
        seen.add(task.name)
        if not all(hasattr(task.function, a) for a in ("function_arn", "grant_invoke")):  # IFunction (a jsii protocol)
            raise ConfigError(f"{where}.function: must be a Lambda function (IFunction), got {task.function!r}")
        for kind in ("transient", "retryable", "ambiguous"):
            value = getattr(task, kind)
            check_type(f"{where}.{kind}", value, RetrySettings, none_means=f"the workflow's retries.{kind}")
            if value is not None:
                value._check(f"{where}.{kind}")
                if kind == "ambiguous":
                    value.check_ambiguous(f"{where}.ambiguous")
        retry_on, never_retry = check_error_names(task.retry_on, task.never_retry, where)
        result.append(
            WorkflowTask(
                name=task.name,
                function=task.function,
                description=task.description or task.name,
                transient=task.transient or retries.transient,
                retryable=task.retryable or retries.retryable,
                ambiguous=task.ambiguous or retries.ambiguous,
                retry_on=retry_on,
                never_retry=never_retry,
            )
        )
    return result


class ParallelFanOut(FanOutWorkflow):
    """The Parallel fan-out workflow with its DLQ, status store, failure guard and alarms.

    Read-only attributes: ``state_machine``, ``dead_letter_queue``, ``status_table``,
    ``update_final_status``, ``validate_input``, ``alarm_topic`` (None without alarms), ``alarms``,
    ``failure_guard``."""

    workflow = "parallel"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        tasks: Sequence[FanOutTask],
        retries: WorkflowRetries = WorkflowRetries(),
        existing_dead_letter_queue: sqs.IQueue | None = None,
        dead_letter_queue_props: Mapping[str, Any] | None = None,
        existing_status_table: dynamodb.ITable | None = None,
        status_table_props: Mapping[str, Any] | None = None,
        execution_timeout_minutes: int = 60,
        alarms: AlarmThresholds | None = AlarmThresholds(),
        existing_alarm_topic: sns.ITopic | None = None,
        include_execution_data: bool = False,
        log_group_name: str | None = None,
        settings: ResourceSettings = ResourceSettings(),
        runtime_layer: bool = True,
    ) -> None:
        """``runtime_layer``: attach the kit's runtime layer (``fanout_runtime``: error classes,
        event definitions) to the tasks' functions (those created in this app)."""
        super().__init__(
            scope,
            construct_id,
            settings=settings,
            retries=retries,
            dead_letter_queue_id="TaskDeadLetterQueue",
            existing_dead_letter_queue=existing_dead_letter_queue,
            dead_letter_queue_props=dead_letter_queue_props,
            existing_status_table=existing_status_table,
            status_table_props=status_table_props,
        )
        children = workflow_tasks(tasks, retries)
        self._attach_runtime_layer(runtime_layer, [t.function for t in children])
        self.validate_input = KitFunction(
            self,
            "ValidateInput",
            settings=settings,
            handler="validate_input.handler",
            description="Validates a batch's execution input; names every bad field",
            service="ValidateInput",
            environment={"TASK_NAMES": ",".join(t.name for t in children)},
            timeout_seconds=10,
        ).function
        definition = build_parallel_workflow(
            self.states_scope,
            child_tasks=children,
            validate_input=self.validate_input,
            update_final_status=self.update_final_status,
            dlq=self.dead_letter_queue,
            status_table=self.status_table,
            dlq_send_retry=retries.dlq_send,
            status_write_retry=retries.status_write,
        )
        self._add_state_machine(
            definition,
            {
                "ValidateInput": self.validate_input,
                **{t.name: t.function for t in children},
                "UpdateFinalStatus": self.update_final_status,
            },
            comment=f"Parallel fan-out of {len(children)} tasks ({settings.environment_name}); "
            "finalizes only if all succeed",
            execution_timeout_minutes=execution_timeout_minutes,
            include_execution_data=include_execution_data,
            log_group_name=log_group_name,
            alarms=alarms,
            existing_alarm_topic=existing_alarm_topic,
        )
        self.worst_case_state_bytes = self._check_payload_budget(
            PARALLEL_INPUT_MAX_BYTES,
            fix="each task adds its FAILED marker (its error name) to the outcome: use fewer tasks per workflow",
        )
        self._seal()

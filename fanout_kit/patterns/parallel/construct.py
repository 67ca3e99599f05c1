"""ParallelFanOut: a fixed set of child tasks (your Lambda functions) run in a Parallel state.

Each task has its own Retry rules and a Catch that sends it, with its full context, to the
dead-letter queue; a failed task never cancels its siblings; UpdateFinalStatus writes the batch's
SUCCEEDED record once, only when every task succeeded (fanout_kit/patterns/parallel/definition.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from fanout_kit.shared.functions import KitFunction
from fanout_kit.shared.settings import AlarmThresholds, ResourceSettings, WorkflowRetries
from fanout_kit.shared.workflow import FanOutWorkflow
from fanout_kit.shared.limits import PARALLEL_INPUT_MAX_BYTES
from fanout_kit.patterns.parallel.definition import build_parallel_workflow
from fanout_kit.shared.tasks import FanOutTask, workflow_tasks


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

"""ParallelFanOut: a fixed set of child tasks (your Lambda functions) run in a Parallel state.

Each task has its own Retry rules and a Catch that sends it, with its full context, to the
dead-letter queue; a failed task never cancels its siblings; UpdateFinalStatus writes the batch's
SUCCEEDED record once, only when every task succeeded (fanout_kit/patterns/parallel/definition.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Unpack

from constructs import Construct

from fanout_kit.shared.functions import KitFunction
from fanout_kit.shared.props import WorkflowProps, resolve_props
from fanout_kit.shared.settings import WorkflowRetries
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
        execution_timeout_minutes: int = 60,
        **props: Unpack[WorkflowProps],
    ) -> None:
        """Create the workflow and everything it needs.

        Args:
            scope: The construct's parent (a stack or a construct in one).
            construct_id: The construct's id.
            tasks: The child tasks, at least one, each your Lambda function with its name and its
                own Retry policy (``FanOutTask``). Required.
            retries: The workflow's Retry rules: every task's defaults (``transient``,
                ``retryable``, ``ambiguous``) and the DLQ send and status writes. Default
                ``WorkflowRetries()``.
            execution_timeout_minutes: The execution's timeout (1 to 525,600). Default ``60``.
            **props: The props the workflows share (``WorkflowProps``: dead-letter queue, status
                table, alarms, logging, settings, runtime layer), each optional.

        Raises:
            ConfigError: A prop is wrong; the message names it and the fix.
        """
        props = resolve_props(WorkflowProps, props, "ParallelFanOut", own=("tasks", "retries", "execution_timeout_minutes"))
        settings = props["settings"]
        super().__init__(
            scope,
            construct_id,
            props=props,
            retries=retries,
            dead_letter_queue_id="TaskDeadLetterQueue",
        )
        children = workflow_tasks(tasks, retries)
        self._attach_runtime_layer([t.function for t in children])
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
        )
        self.worst_case_state_bytes = self._check_payload_budget(
            PARALLEL_INPUT_MAX_BYTES,
            fix="each task adds its FAILED marker (its error name) to the outcome: use fewer tasks per workflow",
        )
        self._seal()

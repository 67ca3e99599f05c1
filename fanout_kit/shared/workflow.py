"""What both fan-out workflows share: a dead-letter queue and the batch status store (created or
passed in), UpdateFinalStatus, and at the end the state machine with its logs, tracing, failure
guard, alarms and dashboard. ParallelFanOut and DistributedMapFanOut add their own states."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from fanout_kit.shared.dead_letter_queue import TaskDeadLetterQueue
from fanout_kit.shared.discovery import record_workflow
from fanout_kit.shared.execution_failure_guard import ExecutionFailureGuard
from fanout_kit.shared.feature_flags import pin_feature_flags
from fanout_kit.shared.final_status_store import status_store
from fanout_kit.shared.layer import attach_runtime_layer
from fanout_kit.shared.outputs import REQUIRED_OUTPUTS
from fanout_kit.shared.read_only import ReadOnlyAttributes
from fanout_kit.shared.settings import (
    VENDED_LOGS_PREFIX,
    AlarmThresholds,
    ResourceSettings,
    WorkflowRetries,
    check_type,
)
from fanout_kit.shared.storage import checked_overrides
from fanout_kit.shared.alarms import WorkflowAlarms, subscribe_receivers
from fanout_kit.shared.state_machine import WorkflowStateMachine
from fanout_kit.shared.checks import ConfigError, one_of, whole_number
from fanout_kit.shared.payload_budget import Budget, Leaf, PayloadBudgetError, kit_function_outputs, payload_budget


def stack_unique_suffix(stack: Stack) -> str:
    """The random tail of the stack's id (the last 12 hex digits of the UUID in
    ``arn:...:stack/NAME/UUID``, a token): a new stack of the same name gets another one.

    Why: the workflow's log group must be named (Step Functions' vended logs want the
    ``/aws/vendedlogs/`` prefix), and with removal policy RETAIN it outlives a ``cdk destroy`` or
    the rollback of a failed first deploy; CloudFormation then fails the next create of a group of
    the same name ("already exists"). A name that ends with this suffix is new for every stack."""
    return Fn.select(4, Fn.split("-", Fn.select(2, Fn.split("/", stack.stack_id))))


def emit_outputs(scope: Construct, values: dict[str, str], required: tuple[str, ...]) -> None:
    """One CfnOutput per value; every required one must be among them (a kit defect otherwise)."""
    missing = [name for name in required if name not in values]
    if missing:
        raise AssertionError(f"add_outputs() of {scope.node.path} lacks {missing}")
    for name, value in values.items():
        CfnOutput(scope, name, value=value)


class FanOutWorkflow(ReadOnlyAttributes, Construct):
    """Base of the workflow constructs. Attributes (read-only): ``dead_letter_queue``,
    ``status_table``, ``update_final_status``, then ``state_machine``, ``failure_guard``,
    ``alarm_topic`` (None without alarms), ``alarms``."""

    workflow: str  # "parallel" or "map": names the alarms and the dashboard

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        props: Mapping[str, Any],
        retries: WorkflowRetries,
        dead_letter_queue_id: str,
    ) -> None:
        """``props``: the workflow's ``WorkflowProps``, resolved (``fanout_kit.shared.props``)."""
        super().__init__(scope, construct_id)
        pin_feature_flags(self)  # before any child: the same resources whatever the app's flags
        self._props = props
        settings = props["settings"]
        existing_dead_letter_queue, dead_letter_queue_props = props["existing_dead_letter_queue"], props["dead_letter_queue_props"]
        one_of(existing_dead_letter_queue, dead_letter_queue_props, "existing_dead_letter_queue", "dead_letter_queue_props")
        check_type("retries", retries, WorkflowRetries)
        check_type("settings", settings, ResourceSettings)
        queue_overrides = checked_overrides(dead_letter_queue_props, sqs.Queue, "dead_letter_queue_props")
        self.settings = settings
        self.dead_letter_queue: sqs.IQueue = existing_dead_letter_queue or TaskDeadLetterQueue(
            self, dead_letter_queue_id, settings=settings, overrides=queue_overrides
        ).queue
        store = status_store(self, props)
        self.status_table: dynamodb.ITable = store.table
        self.update_final_status: lambda_.Function = store.update_final_status
        self.states_scope = Construct(self, "States")  # own scope: state names may equal construct ids

    def _attach_runtime_layer(self, functions: list[lambda_.IFunction]) -> None:
        attach = self._props["runtime_layer"]
        check_type("runtime_layer", attach, bool)
        if attach:
            for fn in functions:
                attach_runtime_layer(fn)

    def _add_state_machine(
        self,
        definition: sfn.IChainable,
        functions: dict[str, lambda_.IFunction],
        *,
        comment: str,
        execution_timeout_minutes: int,
    ) -> None:
        """``functions``: every function the state machine invokes, by name (its invoke grants and
        its alarms)."""
        alarms, existing_alarm_topic = self._props["alarms"], self._props["existing_alarm_topic"]
        include_execution_data, log_group_name = self._props["include_execution_data"], self._props["log_group_name"]
        whole_number(execution_timeout_minutes, "execution_timeout_minutes", 1, 525_600, "a Standard execution runs at most a year")
        check_type("alarms", alarms, AlarmThresholds, none_means="no alarms")
        if alarms is None and existing_alarm_topic is not None:
            raise ConfigError("existing_alarm_topic: alarms are off (alarms=None); pass AlarmThresholds() to turn them on")
        if log_group_name is not None and not log_group_name.startswith(VENDED_LOGS_PREFIX):
            raise ConfigError(
                f"log_group_name: must start with {VENDED_LOGS_PREFIX} (Step Functions' vended logs), got {log_group_name!r}"
            )
        self.workflow_construct = WorkflowStateMachine(
            self,
            "Workflow",
            settings=self.settings,
            # "<name>-<the stack's unique suffix>": see stack_unique_suffix.
            log_group_name=Fn.join(
                "-",
                [
                    log_group_name or f"{VENDED_LOGS_PREFIX}{Stack.of(self).stack_name}-{self.node.id}",
                    stack_unique_suffix(Stack.of(self)),
                ],
            ),
            include_execution_data=include_execution_data,
            execution_timeout_minutes=execution_timeout_minutes,
            definition=definition,
            invoked_functions=list(functions.values()),
            comment=comment,
        )
        self.state_machine: sfn.StateMachine = self.workflow_construct.state_machine
        # Executions that end outside the workflow's own verdict leave a record and a DLQ message.
        self.failure_guard = ExecutionFailureGuard(
            self,
            "FailureGuard",
            settings=self.settings,
            state_machine=self.state_machine,
            status_table=self.status_table,
            dlq=self.dead_letter_queue,
        )
        self.alarms: WorkflowAlarms | None = None
        self.alarm_topic: sns.ITopic | None = None
        if alarms is not None:
            self.alarms = WorkflowAlarms(
                self,
                "Alarms",
                settings=self.settings,
                alarms=alarms,
                topic=existing_alarm_topic,
                workflow=self.workflow,
                state_machine=self.state_machine,
                dlq=self.dead_letter_queue,
                functions={**functions, "RecordExecutionFailure": self.failure_guard.function},
            )
            self.alarm_topic = self.alarms.topic
            subscribe_receivers(self, self.alarm_topic, self._props["alarm_email_addresses"],
                                existing_topic=existing_alarm_topic is not None)
        elif self._props["alarm_email_addresses"]:
            raise ConfigError("alarm_email_addresses: alarms are off (alarms=None); pass AlarmThresholds() to turn them on")
        record_workflow(self, self.workflow, self._output_values())  # for the local engine (any app)

    def _output_values(self) -> dict[str, str]:
        """The outputs' values, by name: what ``add_outputs()`` emits and the discovery metadata
        records (one list)."""
        values = {
            "StateMachineArn": self.state_machine.state_machine_arn,
            "DeadLetterQueueUrl": self.dead_letter_queue.queue_url,
            "StatusTableName": self.status_table.table_name,
        }
        if self.alarm_topic is not None:
            values["AlarmTopicArn"] = self.alarm_topic.topic_arn
        return values

    def _definition(self) -> dict:
        """The state machine's ASL as it deploys (tokens such as ARNs replaced by a placeholder)."""
        resolved = Stack.of(self).resolve(self.state_machine.node.default_child.definition_string)
        if isinstance(resolved, dict) and "Fn::Join" in resolved:
            resolved = "".join(p if isinstance(p, str) else "TOKEN" for p in resolved["Fn::Join"][1])
        return json.loads(resolved)

    def _check_payload_budget(self, input_cap: int, *, map_item_bytes: int | None = None, fix: str = "") -> int:
        """Refuse at synth a workflow where a state can exceed AWS's 256 KiB payload limit in the
        worst case (fanout_kit/shared/payload_budget.py; PayloadBudgetError, a ConfigError). Returns
        the largest worst-case state size in bytes."""
        budget = Budget(
            execution_input=Leaf(input_cap),
            function_output=kit_function_outputs(input_cap=input_cap),
            map_item_bytes=map_item_bytes,
        )
        try:
            payload_budget(self._definition(), budget)
        except PayloadBudgetError as exc:
            raise PayloadBudgetError(f"{exc}; {fix}" if fix else str(exc)) from None
        return max(s.worst for s in budget.sizes)

    def add_outputs(self) -> None:
        """The CloudFormation outputs the `fanout` command line and the local engine read
        (``fanout_kit.shared.outputs``: the required ones of this workflow, and AlarmTopicArn)."""
        emit_outputs(self, self._output_values(), REQUIRED_OUTPUTS[self.workflow])

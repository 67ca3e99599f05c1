"""What both workflow stacks share: a dead-letter queue, the batch status store (with
UpdateFinalStatus), and at the end the state machine with logs, tracing, alarms and outputs."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.dead_letter_queue import TaskDeadLetterQueue
from stacks.constructs.execution_failure_guard import ExecutionFailureGuard
from stacks.constructs.final_status_store import FinalStatusStore
from stacks.constructs.workflow_alarms import WorkflowAlarms
from stacks.constructs.workflow_state_machine import WorkflowStateMachine


class WorkflowStack(Stack):
    workflow: str  # "parallel" or "map": names the alarms

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig, dlq_id: str, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.cfg = cfg
        self.dlq = TaskDeadLetterQueue(self, dlq_id, cfg=cfg).queue
        store = FinalStatusStore(self, "FinalStatus", cfg=cfg)
        self.status_table = store.table
        self.update_final_status = store.update_final_status
        self.states_scope = Construct(self, "States")  # own scope: state names may equal construct ids

    def add_state_machine(
        self, definition: sfn.IChainable, functions: dict[str, lambda_.Function], comment: str
    ) -> sfn.StateMachine:
        """``functions``: every function the state machine invokes, by name (its invoke grants and
        its alarms)."""
        self.functions = functions
        self.workflow_construct = WorkflowStateMachine(
            self,
            "Workflow",
            cfg=self.cfg,
            definition=definition,
            invoked_functions=list(functions.values()),
            comment=comment,
            workflow=self.workflow,
        )
        self.state_machine = self.workflow_construct.state_machine
        # Executions that end outside the workflow's own verdict leave a record and a DLQ message.
        self.failure_guard = ExecutionFailureGuard(
            self,
            "FailureGuard",
            cfg=self.cfg,
            state_machine=self.state_machine,
            status_table=self.status_table,
            dlq=self.dlq,
        )
        functions = {**functions, "RecordExecutionFailure": self.failure_guard.function}
        self.alarms = WorkflowAlarms(
            self,
            "Alarms",
            cfg=self.cfg,
            workflow=self.workflow,
            state_machine=self.state_machine,
            dlq=self.dlq,
            functions=functions,
        )
        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "DeadLetterQueueUrl", value=self.dlq.queue_url)
        CfnOutput(self, "StatusTableName", value=self.status_table.table_name)
        CfnOutput(self, "AlarmTopicArn", value=self.alarms.topic.topic_arn)
        return self.state_machine

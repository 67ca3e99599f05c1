"""Stack: the Parallel fan-out workflow of one environment."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.dead_letter_queue import TaskDeadLetterQueue
from stacks.constructs.final_status_store import FinalStatusStore
from stacks.constructs.functions import KitFunction
from stacks.constructs.workflow_alarms import WorkflowAlarms
from stacks.constructs.workflow_state_machine import WorkflowStateMachine
from statemachines.parallel_workflow import TaskBinding, build_parallel_workflow


class ParallelWorkflowStack(Stack):
    """Child task Lambdas run in a Parallel state; exhausted tasks go to the DLQ; the final status
    is written only when every task succeeded."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.cfg = cfg
        self.dlq = TaskDeadLetterQueue(self, "TaskDeadLetterQueue", cfg=cfg).queue
        store = FinalStatusStore(self, "FinalStatus", cfg=cfg)
        self.status_table = store.table
        self.update_final_status = store.update_final_status
        self.validate_input = KitFunction(
            self,
            "ValidateInput",
            cfg=cfg,
            handler="validate_input.handler",
            description="Validates a batch's execution input; names every bad field",
            service="ValidateInput",
            environment={"TASK_NAMES": ",".join(cfg.task_names)},
            timeout_seconds=10,
        ).function
        self.task_functions = {
            spec.name: KitFunction(
                self,
                f"Task{spec.name}",
                cfg=cfg,
                handler=spec.handler,
                description=spec.description,
                service=spec.name,
            ).function
            for spec in cfg.tasks
        }
        # Every function the state machine invokes, by name: its invoke grants and its alarms.
        self.functions = {
            "ValidateInput": self.validate_input,
            **self.task_functions,
            "UpdateFinalStatus": self.update_final_status,
        }
        definition = build_parallel_workflow(
            Construct(self, "States"),  # own scope: state names may equal construct ids here
            cfg=cfg,
            bindings=[TaskBinding(spec, self.task_functions[spec.name]) for spec in cfg.tasks],
            validate_input=self.validate_input,
            update_final_status=self.update_final_status,
            dlq=self.dlq,
            status_table=self.status_table,
        )
        self.workflow = WorkflowStateMachine(
            self,
            "Workflow",
            cfg=cfg,
            definition=definition,
            invoked_functions=list(self.functions.values()),
            comment=f"Parallel fan-out of {len(cfg.tasks)} tasks ({cfg.name}); finalizes only if all succeed",
        )
        self.state_machine = self.workflow.state_machine
        self.alarms = WorkflowAlarms(
            self,
            "Alarms",
            cfg=cfg,
            workflow="parallel",
            state_machine=self.state_machine,
            dlq=self.dlq,
            functions=self.functions,
        )
        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "DeadLetterQueueUrl", value=self.dlq.queue_url)
        CfnOutput(self, "StatusTableName", value=self.status_table.table_name)
        CfnOutput(self, "AlarmTopicArn", value=self.alarms.topic.topic_arn)

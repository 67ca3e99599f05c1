"""A Standard state machine with full CloudWatch logging and X-Ray tracing."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.functions import removal_policy, retention
from stacks.nag_suppressions import acknowledge_state_machine_role


class WorkflowStateMachine(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cfg: EnvironmentConfig,
        definition: sfn.IChainable,
        comment: str,
        invoked_functions: list[lambda_.Function],
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(cfg), removal_policy=removal_policy(cfg)
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment=comment,
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            query_language=sfn.QueryLanguage.JSON_PATH,
            timeout=Duration.minutes(cfg.execution_timeout_minutes),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True
            ),
        )
        acknowledge_state_machine_role(self.state_machine.role, invoked_functions)

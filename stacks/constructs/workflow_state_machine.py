"""A Standard state machine with full CloudWatch logging and X-Ray tracing.

Its log group is named under ``/aws/vendedlogs/states/``: Step Functions delivers logs as a vended
log source, and AWS advises that prefix so the CloudWatch Logs resource policy it maintains stays
under its size limit (https://docs.aws.amazon.com/step-functions/latest/dg/cw-logs.html).
Execution data (every state's input and output) is logged only where the environment says
(``includeExecutionData``: on in dev, off in prod, where payloads carry customer data)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.functions import removal_policy, retention
from stacks.nag_suppressions import acknowledge_state_machine_role


VENDED_LOGS_PREFIX = "/aws/vendedlogs/states/"


def log_group_name(cfg: EnvironmentConfig, workflow: str) -> str:
    return f"{VENDED_LOGS_PREFIX}{cfg.stack_prefix}-{workflow}"


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
        workflow: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=log_group_name(cfg, workflow),
            retention=retention(cfg),
            removal_policy=removal_policy(cfg),
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
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                include_execution_data=cfg.include_execution_data,
            ),
        )
        acknowledge_state_machine_role(self.state_machine.role, invoked_functions)

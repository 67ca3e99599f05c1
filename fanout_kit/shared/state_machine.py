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

from fanout_kit.shared.settings import ResourceSettings
from fanout_kit.shared.functions import removal_policy, retention
from fanout_kit.shared.nag import acknowledge_state_machine_role


class WorkflowStateMachine(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ResourceSettings,
        log_group_name: str,
        include_execution_data: bool,
        execution_timeout_minutes: int,
        definition: sfn.IChainable,
        comment: str,
        invoked_functions: list[lambda_.Function],
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            log_group_name=log_group_name,
            retention=retention(settings),
            removal_policy=removal_policy(settings),
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment=comment,
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            state_machine_type=sfn.StateMachineType.STANDARD,
            query_language=sfn.QueryLanguage.JSON_PATH,
            timeout=Duration.minutes(execution_timeout_minutes),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                include_execution_data=include_execution_data,
            ),
        )
        acknowledge_state_machine_role(self.state_machine.role, invoked_functions)

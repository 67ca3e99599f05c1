"""The execution-failure guard of a workflow: an EventBridge rule on this state machine's
executions that end FAILED, TIMED_OUT or ABORTED, targeting a small Lambda that records the batch
as FAILED (if nothing final is recorded) and sends the context to the workflow's dead-letter queue
(fanout_kit/shared/handlers/record_execution_failure.py).

Why a rule and not a Catch: AWS documents that RedriveExecution "continues the failed execution
from the unsuccessful step and uses the same input", keeps the same execution ARN, and "doesn't
rerun" the steps that succeeded
(https://docs.aws.amazon.com/step-functions/latest/apireference/API_RedriveExecution.html). An execution that
fails *at* UpdateFinalStatus is therefore finalized by the console's Redrive button with no task
re-run; a Catch leading to a Fail state would make that Fail state the step a redrive re-runs.

Nothing is lost on the way: the rule target's dead-letter queue keeps an event EventBridge could
not deliver, and the function's on-failure destination keeps one it could not record (both the
workflow's DLQ, which alarms); the handler records and dead-letters each event once however often
it is delivered.
"""

from __future__ import annotations

from aws_cdk import Duration, Fn, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from fanout_kit.shared.settings import ResourceSettings
from fanout_kit.shared.functions import KitFunction
from fanout_kit.shared.nag import acknowledge_failure_guard

DETAIL_TYPE = "Step Functions Execution Status Change"
WATCHED_STATUSES = ["FAILED", "TIMED_OUT", "ABORTED"]
ASYNC_RETRY_ATTEMPTS = 2  # Lambda's own retries of a failed asynchronous invocation (its maximum)


class ExecutionFailureGuard(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ResourceSettings,
        state_machine: sfn.IStateMachine,
        status_table: dynamodb.ITable,
        dlq: sqs.IQueue,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = KitFunction(
            self,
            "RecordExecutionFailure",
            settings=settings,
            handler="record_execution_failure.handler",
            description="Records FAILED for an execution that failed, timed out or was stopped "
            "outside the workflow's verdict, and dead-letters its context",
            service="RecordExecutionFailure",
            environment={
                "STATUS_TABLE_NAME": status_table.table_name,
                "DEAD_LETTER_QUEUE_URL": dlq.queue_url,
            },
            timeout_seconds=30,
        ).function
        # The conditional FAILED write on this table, the DLQ send, and DescribeExecution of this
        # state machine's executions (an event without input): nothing else.
        self.function.add_to_role_policy(
            iam.PolicyStatement(actions=["dynamodb:UpdateItem"], resources=[status_table.table_arn])
        )
        self.function.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=[dlq.queue_arn]))
        stack = Stack.of(self)
        name = Fn.select(6, Fn.split(":", state_machine.state_machine_arn))
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["states:DescribeExecution"],
                resources=[f"arn:{stack.partition}:states:{stack.region}:{stack.account}:execution:{name}:*"],
            )
        )
        acknowledge_failure_guard(stack, self.function, state_machine)
        # An event the function could not record, after Lambda's own retries of the asynchronous
        # invocation, goes to the DLQ as an invocation record (its requestPayload is the event).
        # (The L1 resource: CDK's SqsDestination would also grant sqs:GetQueueAttributes and
        # GetQueueUrl; Lambda sends with the role's sqs:SendMessage on the DLQ, granted above.)
        lambda_.CfnEventInvokeConfig(
            self,
            "OnFailure",
            function_name=self.function.function_name,
            qualifier="$LATEST",
            maximum_retry_attempts=ASYNC_RETRY_ATTEMPTS,
            maximum_event_age_in_seconds=6 * 3600,
            destination_config=lambda_.CfnEventInvokeConfig.DestinationConfigProperty(
                on_failure=lambda_.CfnEventInvokeConfig.OnFailureProperty(destination=dlq.queue_arn)
            ),
        )
        self.rule = events.Rule(
            self,
            "Rule",
            description="This workflow's executions that ended FAILED, TIMED_OUT or ABORTED",
            event_pattern=events.EventPattern(
                source=["aws.states"],
                detail_type=[DETAIL_TYPE],
                detail={"stateMachineArn": [state_machine.state_machine_arn], "status": WATCHED_STATUSES},
            ),
            # EventBridge retries a failed delivery (throttled, unreachable) for up to 24 h / 185
            # attempts, then sends the event to the target's dead-letter queue (CDK adds the queue
            # policy that lets this rule send: events.amazonaws.com, aws:SourceArn = the rule).
            targets=[
                targets.LambdaFunction(
                    self.function,
                    dead_letter_queue=dlq,
                    retry_attempts=185,
                    max_event_age=Duration.hours(24),
                )
            ],
        )

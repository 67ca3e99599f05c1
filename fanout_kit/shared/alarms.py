"""Alarms, their SNS topic and a dashboard for one workflow (thresholds from cdk.json)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Annotations, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from fanout_kit.shared.settings import EMAIL, AlarmThresholds, ResourceSettings
from fanout_kit.shared.functions import removal_policy
from fanout_kit.shared.checks import ConfigError

NO_RECEIVER_WARNING = "fanout-kit:alarmsReachNoOne"


# Services that publish to the kit's alarm topics. CloudWatch publishes alarm notifications as
# the service principal, so it needs sns:Publish in the topic policy *and* use of the topic's KMS
# key: AWS-managed keys (alias/aws/sns) have policies that cannot be edited and do not allow it,
# hence a customer-managed key ("Enable compatibility between event sources from AWS services and
# encrypted topics", https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html).
ALARM_PUBLISHER = "cloudwatch.amazonaws.com"
KEY_ACTIONS_FOR_PUBLISHER = ["kms:Decrypt", "kms:GenerateDataKey*"]


def alarm_source_conditions(scope: Construct) -> dict:
    """Only this account's CloudWatch alarms in this region (confused-deputy guard)."""
    stack = Stack.of(scope)
    return {
        "StringEquals": {"aws:SourceAccount": stack.account},
        "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:cloudwatch:{stack.region}:{stack.account}:alarm:*"},
    }


def alarm_topic(scope: Construct, construct_id: str, *, settings: ResourceSettings, what: str) -> sns.Topic:
    """The SNS topic alarms notify: encrypted with its own customer-managed key (rotation on)
    that CloudWatch may use, a topic policy that lets CloudWatch publish, TLS only for the rest;
    both grants limited to this account's alarms."""
    key = kms.Key(
        scope,
        f"{construct_id}Key",
        description=f"Encrypts the fan-out kit's {what} alarm topic ({settings.environment_name}); CloudWatch alarms may use it",
        enable_key_rotation=True,
        removal_policy=removal_policy(settings),
    )
    conditions = alarm_source_conditions(scope)
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AllowCloudWatchAlarmsToUseTheKey",
            principals=[iam.ServicePrincipal(ALARM_PUBLISHER)],
            actions=KEY_ACTIONS_FOR_PUBLISHER,
            resources=["*"],  # in a key policy, "*" is this key
            conditions=conditions,
        )
    )
    topic = sns.Topic(
        scope,
        construct_id,
        display_name=f"Fan-out kit {what} alarms ({settings.environment_name})",
        master_key=key,
        enforce_ssl=True,
    )
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="AllowCloudWatchAlarmsToPublish",
            principals=[iam.ServicePrincipal(ALARM_PUBLISHER)],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions=conditions,
        )
    )
    return topic


def checked_email_addresses(addresses: Sequence[str]) -> tuple[str, ...]:
    """The ``alarm_email_addresses`` prop, checked: a sequence of e-mail addresses."""
    if isinstance(addresses, str) or not isinstance(addresses, Sequence):
        raise ConfigError(f"alarm_email_addresses: must be a list of e-mail addresses, got {addresses!r}")
    for address in addresses:
        if not isinstance(address, str) or not EMAIL.match(address):
            raise ConfigError(f"alarm_email_addresses: {address!r} is not an e-mail address")
    return tuple(addresses)


def subscribe_receivers(scope: Construct, topic: sns.ITopic, addresses: Sequence[str], *, existing_topic: bool) -> None:
    """An e-mail subscription per address (each confirmed from the message SNS sends to it); a
    new topic nobody subscribes to gets a synth warning naming the two props that fix it. An
    existing topic is taken as subscribed: whoever owns it routes the alarms."""
    for address in checked_email_addresses(addresses):
        topic.add_subscription(subscriptions.EmailSubscription(address))
    if not addresses and not existing_topic:
        Annotations.of(scope).add_warning_v2(
            NO_RECEIVER_WARNING,
            "the alarms notify a new SNS topic nobody subscribes to: pass alarm_email_addresses=[...] "
            "or existing_alarm_topic, or subscribe to the AlarmTopicArn output",
        )


class WorkflowAlarms(Construct):
    """DLQ has messages, executions failed, executions timed out, Lambda errors and throttles;
    every alarm notifies an encrypted, TLS-only SNS topic; one dashboard shows it all."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ResourceSettings,
        alarms: AlarmThresholds,
        topic: sns.ITopic | None = None,
        workflow: str,
        state_machine: sfn.StateMachine,
        dlq: sqs.Queue,
        functions: dict[str, lambda_.Function],
    ) -> None:
        super().__init__(scope, construct_id)
        thresholds = alarms
        period = Duration.minutes(thresholds.period_minutes)
        self.topic = topic or alarm_topic(self, "Topic", settings=settings, what=workflow)
        self.alarms: dict[str, cloudwatch.Alarm] = {}

        def alarm(name: str, metric: cloudwatch.IMetric, threshold: int, description: str) -> None:
            created = metric.create_alarm(
                self,
                name,
                alarm_description=f"{description} ({workflow}, {settings.environment_name})",
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            created.add_alarm_action(actions.SnsAction(self.topic))
            self.alarms[name] = created

        alarm(
            "DeadLetterQueueHasMessages",
            dlq.metric_approximate_number_of_messages_visible(period=period, statistic="Maximum"),
            thresholds.dlq_visible_messages,
            "Tasks were dead-lettered: inspect with `fanout dlq list`, fix, `fanout dlq redrive`",
        )
        alarm(
            "ExecutionsFailed",
            state_machine.metric_failed(period=period, statistic="Sum"),
            thresholds.executions_failed,
            "Executions ended FAILED (a batch failed, or bad input)",
        )
        alarm(
            "ExecutionsTimedOut",
            state_machine.metric_timed_out(period=period, statistic="Sum"),
            thresholds.executions_timed_out,
            "Executions hit the state machine timeout",
        )
        for name, fn in functions.items():
            alarm(
                f"{name}Errors",
                fn.metric_errors(period=period, statistic="Sum"),
                thresholds.lambda_errors,
                f"{name} Lambda errors (retried tasks count here too)",
            )
            alarm(
                f"{name}Throttles",
                fn.metric_throttles(period=period, statistic="Sum"),
                thresholds.lambda_throttles,
                f"{name} Lambda throttles",
            )

        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            default_interval=Duration.hours(3),
            widgets=[
                [
                    cloudwatch.GraphWidget(
                        title="Executions",
                        left=[
                            state_machine.metric_started(period=period),
                            state_machine.metric_succeeded(period=period),
                            state_machine.metric_failed(period=period),
                            state_machine.metric_timed_out(period=period),
                        ],
                        width=12,
                    ),
                    cloudwatch.GraphWidget(
                        title="Dead-letter queue depth",
                        left=[dlq.metric_approximate_number_of_messages_visible(period=period)],
                        width=12,
                    ),
                ],
                [
                    cloudwatch.GraphWidget(
                        title="Lambda errors",
                        left=[fn.metric_errors(period=period, label=n) for n, fn in functions.items()],
                        width=12,
                    ),
                    cloudwatch.GraphWidget(
                        title="Lambda throttles",
                        left=[fn.metric_throttles(period=period, label=n) for n, fn in functions.items()],
                        width=12,
                    ),
                ],
                [cloudwatch.AlarmStatusWidget(title="Alarms", alarms=list(self.alarms.values()), width=24)],
            ],
        )

"""Stack: the completion ledger of one environment (finalize once, without Step Functions).

    producer ─▶ SQS ChildQueue ─▶ LedgerSqsConsumer ──(last child: invoke)──▶ UpdateFinalStatus
                  └(maxReceiveCount)▶ ChildDeadLetterQueue ─▶ LedgerDlqRecorder (counts FAILED once)
    producer ─▶ Kinesis ChildStream ─▶ LedgerKinesisConsumer (bisect, partial responses)
                  └(retries exhausted: range metadata)▶ KinesisFailureQueue ─▶ LedgerKinesisFailureRecorder
    EventBridge rate(sweepIntervalMinutes) ─▶ LedgerSweeper (RUNNING past deadline -> FAILED)

All of them count in the CompletionLedger table; the winner of a batch's decision finalizes it
(UpdateFinalStatus of a FinalStatusStore, the same code as the workflows) or raises the alarm
(LedgerBatchFailed metric). Alarms: failed batches, DLQ depth and age.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from fanout_common.metric_names import BATCH_FAILED_METRIC, METRICS_SERVICE
from stacks.config import EnvironmentConfig
from stacks.constructs.completion_ledger import CompletionLedger
from stacks.constructs.final_status_store import FinalStatusStore
from stacks.constructs.functions import METRICS_NAMESPACE, KitFunction, removal_policy
from stacks.ledger_config import LedgerSettings
from stacks.constructs.storage import secure_queue
from stacks.constructs.workflow_alarms import alarm_topic
from stacks.ledger_nag import acknowledge_ledger_queue

DLQ_AGE_ALARM_SECONDS = 15 * 60  # a message nobody could record for 15 minutes
RECORDER_TIMEOUT_SECONDS = 60
SWEEPER_TIMEOUT_SECONDS = 120


class CompletionLedgerStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cfg: EnvironmentConfig,
        ledger: LedgerSettings | None = None,
        **kwargs,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.cfg = cfg
        self.settings = settings = ledger or cfg.ledger
        self.ledger = CompletionLedger(self, "Ledger", cfg=cfg, settings=settings)
        store = FinalStatusStore(self, "FinalStatus", cfg=cfg)
        self.status_table = store.table
        self.update_final_status = store.update_final_status
        consumer_timeout = cfg.task_timeout_seconds

        # ------------------------------------------------------------------ SQS
        # cdk-nag's SQS3 knows this is ChildQueue's dead-letter queue: nothing to acknowledge.
        self.child_dlq = self._queue("ChildDeadLetterQueue", visibility_seconds=6 * RECORDER_TIMEOUT_SECONDS)
        self.child_queue = secure_queue(
            self,
            "ChildQueue",
            cfg=cfg,
            visibility_seconds=6 * consumer_timeout,
            retention_days=4,
            dead_letter_queue=sqs.DeadLetterQueue(
                max_receive_count=settings.max_receive_count, queue=self.child_dlq
            ),
        )
        self.sqs_consumer = self._function(
            "LedgerSqsConsumer",
            "ledger_sqs_consumer.handler",
            "Runs a child from SQS and records it in the completion ledger; the last one finalizes",
            timeout=consumer_timeout,
        )
        self.sqs_consumer.add_event_source(
            sources.SqsEventSource(
                self.child_queue,
                batch_size=settings.batch_size,
                report_batch_item_failures=True,
                max_concurrency=settings.consumer_max_concurrency,
            )
        )
        self.dlq_recorder = self._function(
            "LedgerDlqRecorder",
            "ledger_dlq_recorder.handler",
            "Counts each dead-lettered child as FAILED in the completion ledger, once",
            timeout=RECORDER_TIMEOUT_SECONDS,
        )
        self.dlq_recorder.add_event_source(
            sources.SqsEventSource(
                self.child_dlq, batch_size=10, report_batch_item_failures=True, max_concurrency=2
            )
        )

        # ------------------------------------------------------------------ Kinesis
        self.stream = kinesis.Stream(
            self,
            "ChildStream",
            shard_count=settings.kinesis_shard_count,
            encryption=kinesis.StreamEncryption.MANAGED,
            retention_period=Duration.hours(24),
            removal_policy=removal_policy(cfg),
        )
        self.kinesis_failure_queue = self._queue(
            "KinesisFailureQueue",
            visibility_seconds=6 * RECORDER_TIMEOUT_SECONDS,
            purpose="the on-failure destination of the Kinesis event source mapping (failed range "
            "metadata); LedgerKinesisFailureRecorder counts the children of each range as failed",
        )
        self.kinesis_consumer = self._function(
            "LedgerKinesisConsumer",
            "ledger_kinesis_consumer.handler",
            "Runs a child from Kinesis and records it in the completion ledger; the last one finalizes",
            timeout=consumer_timeout,
        )
        self.kinesis_consumer.add_event_source(
            sources.KinesisEventSource(
                self.stream,
                starting_position=lambda_.StartingPosition.TRIM_HORIZON,
                batch_size=settings.kinesis_batch_size,
                bisect_batch_on_error=True,
                report_batch_item_failures=True,
                retry_attempts=settings.kinesis_retry_attempts,
                on_failure=sources.SqsDlq(self.kinesis_failure_queue),
            )
        )
        self.kinesis_failure_recorder = self._function(
            "LedgerKinesisFailureRecorder",
            "ledger_kinesis_failure_recorder.handler",
            "Reads a failed Kinesis range back and counts its children as FAILED in the ledger, once",
            timeout=RECORDER_TIMEOUT_SECONDS,
        )
        self.kinesis_failure_recorder.add_event_source(
            sources.SqsEventSource(
                self.kinesis_failure_queue, batch_size=1, report_batch_item_failures=True, max_concurrency=2
            )
        )
        # Read the failed range back: these two calls, on this stream only.
        self.kinesis_failure_recorder.add_to_role_policy(
            iam.PolicyStatement(
                actions=["kinesis:GetShardIterator", "kinesis:GetRecords"],
                resources=[self.stream.stream_arn],
            )
        )

        # ------------------------------------------------------------------ ledger grants
        for fn in (self.sqs_consumer, self.dlq_recorder, self.kinesis_consumer, self.kinesis_failure_recorder):
            self.ledger.grant_consume(fn)
            # The winner finalizes: invoke this one function (unqualified ARN only).
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"], resources=[self.update_final_status.function_arn]
                )
            )

        # ------------------------------------------------------------------ deadline sweeper
        self.sweeper = self._function(
            "LedgerSweeper",
            "ledger_sweeper.handler",
            "Fails RUNNING ledger batches whose deadline has passed (conditional writes)",
            timeout=SWEEPER_TIMEOUT_SECONDS,
            finalizer=False,
        )
        self.ledger.grant_sweep(self.sweeper)
        # The winner of a FAILED verdict (a consumer, or the sweeper at a deadline) writes the
        # batch's FAILED status record: UpdateItem on the status table only.
        for fn in (self.sqs_consumer, self.dlq_recorder, self.kinesis_consumer, self.kinesis_failure_recorder,
                   self.sweeper):
            fn.add_to_role_policy(
                iam.PolicyStatement(actions=["dynamodb:UpdateItem"], resources=[self.status_table.table_arn])
            )
        self.sweep_rule = events.Rule(
            self,
            "SweepSchedule",
            description=f"Runs LedgerSweeper every {settings.sweep_interval_minutes} minute(s)",
            schedule=events.Schedule.rate(Duration.minutes(settings.sweep_interval_minutes)),
            targets=[targets.LambdaFunction(self.sweeper, retry_attempts=2)],
        )

        # ------------------------------------------------------------------ alarms
        period = Duration.minutes(cfg.alarms.period_minutes)
        self.failed_batches_alarm = cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=BATCH_FAILED_METRIC,
            dimensions_map={"service": METRICS_SERVICE, "environment": cfg.name},
            statistic="Sum",
            period=period,
        ).create_alarm(
            self,
            "FailedBatchesAlarm",
            alarm_description=f"Completion-ledger batches FAILED ({cfg.name}): threshold or deadline",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.dlq_alarms = {}
        for name, queue in (("ChildDlq", self.child_dlq), ("KinesisFailureQueue", self.kinesis_failure_queue)):
            self.dlq_alarms[f"{name}DepthAlarm"] = queue.metric_approximate_number_of_messages_visible(
                period=period, statistic="Maximum"
            ).create_alarm(
                self,
                f"{name}DepthAlarm",
                alarm_description=f"{name} ({cfg.name}) holds messages (failed children not yet recorded)",
                threshold=cfg.alarms.dlq_visible_messages,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            self.dlq_alarms[f"{name}AgeAlarm"] = queue.metric_approximate_age_of_oldest_message(
                period=period, statistic="Maximum"
            ).create_alarm(
                self,
                f"{name}AgeAlarm",
                alarm_description=f"{name} ({cfg.name}): a message could not be recorded for "
                f"{DLQ_AGE_ALARM_SECONDS // 60} minutes",
                threshold=DLQ_AGE_ALARM_SECONDS,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )

        self.alarm_topic = alarm_topic(self, "AlarmTopic", cfg=cfg, what="completion ledger")
        for alarm in (self.failed_batches_alarm, *self.dlq_alarms.values()):
            alarm.add_alarm_action(actions.SnsAction(self.alarm_topic))

        CfnOutput(self, "LedgerTableName", value=self.ledger.table.table_name)
        CfnOutput(self, "AlarmTopicArn", value=self.alarm_topic.topic_arn)
        CfnOutput(self, "ChildQueueUrl", value=self.child_queue.queue_url)
        CfnOutput(self, "ChildStreamArn", value=self.stream.stream_arn)
        CfnOutput(self, "StatusTableName", value=self.status_table.table_name)

    def _queue(self, construct_id: str, *, visibility_seconds: int, purpose: str | None = None) -> sqs.Queue:
        queue = secure_queue(self, construct_id, cfg=self.cfg, visibility_seconds=visibility_seconds)
        if purpose:
            acknowledge_ledger_queue(queue, purpose)
        return queue

    def _function(
        self, construct_id: str, handler: str, description: str, *, timeout: int, finalizer: bool = True
    ) -> lambda_.Function:
        environment = {**self.ledger.consumer_environment(), "STATUS_TABLE_NAME": self.status_table.table_name}
        if finalizer:
            environment["FINALIZER_FUNCTION_NAME"] = self.update_final_status.function_name
        return KitFunction(
            self,
            construct_id,
            cfg=self.cfg,
            handler=handler,
            description=description,
            service=construct_id,
            environment=environment,
            timeout_seconds=timeout,
        ).function

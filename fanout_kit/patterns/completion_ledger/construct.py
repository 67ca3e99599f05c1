"""CompletionLedger: finalize a batch once, without Step Functions, when concurrent Lambdas drain
an SQS queue and/or a Kinesis stream of its children.

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

from typing import Unpack

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from fanout_kit.shared.metric_names import BATCH_FAILED_METRIC, METRICS_SERVICE
from fanout_kit.shared.discovery import record_workflow
from fanout_kit.shared.feature_flags import pin_feature_flags
from fanout_kit.shared.final_status_store import status_store
from fanout_kit.shared.functions import METRICS_NAMESPACE, KitFunction, removal_policy
from fanout_kit.shared.layer import attach_runtime_layer
from fanout_kit.patterns.completion_ledger.table import LedgerTable
from fanout_kit.shared.nag import acknowledge_ledger_queue, acknowledge_processing_invoke
from fanout_kit.shared.outputs import LEDGER_OUTPUTS
from fanout_kit.shared.props import SharedProps, resolve_props
from fanout_kit.shared.read_only import ReadOnlyAttributes
from fanout_kit.shared.settings import AlarmThresholds, LedgerSettings, ResourceSettings, check_type
from fanout_kit.shared.storage import secure_queue
from fanout_kit.shared.workflow import emit_outputs
from fanout_kit.shared.alarms import alarm_topic, subscribe_receivers
from fanout_kit.shared.checks import ConfigError

DLQ_AGE_ALARM_SECONDS = 15 * 60  # a message nobody could record for 15 minutes
RECORDER_TIMEOUT_SECONDS = 60
SWEEPER_TIMEOUT_SECONDS = 120


class CompletionLedger(ReadOnlyAttributes, Construct):
    """The ledger table, its SQS and Kinesis intakes with their consumers, the DLQ and on-failure
    recorders, the deadline sweeper, the status store with UpdateFinalStatus, and the alarms.

    Read-only attributes: ``table`` (the ledger), ``status_table``, ``update_final_status``,
    ``child_queue``/``child_dead_letter_queue``/``sqs_consumer``/``dlq_recorder`` (SQS intake),
    ``stream``/``kinesis_failure_queue``/``kinesis_consumer``/``kinesis_failure_recorder``
    (Kinesis intake; None without it), ``sweeper``, ``alarm_topic``, ``dlq_alarms``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        processing_function: lambda_.IFunction | None = None,
        ledger: LedgerSettings = LedgerSettings(),
        sqs_intake: bool = True,
        kinesis_intake: bool = False,
        **props: Unpack[SharedProps],
    ) -> None:
        """Create the ledger, its intakes and everything they need.

        Args:
            scope: The construct's parent (a stack or a construct in one).
            construct_id: The construct's id.
            processing_function: Your function, invoked synchronously by the consumers for each
                child's work with ``{"batchId", "childId", "payload", "attempt"}`` (an error
                retries the message). Required.
            ledger: How the ledger counts children and when it gives up on a batch: consumer
                concurrency, failure threshold, deadline, batch sizes, counter shards. Default
                ``LedgerSettings()``.
            sqs_intake: Children arrive on an SQS queue (output ``ChildQueueUrl``). Default
                ``True``.
            kinesis_intake: Children arrive on a Kinesis stream too (output ``ChildStreamArn``; a
                provisioned stream bills by the shard-hour whether used or not, so it is created
                only when asked). Default ``False``. At least one intake must be on.
            **props: The props every construct shares (``SharedProps``: alarms and who receives
                them, settings, the status table, the runtime layer), each optional; ``alarms``
                may not be ``None`` here.

        Raises:
            ConfigError: A prop is wrong; the message names it and the fix.
        """
        props = resolve_props(SharedProps, props, "CompletionLedger",
                              own=("processing_function", "ledger", "sqs_intake", "kinesis_intake"))
        alarms, existing_alarm_topic = props["alarms"], props["existing_alarm_topic"]
        settings, runtime_layer = props["settings"], props["runtime_layer"]
        super().__init__(scope, construct_id)
        pin_feature_flags(self)  # before any child: the same resources whatever the app's flags
        if processing_function is None:
            raise ConfigError("processing_function: required: the Lambda function (IFunction) that does each child's work")
        if not all(hasattr(processing_function, a) for a in ("function_name", "grant_invoke")):
            raise ConfigError(f"processing_function: must be a Lambda function (IFunction), got {processing_function!r}")
        self.processing_function = processing_function
        check_type("runtime_layer", runtime_layer, bool)
        if runtime_layer:
            attach_runtime_layer(processing_function)
        if not (sqs_intake or kinesis_intake):
            raise ConfigError("sqs_intake, kinesis_intake: at least one intake must be on")
        check_type("ledger", ledger, LedgerSettings)
        check_type("alarms", alarms, AlarmThresholds)
        check_type("settings", settings, ResourceSettings)
        self.settings = settings  # as in the workflow constructs
        self.ledger_settings = ledger
        self.ledger = LedgerTable(self, "Ledger", settings=settings, ledger=ledger)
        self.table = self.ledger.table
        store = status_store(self, props)
        self.status_table = store.table
        self.update_final_status = store.update_final_status
        # The consumer waits for the processing function: give it the function's time too.
        timeout = getattr(processing_function, "timeout", None)
        consumer_timeout = settings.function_timeout_seconds + (int(timeout.to_seconds()) if timeout is not None else 3)

        self.child_dlq = self.child_queue = self.sqs_consumer = self.dlq_recorder = None
        self.stream = self.kinesis_failure_queue = self.kinesis_consumer = self.kinesis_failure_recorder = None
        if sqs_intake:
            self._add_sqs_intake(consumer_timeout)
        if kinesis_intake:
            self._add_kinesis_intake(consumer_timeout)
        consumers = [fn for fn in (self.sqs_consumer, self.dlq_recorder, self.kinesis_consumer,
                                   self.kinesis_failure_recorder) if fn is not None]

        # ------------------------------------------------------------------ ledger grants
        for fn in (self.sqs_consumer, self.kinesis_consumer):
            if fn is not None:
                fn.add_environment("CHILD_FUNCTION_NAME", processing_function.function_name)
                processing_function.grant_invoke(fn)
                acknowledge_processing_invoke(fn.role, processing_function)
        for fn in consumers:
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
        for fn in (*consumers, self.sweeper):
            fn.add_to_role_policy(
                iam.PolicyStatement(actions=["dynamodb:UpdateItem"], resources=[self.status_table.table_arn])
            )
        self.sweep_rule = events.Rule(
            self,
            "SweepSchedule",
            description=f"Runs LedgerSweeper every {ledger.sweep_interval_minutes} minute(s)",
            schedule=events.Schedule.rate(Duration.minutes(ledger.sweep_interval_minutes)),
            targets=[targets.LambdaFunction(self.sweeper, retry_attempts=2)],
        )
        self._add_alarms(alarms, existing_alarm_topic, props["alarm_email_addresses"])
        record_workflow(self, "ledger", self._output_values())  # for the local engine (any app)
        self._seal()

    def _add_sqs_intake(self, consumer_timeout: int) -> None:
        ledger = self.ledger_settings
        # cdk-nag's SQS3 knows this is ChildQueue's dead-letter queue: nothing to acknowledge.
        self.child_dlq = self._queue("ChildDeadLetterQueue", visibility_seconds=6 * RECORDER_TIMEOUT_SECONDS)
        self.child_queue = secure_queue(
            self,
            "ChildQueue",
            settings=self.settings,
            visibility_seconds=6 * consumer_timeout,
            retention_days=4,
            dead_letter_queue=sqs.DeadLetterQueue(max_receive_count=ledger.max_receive_count, queue=self.child_dlq),
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
                batch_size=ledger.batch_size,
                report_batch_item_failures=True,
                max_concurrency=ledger.consumer_max_concurrency,
            )
        )
        self.dlq_recorder = self._function(
            "LedgerDlqRecorder",
            "ledger_dlq_recorder.handler",
            "Counts each dead-lettered child as FAILED in the completion ledger, once",
            timeout=RECORDER_TIMEOUT_SECONDS,
        )
        self.dlq_recorder.add_event_source(
            sources.SqsEventSource(self.child_dlq, batch_size=10, report_batch_item_failures=True, max_concurrency=2)
        )

    def _add_kinesis_intake(self, consumer_timeout: int) -> None:
        ledger = self.ledger_settings
        self.stream = kinesis.Stream(
            self,
            "ChildStream",
            shard_count=ledger.kinesis_shard_count,
            encryption=kinesis.StreamEncryption.MANAGED,
            retention_period=Duration.hours(24),
            removal_policy=removal_policy(self.settings),
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
                batch_size=ledger.kinesis_batch_size,
                bisect_batch_on_error=True,
                report_batch_item_failures=True,
                retry_attempts=ledger.kinesis_retry_attempts,
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

    def _add_alarms(self, alarms: AlarmThresholds, existing_topic: sns.ITopic | None,
                    email_addresses: tuple[str, ...]) -> None:
        env_name = self.settings.environment_name
        period = Duration.minutes(alarms.period_minutes)
        self.failed_batches_alarm = cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=BATCH_FAILED_METRIC,
            dimensions_map={"service": METRICS_SERVICE, "environment": env_name},
            statistic="Sum",
            period=period,
        ).create_alarm(
            self,
            "FailedBatchesAlarm",
            alarm_description=f"Completion-ledger batches FAILED ({env_name}): threshold or deadline",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.dlq_alarms = {}
        for name, queue in (("ChildDlq", self.child_dlq), ("KinesisFailureQueue", self.kinesis_failure_queue)):
            if queue is None:
                continue
            self.dlq_alarms[f"{name}DepthAlarm"] = queue.metric_approximate_number_of_messages_visible(
                period=period, statistic="Maximum"
            ).create_alarm(
                self,
                f"{name}DepthAlarm",
                alarm_description=f"{name} ({env_name}) holds messages (failed children not yet recorded)",
                threshold=alarms.dlq_visible_messages,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
            self.dlq_alarms[f"{name}AgeAlarm"] = queue.metric_approximate_age_of_oldest_message(
                period=period, statistic="Maximum"
            ).create_alarm(
                self,
                f"{name}AgeAlarm",
                alarm_description=f"{name} ({env_name}): a message could not be recorded for "
                f"{DLQ_AGE_ALARM_SECONDS // 60} minutes",
                threshold=DLQ_AGE_ALARM_SECONDS,
                evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            )
        self.alarm_topic: sns.ITopic = existing_topic or alarm_topic(
            self, "AlarmTopic", settings=self.settings, what="completion ledger"
        )
        for alarm in (self.failed_batches_alarm, *self.dlq_alarms.values()):
            alarm.add_alarm_action(actions.SnsAction(self.alarm_topic))
        subscribe_receivers(self, self.alarm_topic, email_addresses, existing_topic=existing_topic is not None)

    def _output_values(self) -> dict[str, str]:
        """The outputs' values, by name: what ``add_outputs()`` emits and the discovery metadata
        records (one list)."""
        values = {"LedgerTableName": self.table.table_name, "AlarmTopicArn": self.alarm_topic.topic_arn}
        if self.child_queue is not None:
            values["ChildQueueUrl"] = self.child_queue.queue_url
        if self.stream is not None:
            values["ChildStreamArn"] = self.stream.stream_arn
        values["StatusTableName"] = self.status_table.table_name
        return values

    def add_outputs(self) -> None:
        """The CloudFormation outputs the `fanout` command line and the local engine read
        (``fanout_kit.shared.outputs``: LEDGER_OUTPUTS, each intake's, AlarmTopicArn)."""
        emit_outputs(self, self._output_values(), LEDGER_OUTPUTS)

    def _queue(self, construct_id: str, *, visibility_seconds: int, purpose: str | None = None) -> sqs.Queue:
        queue = secure_queue(self, construct_id, settings=self.settings, visibility_seconds=visibility_seconds)
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
            settings=self.settings,
            handler=handler,
            description=description,
            service=construct_id,
            environment=environment,
            timeout_seconds=timeout,
        ).function

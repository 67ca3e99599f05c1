"""Each kit construct built alone in a bare Stack, as another CDK app would use it, and checked
with aws_cdk.assertions: its resources, its defaults, the props that replace them, and a clear
error (naming the prop) for impossible props."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Match, Template

from fanout_kit.local.template import state_machine_definitions
from fanout_kit import (
    AlarmThresholds,
    CompletionLedger,
    ConfigError,
    DistributedMapFanOut,
    FanOutTask,
    LedgerSettings,
    MapSettings,
    ParallelFanOut,
    ResourceSettings,
    RetrySettings,
    WorkflowRetries,
)

ENV = Environment(account="123456789012", region="eu-west-1")


def bare_stack(name: str = "Bare") -> Stack:
    return Stack(App(), name, env=ENV)


def user_function(stack: Stack, name: str, timeout: int = 10) -> lambda_.Function:
    """A function of the user's own (not from the kit's asset)."""
    return lambda_.Function(
        stack, name, runtime=lambda_.Runtime.PYTHON_3_13, handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return event\n"),
        timeout=Duration.seconds(timeout),
    )


def definition(template: Template) -> dict:
    """The state machine's ASL, resolved as the local engine resolves it."""
    (asl,) = state_machine_definitions(template.to_json(), ENV.region).values()
    return asl


def test_parallel_fan_out_alone_runs_the_users_functions_with_per_task_retries():
    stack = bare_stack()
    fast = RetrySettings(1, 2, 2.0, 4)
    fanout = ParallelFanOut(
        stack, "Orders",
        tasks=[
            FanOutTask("Charge", user_function(stack, "ChargeFn"), retryable=fast),
            FanOutTask("Notify", user_function(stack, "NotifyFn")),
        ],
    )
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::StepFunctions::StateMachine", 1)
    template.resource_count_is("AWS::SQS::Queue", 1)  # the DLQ
    template.has_resource_properties("AWS::DynamoDB::Table", {
        "KeySchema": [{"AttributeName": "batchId", "KeyType": "HASH"}],
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "DeletionProtectionEnabled": True,  # secure default: data retained
    })
    template.has_resource_properties("AWS::SQS::Queue", {"SqsManagedSseEnabled": True, "MessageRetentionPeriod": 1209600})
    template.has_resource_properties(
        "AWS::Logs::LogGroup", {"LogGroupName": {"Fn::Join": ["-", ["/aws/vendedlogs/states/Bare-Orders", Match.any_value()]]}}
    )
    template.has_resource_properties("AWS::StepFunctions::StateMachine", {
        "LoggingConfiguration": Match.object_like({"IncludeExecutionData": False, "Level": "ALL"}),
        "TracingConfiguration": {"Enabled": True},
    })
    # the kit's own functions: input check, final status, failure guard; plus the user's two
    functions = template.find_resources("AWS::Lambda::Function")
    services = sorted(f["Properties"].get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME", "user")
                      for f in functions.values())
    assert services == ["RecordExecutionFailure", "UpdateFinalStatus", "ValidateInput", "user", "user"]
    asl = definition(template)
    branches = asl["States"]["RunTasks"]["Branches"]
    retries = {b["StartAt"]: b["States"][f"Run {b['StartAt'][4:-1]}"]["Retry"] for b in branches}
    charge_retryable = retries["Run Charge?"][3]
    assert charge_retryable["ErrorEquals"] == ["RetryableTaskError"] and charge_retryable["MaxAttempts"] == 2
    assert retries["Run Notify?"][3]["MaxAttempts"] == WorkflowRetries().retryable.max_attempts
    assert retries["Run Notify?"][1]["MaxAttempts"] == 0  # ambiguous: timeouts, crashes not retried
    # read-only attributes
    assert fanout.alarm_topic is not None and fanout.state_machine and fanout.status_table and fanout.dead_letter_queue
    template.resource_count_is("AWS::SNS::Topic", 1)
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})


def test_parallel_fan_out_takes_existing_resources_and_alarms_off():
    stack = bare_stack()
    queue = sqs.Queue(stack, "MyDlq", enforce_ssl=True)
    table = dynamodb.Table(stack, "MyStatus", partition_key=dynamodb.Attribute(name="batchId", type=dynamodb.AttributeType.STRING))
    fanout = ParallelFanOut(
        stack, "Orders", tasks=[FanOutTask("Charge", user_function(stack, "ChargeFn"))],
        existing_dead_letter_queue=queue, existing_status_table=table, alarms=None,
        settings=ResourceSettings(environment_name="staging", retain_data=False, log_retention_days=14),
    )
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::SQS::Queue", 1)
    template.resource_count_is("AWS::DynamoDB::Table", 1)
    template.resource_count_is("AWS::CloudWatch::Alarm", 0)
    template.resource_count_is("AWS::SNS::Topic", 0)
    assert fanout.dead_letter_queue is queue and fanout.status_table is table and fanout.alarm_topic is None
    template.has_resource_properties("AWS::Lambda::Function", {
        "Environment": {"Variables": Match.object_like({"FANOUT_ENV": "staging", "POWERTOOLS_SERVICE_NAME": "UpdateFinalStatus"})},
    })
    template.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 14})


def test_parallel_fan_out_uses_an_existing_alarm_topic():
    stack = bare_stack()
    topic = sns.Topic(stack, "Pager")
    fanout = ParallelFanOut(stack, "Orders", tasks=[FanOutTask("Charge", user_function(stack, "ChargeFn"))],
                            alarms=AlarmThresholds(lambda_errors=3), existing_alarm_topic=topic)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::SNS::Topic", 1)
    assert fanout.alarm_topic is topic
    template.has_resource_properties("AWS::CloudWatch::Alarm", {"MetricName": "Errors", "Threshold": 3})


@pytest.mark.parametrize(
    "props, message",
    [
        ({"tasks": []}, "tasks: must be a non-empty list of FanOutTask"),
        ({"tasks": [("Charge", None)]}, "tasks[0]: must be a FanOutTask(name, function, ...), got tuple"),
        ({"tasks": "lower"}, "tasks[0].name: must be PascalCase"),
        ({"tasks": "twice"}, "tasks[1].name: Charge is used twice"),
        ({"tasks": "nofunction"}, "tasks[0].function: must be a Lambda function (IFunction)"),
        ({"dead_letter_queue_props": {"retention_period": Duration.days(4)}, "existing_dead_letter_queue": "queue"},
         "existing_dead_letter_queue and dead_letter_queue_props: pass one of them, not both"),
        ({"status_table_props": {"partition_key": None}}, "status_table_props: the key is the kit's (batchId)"),
        ({"existing_alarm_topic": "topic", "alarms": None}, "existing_alarm_topic: alarms are off"),
        ({"execution_timeout_minutes": 0}, "execution_timeout_minutes: must be a whole number from 1 to 525600"),
        ({"log_group_name": "/my/logs"}, "log_group_name: must start with /aws/vendedlogs/states/"),
        ({"settings": {"environment_name": "dev"}}, "settings: must be ResourceSettings, got {"),
        ({"alarms": {"lambda_errors": 3}}, "alarms: must be AlarmThresholds or None (no alarms), got {"),
        ({"retries": RetrySettings(1, 2, 2.0, 4)}, "retries: must be WorkflowRetries, got RetrySettings("),
    ],
)
def test_impossible_parallel_props_are_refused_at_synth_naming_the_prop(props, message):
    stack = bare_stack()
    fn = user_function(stack, "Fn")
    special = {
        "lower": [FanOutTask("charge", fn)],
        "twice": [FanOutTask("Charge", fn), FanOutTask("Charge", fn)],
        "nofunction": [FanOutTask("Charge", "arn:aws:lambda:eu-west-1:123456789012:function:x")],
    }
    if isinstance(props.get("tasks"), str):
        props["tasks"] = special[props["tasks"]]
    if props.get("existing_dead_letter_queue") == "queue":
        props["existing_dead_letter_queue"] = sqs.Queue(stack, "Q")
    if props.get("existing_alarm_topic") == "topic":
        props["existing_alarm_topic"] = sns.Topic(stack, "T")
    with pytest.raises(ConfigError) as err:
        ParallelFanOut(stack, "Orders", **{"tasks": [FanOutTask("Charge", fn)], **props})
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: RetrySettings(5, 1, 2.0, 2)._check("retries.transient"),
         "retries.transient.maxDelaySeconds: must be >= intervalSeconds"),
        (lambda: ResourceSettings(log_retention_days=10), "log_retention_days: 10 is not a CloudWatch Logs retention"),
        (lambda: ResourceSettings(function_timeout_seconds=901), "ResourceSettings.function_timeout_seconds: must be a whole number from 1 to 900"),
        (lambda: AlarmThresholds(period_minutes=0), "alarms.period_minutes: must be a whole number >= 1"),
        (lambda: MapSettings(items_per_batch=True), "map.items_per_batch: must be a whole number from 1 to 100000"),
        (lambda: MapSettings(max_concurrency=50, worker_reserved_concurrency=10),
         "map.worker_reserved_concurrency: 10 is below max_concurrency 50"),
        (lambda: MapSettings(child_execution_type="FAST"), "map.child_execution_type: must be EXPRESS or STANDARD"),
        (lambda: LedgerSettings(batch_size=11), "ledger.batch_size: must be a whole number from 1 to 10"),
    ],
)
def test_impossible_settings_are_refused_naming_the_prop(build, message):
    with pytest.raises(ConfigError) as err:
        build()
    assert str(err.value).startswith(message)


def test_distributed_map_fan_out_alone_with_an_existing_bucket():
    """The defaults (MAP_RETRIES) fit a 20 s worker in the Express limit."""
    stack = bare_stack()
    unversioned = s3.Bucket(stack, "Plain", enforce_ssl=True)
    with pytest.raises(ConfigError, match=r"^existing_data_bucket: Bare/Plain is not versioned \(versioning not enabled\); the Map workflow pins"):
        DistributedMapFanOut(stack, "Refused", worker=FanOutTask("Resize", user_function(stack, "Fn", timeout=20)),
                             existing_data_bucket=unversioned)
    stack = bare_stack()
    bucket = s3.Bucket(stack, "Data", enforce_ssl=True, versioned=True)  # the pinned manifest needs versions
    fanout = DistributedMapFanOut(
        stack, "Images",
        worker=FanOutTask("ResizeImages", user_function(stack, "ResizeFn", timeout=20)),
        map=MapSettings(items_per_batch=50, max_item_bytes=2048, max_concurrency=200, failure_threshold=2),
        existing_data_bucket=bucket,
    )
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::S3::Bucket", 1)
    assert fanout.data_bucket is bucket
    asl = definition(template)
    maps = [s for s in asl["States"].values() if s["Type"] == "Map"]
    assert {m["ItemBatcher"]["MaxItemsPerBatch"] for m in maps} == {50}
    assert {m["MaxConcurrency"] for m in maps} == {200}
    assert asl["States"]["CountUnsuccessful"]["Parameters"]["required.$"] == "States.MathAdd($.total, -2)"  # threshold 2
    # the worker's task exhausted (217 s), then RetryFailedItems with what is left (53 s + its 30 s margin)
    assert fanout.child_worst_case_seconds == {"ProcessItems JSON": 300, "ProcessItems CSV": 300}
    template.has_resource_properties("AWS::Lambda::Function", {
        "Environment": {"Variables": Match.object_like({"TASK_NAME": "ResizeImages"})},
    })


def test_distributed_map_fan_out_refuses_an_express_child_over_five_minutes_naming_the_props():
    stack = bare_stack()
    with pytest.raises(ConfigError) as err:
        DistributedMapFanOut(stack, "Images", worker=FanOutTask("ResizeImages", user_function(stack, "ResizeFn", timeout=120)))
    message = str(err.value)
    assert "over the 300 s Express limit" in message
    assert message.endswith("lower the worker function's timeout or retries.(transient|retryable|dlq_send|ambiguous).max_attempts / "
                            "max_delay_seconds, or set map.child_execution_type to STANDARD")
    # STANDARD children have no such limit
    DistributedMapFanOut(bare_stack("Other"), "Images", map=MapSettings(child_execution_type="STANDARD"),
                         worker=FanOutTask("ResizeImages", user_function(bare_stack("Fn"), "ResizeFn", timeout=120)))


def test_a_map_child_that_could_outgrow_256_kib_is_refused_at_synth_naming_the_settings():
    """20 items of 8 KiB and a failed child's error (a Cause of up to 32,768 characters) can be
    over AWS's payload limit: States.DataLimitExceeded, which no Catch catches."""
    stack = bare_stack()
    worker = FanOutTask("ResizeImages", user_function(stack, "ResizeFn", timeout=20))
    with pytest.raises(ConfigError) as err:
        DistributedMapFanOut(stack, "Images", worker=worker, map=MapSettings(items_per_batch=20, max_item_bytes=8192))
    message = str(err.value)
    assert "ProcessItems JSON/items/DeadLetter items (JSON)' can reach 2" in message
    assert "over AWS's 262,144-byte limit" in message and message.endswith("lower items_per_batch or max_item_bytes")
    fits = DistributedMapFanOut(bare_stack("Other"), "Images", map=MapSettings(items_per_batch=20, max_item_bytes=6144),
                                worker=FanOutTask("ResizeImages", user_function(bare_stack("Fn"), "ResizeFn", timeout=20)))
    assert fits.worst_case_state_bytes <= 262_144


def test_a_parallel_workflow_whose_outcome_could_outgrow_256_kib_is_refused_at_synth():
    """Each task adds its FAILED marker (with an error name of up to 256 characters) to the state
    that holds the whole input: a few hundred tasks cannot fit next to a full-size input."""
    stack = bare_stack()
    tasks = [FanOutTask(f"T{i}", user_function(stack, f"Fn{i}")) for i in range(120)]
    with pytest.raises(ConfigError, match="over AWS's 262,144-byte limit .*use fewer tasks per workflow"):
        ParallelFanOut(stack, "Orders", tasks=tasks)


def test_completion_ledger_alone_with_the_sqs_intake_only():
    stack = bare_stack()
    ledger = CompletionLedger(stack, "Ledger", processing_function=user_function(stack, "P"), kinesis_intake=False,
                              ledger=LedgerSettings(counter_shards=4, deadline_minutes=30))
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::Kinesis::Stream", 0)
    template.resource_count_is("AWS::SQS::Queue", 2)  # the child queue and its DLQ
    assert ledger.stream is None and ledger.child_queue is not None
    template.has_resource_properties("AWS::Lambda::Function", {
        "Environment": {"Variables": Match.object_like({"LEDGER_COUNTER_SHARDS": "4", "LEDGER_DEADLINE_MINUTES": "30"})},
    })
    other = bare_stack("Other")
    with pytest.raises(ConfigError, match="sqs_intake, kinesis_intake: at least one intake must be on"):
        CompletionLedger(other, "Ledger", processing_function=user_function(other, "P"), sqs_intake=False,
                         kinesis_intake=False)
    with pytest.raises(ConfigError, match=r"^processing_function: required: the Lambda function \(IFunction\)"):
        CompletionLedger(bare_stack("Third"), "Ledger")


def test_props_that_replace_defaults_are_checked_by_name():
    stack = bare_stack()
    fn = user_function(stack, "Fn")
    with pytest.raises(ConfigError, match=r"^dead_letter_queue_props\.retention: not an argument of aws_cdk\.aws_sqs\.Queue"):
        ParallelFanOut(stack, "A", tasks=[FanOutTask("Charge", fn)], dead_letter_queue_props={"retention": 4})
    ParallelFanOut(stack, "B", tasks=[FanOutTask("Charge", fn)],
                   dead_letter_queue_props={"retention_period": Duration.days(4)},
                   status_table_props={"table_name": "orders-status"})
    template = Template.from_stack(stack)
    template.has_resource_properties("AWS::SQS::Queue", {"MessageRetentionPeriod": 345600, "SqsManagedSseEnabled": True})
    template.has_resource_properties("AWS::DynamoDB::Table", {"TableName": "orders-status", "SSESpecification": {"SSEEnabled": True}})


def test_an_imported_data_bucket_is_used_as_is():
    stack = bare_stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Shared", "team-batch-data")
    fanout = DistributedMapFanOut(stack, "Images", worker=FanOutTask("Resize", user_function(stack, "ResizeFn", timeout=20)),
                                  existing_data_bucket=bucket)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::S3::Bucket", 0)
    assert fanout.data_bucket is bucket
    template.has_resource_properties("AWS::Lambda::Function", {
        "Environment": {"Variables": Match.object_like({"BATCH_BUCKET_NAME": "team-batch-data"})},
    })


def test_completion_ledger_runs_the_users_processing_function():
    stack = bare_stack()
    process = user_function(stack, "ProcessChild", timeout=40)
    ledger = CompletionLedger(stack, "Ledger", processing_function=process, kinesis_intake=True)
    template = Template.from_stack(stack).to_json()
    consumers = {p["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]: p["Properties"]
                 for p in template["Resources"].values() if p["Type"] == "AWS::Lambda::Function"
                 and "CHILD_FUNCTION_NAME" in p["Properties"].get("Environment", {}).get("Variables", {})}
    assert sorted(consumers) == ["LedgerKinesisConsumer", "LedgerSqsConsumer"]  # not the recorders or sweeper
    assert {c["Timeout"] for c in consumers.values()} == {30 + 40}  # waits for the function it invokes
    logical_id = Stack.of(process).get_logical_id(process.node.default_child)
    invokes = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
               for s in r["Properties"]["PolicyDocument"]["Statement"]
               if s["Action"] == "lambda:InvokeFunction" and Stack.of(process).resolve(logical_id) in json.dumps(s["Resource"])]
    assert len(invokes) == 2 and ledger.processing_function is process
    with pytest.raises(ConfigError, match=r"^processing_function: must be a Lambda function"):
        CompletionLedger(bare_stack("Other"), "Ledger", processing_function="my-function")


def test_the_ledger_creates_a_kinesis_stream_only_when_asked():
    """A provisioned stream bills by the shard-hour whether used or not: SQS only by default."""
    stack = bare_stack()
    ledger = CompletionLedger(stack, "Ledger", processing_function=user_function(stack, "Process"))
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::Kinesis::Stream", 0)
    template.resource_count_is("AWS::Lambda::EventSourceMapping", 2)  # child queue and its DLQ
    assert ledger.stream is None and ledger.kinesis_consumer is None and ledger.child_queue is not None
    asked = bare_stack("Asked")
    CompletionLedger(asked, "Ledger", processing_function=user_function(asked, "Process"), kinesis_intake=True)
    Template.from_stack(asked).resource_count_is("AWS::Kinesis::Stream", 1)


def test_the_constructs_resources_are_read_only_attributes():
    stack = bare_stack()
    fanout = ParallelFanOut(stack, "Orders", tasks=[FanOutTask("Charge", user_function(stack, "Fn"))])
    with pytest.raises(AttributeError, match="ParallelFanOut.state_machine is read-only"):
        fanout.state_machine = None
    ledger = CompletionLedger(stack, "Ledger", processing_function=user_function(stack, "P"))
    with pytest.raises(AttributeError, match="CompletionLedger.table is read-only"):
        ledger.table = None

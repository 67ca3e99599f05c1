"""The synthesized CompletionLedger stack (dev), once per session, and its cdk-nag report."""

from __future__ import annotations

import json

import pytest

FN = "AWS::Lambda::Function"


def resources(synth, kind):
    return {k: v for k, v in synth.template["Resources"].items() if v["Type"] == kind}


def logical_id(synth, kind, prefix):
    (found,) = [k for k in resources(synth, kind) if k.startswith(prefix)]
    return found


def ref_id(value):
    """The logical id behind {"Fn::GetAtt": [id, ...]} or {"Ref": id}."""
    return value["Fn::GetAtt"][0] if "Fn::GetAtt" in value else value["Ref"]


def mapping_of(synth, function_prefix):
    function = logical_id(synth, FN, f"{function_prefix}Function")
    (props,) = [
        m["Properties"] for m in resources(synth, "AWS::Lambda::EventSourceMapping").values()
        if ref_id(m["Properties"]["FunctionName"]) == function
    ]
    return props


def role_actions(synth, function_prefix):
    """Every action granted to the function's role, by resource logical id ('*' for '*')."""
    function = resources(synth, FN)[logical_id(synth, FN, f"{function_prefix}Function")]
    role = ref_id(function["Properties"]["Role"])
    granted: dict[str, set] = {}
    for policy in resources(synth, "AWS::IAM::Policy").values():
        if role not in [ref_id(r) for r in policy["Properties"]["Roles"]]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            for resource in statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]:
                key = "*" if resource == "*" else json.dumps(resource, sort_keys=True)
                granted.setdefault(key, set()).update(actions)
    return granted


def arn(logical):
    return json.dumps({"Fn::GetAtt": [logical, "Arn"]}, sort_keys=True)


@pytest.fixture(scope="module")
def ids(ledger_synth):
    s = ledger_synth
    return {
        "table": logical_id(s, "AWS::DynamoDB::Table", "LedgerTable"),
        "queue": logical_id(s, "AWS::SQS::Queue", "ChildQueue"),
        "dlq": logical_id(s, "AWS::SQS::Queue", "ChildDeadLetterQueue"),
        "failures": logical_id(s, "AWS::SQS::Queue", "KinesisFailureQueue"),
        "stream": logical_id(s, "AWS::Kinesis::Stream", "ChildStream"),
        "finalizer": logical_id(s, FN, "FinalStatusUpdateFinalStatusFunction"),
        "process": logical_id(s, FN, "ProcessChildFunction"),
        "status": logical_id(s, "AWS::DynamoDB::Table", "FinalStatusTable"),
        "logs": {k: v for k in ("LedgerSqsConsumer", "LedgerDlqRecorder", "LedgerKinesisConsumer",
                                "LedgerKinesisFailureRecorder", "LedgerSweeper")
                 for v in [logical_id(s, "AWS::Logs::LogGroup", f"{k}Logs")]},
    }


def test_sqs_consumer_mapping_reports_item_failures_with_bounded_concurrency(ledger_synth, ids):
    props = mapping_of(ledger_synth, "LedgerSqsConsumer")
    assert ref_id(props["EventSourceArn"]) == ids["queue"]
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["ScalingConfig"] == {"MaximumConcurrency": 10} and props["BatchSize"] == 10


def test_child_queue_dead_letters_after_max_receive_count(ledger_synth, ids):
    queue = resources(ledger_synth, "AWS::SQS::Queue")[ids["queue"]]["Properties"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
    assert ref_id(queue["RedrivePolicy"]["deadLetterTargetArn"]) == ids["dlq"]
    # six times the consumer's timeout (AWS's advice for a Lambda event source), which includes the
    # processing function's timeout it waits for
    consumer = next(r["Properties"] for r in resources(ledger_synth, FN).values()
                    if r["Properties"].get("Handler") == "ledger_sqs_consumer.handler")
    process = resources(ledger_synth, FN)[ids["process"]]["Properties"]
    assert consumer["Timeout"] == ledger_synth.cfg.task_timeout_seconds + process["Timeout"]
    assert queue["VisibilityTimeout"] == 6 * consumer["Timeout"]
    recorder = mapping_of(ledger_synth, "LedgerDlqRecorder")
    assert ref_id(recorder["EventSourceArn"]) == ids["dlq"]
    assert recorder["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_queues_are_encrypted_and_tls_only(ledger_synth):
    queues = resources(ledger_synth, "AWS::SQS::Queue")
    assert len(queues) == 3 and all(q["Properties"]["SqsManagedSseEnabled"] for q in queues.values())
    policies = resources(ledger_synth, "AWS::SQS::QueuePolicy").values()
    denied = {ref_id(q) for p in policies for q in p["Properties"]["Queues"]
              for s in p["Properties"]["PolicyDocument"]["Statement"]
              if s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}}
    assert denied == set(queues)


def test_kinesis_mapping_bisects_reports_item_failures_and_sends_failures_to_sqs(ledger_synth, ids):
    props = mapping_of(ledger_synth, "LedgerKinesisConsumer")
    assert ref_id(props["EventSourceArn"]) == ids["stream"]
    assert props["BisectBatchOnFunctionError"] is True
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert props["MaximumRetryAttempts"] == 3 and props["StartingPosition"] == "TRIM_HORIZON"
    assert ref_id(props["DestinationConfig"]["OnFailure"]["Destination"]) == ids["failures"]
    recorder = mapping_of(ledger_synth, "LedgerKinesisFailureRecorder")
    assert ref_id(recorder["EventSourceArn"]) == ids["failures"]
    stream = resources(ledger_synth, "AWS::Kinesis::Stream")[ids["stream"]]["Properties"]
    assert stream["StreamEncryption"] == {"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"}


def test_ledger_table_has_pitr_encryption_ttl_and_the_sparse_index(ledger_synth, ids):
    table = resources(ledger_synth, "AWS::DynamoDB::Table")[ids["table"]]
    props = table["Properties"]
    assert [k["AttributeName"] for k in props["KeySchema"]] == ["pk", "sk"]
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    (gsi,) = props["GlobalSecondaryIndexes"]
    assert gsi["IndexName"] == "RunningByDeadline" and gsi["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert table["DeletionPolicy"] == "Delete"  # dev: removalPolicy destroy


def test_sweeper_runs_on_a_schedule(ledger_synth):
    (rule,) = resources(ledger_synth, "AWS::Events::Rule").values()
    assert rule["Properties"]["ScheduleExpression"] == "rate(5 minutes)"
    (target,) = rule["Properties"]["Targets"]
    assert ref_id(target["Arn"]) == logical_id(ledger_synth, FN, "LedgerSweeperFunction")


def test_alarms_on_failed_batches_and_dead_letter_queues(ledger_synth, ids):
    alarms = [a["Properties"] for a in resources(ledger_synth, "AWS::CloudWatch::Alarm").values()]
    failed = [a for a in alarms if a["MetricName"] == "LedgerBatchFailed"]
    assert len(failed) == 1 and failed[0]["Namespace"] == "FanOutKit" and failed[0]["Threshold"] == 1
    assert {d["Name"]: d["Value"] for d in failed[0]["Dimensions"]} == {"service": "CompletionLedger", "environment": "dev"}
    watched = {(a["MetricName"], ref_id(a["Dimensions"][0]["Value"])) for a in alarms if a["Namespace"] == "AWS/SQS"}
    assert watched == {
        (metric, queue)
        for metric in ("ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage")
        for queue in (ids["dlq"], ids["failures"])
    }


def test_consumers_know_the_ledger_and_the_finalizer(ledger_synth, ids):
    function = resources(ledger_synth, FN)[logical_id(ledger_synth, FN, "LedgerSqsConsumerFunction")]
    env = function["Properties"]["Environment"]["Variables"]
    assert ref_id(env["LEDGER_TABLE_NAME"]) == ids["table"]
    assert ref_id(env["FINALIZER_FUNCTION_NAME"]) == ids["finalizer"]
    assert (env["LEDGER_FAILURE_THRESHOLD"], env["LEDGER_TTL_DAYS"], env["LEDGER_DEADLINE_MINUTES"]) == ("0", "7", "60")
    assert env["LEDGER_COUNTER_SHARDS"] == "1"  # dev: cdk.json ledger.counterShards
    assert ref_id(env["STATUS_TABLE_NAME"]) == ids["status"]  # the FAILED winner's record
    assert function["Properties"]["Handler"] == "ledger_sqs_consumer.handler"


RECORD = {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem"}  # + the decision read
LOGS = {"logs:CreateLogStream", "logs:PutLogEvents"}
XRAY = {"xray:PutTelemetryRecords", "xray:PutTraceSegments"}
CONSUME = {"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl",
           "sqs:ReceiveMessage"}


def test_iam_grants_are_exactly_what_each_function_uses(ledger_synth, ids):
    finalize = {arn(ids["finalizer"]): {"lambda:InvokeFunction"}, arn(ids["status"]): {"dynamodb:UpdateItem"}}
    # the consumers invoke the app's processing function (CHILD_FUNCTION_NAME), CDK's grant_invoke
    process = {arn(ids["process"]): {"lambda:InvokeFunction"},
               json.dumps({"Fn::Join": ["", [{"Fn::GetAtt": [ids["process"], "Arn"]}, ":*"]]}): {"lambda:InvokeFunction"}}
    table = arn(ids["table"])

    def base(name):
        return {arn(ids["logs"][name]): LOGS, "*": XRAY}

    assert role_actions(ledger_synth, "LedgerSqsConsumer") == {
        **base("LedgerSqsConsumer"), arn(ids["queue"]): CONSUME, table: RECORD, **finalize, **process}
    assert role_actions(ledger_synth, "LedgerDlqRecorder") == {
        **base("LedgerDlqRecorder"), arn(ids["dlq"]): CONSUME, table: RECORD, **finalize}
    assert role_actions(ledger_synth, "LedgerKinesisConsumer") == {
        **base("LedgerKinesisConsumer"),
        arn(ids["failures"]): {"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"},  # on-failure
        arn(ids["stream"]): {  # what the Kinesis event source mapping needs (CDK's grant)
            "kinesis:DescribeStream", "kinesis:DescribeStreamConsumer", "kinesis:DescribeStreamSummary",
            "kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards", "kinesis:ListStreams",
            "kinesis:SubscribeToShard"},
        table: RECORD, **finalize, **process}
    assert role_actions(ledger_synth, "LedgerKinesisFailureRecorder") == {
        **base("LedgerKinesisFailureRecorder"), arn(ids["failures"]): CONSUME,
        arn(ids["stream"]): {"kinesis:GetShardIterator", "kinesis:GetRecords"}, table: RECORD, **finalize}
    index = json.dumps({"Fn::Join": ["", [{"Fn::GetAtt": [ids["table"], "Arn"]}, "/index/RunningByDeadline"]]},
                       sort_keys=True)
    assert role_actions(ledger_synth, "LedgerSweeper") == {
        **base("LedgerSweeper"), index: {"dynamodb:Query"}, table: {"dynamodb:UpdateItem"},
        arn(ids["status"]): {"dynamodb:UpdateItem"}}


def test_sharded_consumers_may_batch_read_the_shards(tmp_path):
    """counterShards > 1 (prod: 8): LEDGER_COUNTER_SHARDS set, and BatchGetItem granted on top."""
    import dataclasses

    from aws_cdk import App, Environment
    from aws_cdk.assertions import Template

    from stacks.completion_ledger_stack import CompletionLedgerStack
    from stacks.config import load_environment, read_cdk_context

    cfg = load_environment(read_cdk_context(), "prod")
    assert cfg.ledger.counter_shards == 8
    app = App(outdir=str(tmp_path))
    stack = CompletionLedgerStack(app, "Sharded", cfg=cfg, ledger=dataclasses.replace(cfg.ledger, counter_shards=4),
                                  env=Environment(account=cfg.account, region=cfg.region))
    template = Template.from_stack(stack).to_json()
    envs = [r["Properties"]["Environment"]["Variables"] for r in template["Resources"].values()
            if r["Type"] == FN and "LEDGER_TABLE_NAME" in r["Properties"]["Environment"]["Variables"]]
    assert len(envs) == 5 and {e["LEDGER_COUNTER_SHARDS"] for e in envs} == {"4"}
    statements = [s for r in template["Resources"].values() if r["Type"] == "AWS::IAM::Policy"
                  for s in r["Properties"]["PolicyDocument"]["Statement"]]
    batch_reads = [s for s in statements if "dynamodb:BatchGetItem" in (s["Action"] if isinstance(s["Action"], list)
                                                                        else [s["Action"]])]
    assert len(batch_reads) == 4  # the four consumers, not the sweeper


def test_no_unacknowledged_cdk_nag_findings(ledger_synth):
    (report,) = ledger_synth.report["pluginReports"]
    assert report["pluginName"] == "AwsSolutions" and report["conclusion"] == "success"
    assert report["violations"] == []
    acknowledged = {(v["ruleName"], v["acknowledgedId"]) for v in report["suppressedViolations"]}
    assert acknowledged == {
        ("AwsSolutions-L1", "AwsSolutions::AwsSolutions-L1"),
        ("AwsSolutions-IAM5[Resource::*]", "AwsSolutions::AwsSolutions-IAM5[Resource::*]"),  # X-Ray only
        ("AwsSolutions-SQS3", "AwsSolutions::AwsSolutions-SQS3"),
        # the consumers may invoke any version of the processing function (CDK's grant_invoke)
        ("AwsSolutions-IAM5[Resource::<ProcessChildFunctionB0B12A08.Arn>:*]",
         "AwsSolutions::AwsSolutions-IAM5[Resource::<ProcessChildFunctionB0B12A08.Arn>:*]"),
    }
    # construct paths, without the id "Default" the stack gives its CompletionLedger
    sqs3 = {[part for part in v["acknowledgedAt"].split("/") if part != "Default"][1]
            for v in report["suppressedViolations"] if v["ruleName"] == "AwsSolutions-SQS3"}
    # only the Kinesis on-failure queue: cdk-nag sees that ChildDeadLetterQueue is ChildQueue's DLQ
    assert sqs3 == {"KinesisFailureQueue"}
    assert all(v["reason"] for v in report["suppressedViolations"])


def test_cdk_nag_fails_synth_on_an_unacknowledged_finding(tmp_path):
    """The check above is meaningful: the same plugin refuses a queue nobody acknowledged."""
    from aws_cdk import App, Stack, Validations
    from aws_cdk import aws_sqs as sqs
    from cdk_nag import AwsSolutionsChecks

    app = App(outdir=str(tmp_path))
    sqs.Queue(Stack(app, "Bare"), "Queue")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    assert {v["ruleName"] for v in report["pluginReports"][0]["violations"]} >= {"AwsSolutions-SQS3", "AwsSolutions-SQS4"}

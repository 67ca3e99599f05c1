"""Assertions on the synthesized Distributed Map workflow: map configuration per environment,
per-item Retry/Catch/DLQ then fail, the verdict from the map run's counts, Catch on the maps, the
Express budget, storage settings and the IAM the Distributed Map needs (a known CDK trap)."""

import pytest

from fanout.local.template import resources_of_type
from fanout_runtime import errors
from stacks.config import load_environment, read_cdk_context
from statemachines import asl_graph
from statemachines.express_budget import EXPRESS_LIMIT_SECONDS, check_express_children
from statemachines.retry_policy import AMBIGUOUS_ERRORS, LAMBDA_TRANSIENT_ERRORS
from tests.conftest import ENVIRONMENTS
from tests.templates import only_definition, role_statements

CONTEXT = read_cdk_context()


@pytest.fixture(params=ENVIRONMENTS)
def env(request, synthesized):
    app = synthesized(request.param)
    template = app.template("map")
    return load_environment(CONTEXT, request.param), template, only_definition(template)


def _maps(asl):
    return {n: s for n, s in asl["States"].items() if s["Type"] == "Map"}


def test_distributed_map_settings_come_from_the_environment(env):
    cfg, template, asl = env
    (bucket_id,) = [lid for lid, r in resources_of_type(template, "AWS::S3::Bucket").items() if "AccessLogs" not in lid]
    maps = _maps(asl)
    assert sorted(maps) == ["ProcessItems CSV", "ProcessItems JSON"]
    for name, state in maps.items():
        fmt = name.split()[-1]
        assert state["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": cfg.map.child_execution_type}
        assert state["MaxConcurrency"] == cfg.map.max_concurrency
        assert state["ItemBatcher"]["MaxItemsPerBatch"] == cfg.map.items_per_batch
        assert state["ItemBatcher"]["BatchInput"] == {"batchId.$": "$.batchId", "executionArn.$": "$$.Execution.Id"}
        assert state["ToleratedFailurePercentage"] == 100  # a failure never aborts siblings
        assert state["ItemReader"]["ReaderConfig"]["InputType"] == fmt
        assert state["ItemReader"]["Parameters"]["Key.$"] == "$.manifest.key"
        assert state["ItemSelector"] == {"index.$": "$$.Map.Item.Index", "item.$": "$$.Map.Item.Value"}
        assert state["ResultWriter"]["Parameters"]["Prefix"] == "results"
        assert state["ResultPath"] == "$.mapRun" and state["Next"] == "ReadMapRun"
        assert state["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.mapFailure", "Next": "BatchNotConfirmed"}]
    assert maps["ProcessItems CSV"]["ItemReader"]["ReaderConfig"]["CSVHeaderLocation"] == "FIRST_ROW"


def test_environments_differ_in_map_scale(synthesized):
    dev = _maps(only_definition(synthesized("dev").template("map")))["ProcessItems JSON"]
    prod = _maps(only_definition(synthesized("prod").template("map")))["ProcessItems JSON"]
    assert dev["MaxConcurrency"] < prod["MaxConcurrency"]
    assert dev["ItemBatcher"]["MaxItemsPerBatch"] < prod["ItemBatcher"]["MaxItemsPerBatch"]


def test_each_item_batch_has_retry_catch_dlq_then_fails(env):
    cfg, _, asl = env
    for name, state in _maps(asl).items():
        fmt = name.split()[-1]
        child = state["ItemProcessor"]
        process = child["States"][child["StartAt"]]
        assert process["Resource"] == "arn:aws:states:::lambda:invoke"
        assert process["Retry"] == [
            {"ErrorEquals": [errors.NON_RETRYABLE], "MaxAttempts": 0},
            cfg.map_worker.ambiguous.to_asl(AMBIGUOUS_ERRORS),
            cfg.map_worker.transient.to_asl(LAMBDA_TRANSIENT_ERRORS),
            cfg.map_worker.retryable.to_asl([errors.RETRYABLE]),
        ]
        assert process["Catch"][0]["ErrorEquals"] == ["States.ALL"]
        dlq = child["States"][process["Catch"][0]["Next"]]
        assert dlq["Resource"] == "arn:aws:states:::sqs:sendMessage"
        assert dlq["Parameters"]["MessageBody"]["items.$"] == "$.Items"
        assert dlq["Parameters"]["MessageBody"]["executionArn.$"] == "$.BatchInput.executionArn"  # the parent
        # after the DLQ send the child FAILS, so the map run counts its items as failed
        assert child["States"][dlq["Next"]] == {
            "Type": "Fail", "Comment": child["States"][dlq["Next"]]["Comment"],
            "Error": "ItemsDeadLettered", "CausePath": "$.failure.Cause",
        }
        send_failed = child["States"][dlq["Catch"][0]["Next"]]
        assert (send_failed["Type"], send_failed["Error"]) == ("Fail", "DeadLetterSendFailed")
        assert not [n for n, s in child["States"].items() if s.get("End") or s["Type"] == "Succeed"
                    if n != f"Process items ({fmt})"], "a failed batch must never end successfully"


def test_verdict_comes_from_the_map_runs_counts(env):
    cfg, _, asl = env
    top = asl["States"]
    read = top["ReadMapRun"]
    assert read["Resource"] == "arn:aws:states:::aws-sdk:sfn:describeMapRun"
    assert read["Parameters"] == {"MapRunArn.$": "$.mapRun.MapRunArn"}
    assert read["ResultSelector"]["failed.$"] == "$.ItemCounts.Failed"
    assert read["Catch"][0]["Next"] == "BatchNotConfirmed"  # fail closed
    assert top["CountUnsuccessful"]["Parameters"] == {
        "unsuccessful.$": "States.MathAdd(States.MathAdd($.counts.failed, $.counts.timedOut), $.counts.aborted)"
    }
    into = sorted((n, label) for n, s in top.items() for label, t in asl_graph.edges(s) if t == "UpdateFinalStatus")
    assert into == [("AllItemsSucceeded?", "choice0"), ("WithinFailureThreshold?", "choice0")]
    assert top["AllItemsSucceeded?"]["Choices"][0] == {
        "Variable": "$.tally.unsuccessful", "NumericEquals": 0, "Next": "UpdateFinalStatus",
    }
    assert top["WithinFailureThreshold?"]["Choices"][0] == {
        "Variable": "$.tally.unsuccessful", "NumericLessThanEquals": cfg.map.failure_threshold,
        "Next": "UpdateFinalStatus",
    }
    failure = asl_graph.reachable(asl, "WithinFailureThreshold?", skip_edges={("WithinFailureThreshold?", "choice0")})
    assert "UpdateFinalStatus" not in failure and "BatchFailed" in failure
    not_confirmed = asl_graph.reachable(asl, "BatchNotConfirmed")
    assert "UpdateFinalStatus" not in not_confirmed and "RecordBatchFailure" in not_confirmed
    # forwarding stopped children's items happens on every path with a failure
    assert top["AllItemsSucceeded?"]["Default"] == "ForwardFailedItems"


def test_every_express_child_fits_the_express_limit(env):
    cfg, _, asl = env
    worst = check_express_children(asl)
    if cfg.map.child_execution_type == "EXPRESS":
        assert set(worst) == {"ProcessItems JSON", "ProcessItems CSV"}
        assert all(0 < s <= EXPRESS_LIMIT_SECONDS for s in worst.values()), worst


def test_state_machine_iam_covers_the_distributed_map(env):
    _, template, _ = env
    (sm_id,) = resources_of_type(template, "AWS::StepFunctions::StateMachine")
    role_id = template["Resources"][sm_id]["Properties"]["RoleArn"]["Fn::GetAtt"][0]
    statements = role_statements(template, role_id)

    def granted(action):
        return [s for s in statements if action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])]

    (start,) = granted("states:StartExecution")
    assert start["Resource"] == {"Ref": sm_id}  # child executions of itself
    (describe,) = granted("states:DescribeExecution")
    assert "states:StopExecution" in describe["Action"]
    (redrive,) = granted("states:RedriveExecution")
    labels = sorted(str(r["Fn::Join"][1][-1]) for r in redrive["Resource"])
    assert labels == ["/ProcessItemsCSV:*", "/ProcessItemsJSON:*"]
    (s3_rw,) = granted("s3:GetObject")
    assert {"s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"} == set(s3_rw["Action"])
    assert granted("sqs:SendMessage") and granted("dynamodb:UpdateItem") and granted("lambda:InvokeFunction")
    (read_runs,) = granted("states:DescribeMapRun")
    labels = sorted(str(r["Fn::Join"][1][-1]) for r in read_runs["Resource"])
    assert labels == ["/ProcessItemsCSV:*", "/ProcessItemsJSON:*"]
    assert not [s for s in statements if "*" in (s["Action"] if isinstance(s["Action"], str) else "".join(s["Action"]))]


def _actions(statement):
    return [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]


def test_function_grants_are_narrow(env):
    _, template, _ = env
    by_service = {
        fn["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]: fn
        for fn in resources_of_type(template, "AWS::Lambda::Function").values()
        if "Environment" in fn["Properties"]  # not CDK's auto-delete provider (dev)
    }
    assert all("Ledger" not in lid for lid in resources_of_type(template, "AWS::DynamoDB::Table"))
    expected = {
        "PrepareBatch": ["s3:GetObject", "s3:ListBucket", "s3:PutObject"],
        "ProcessItem": [],  # no DynamoDB write per item or per batch: the map run counts
        "ForwardFailedItems": ["s3:GetObject", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage"],
    }
    for service, wanted in expected.items():
        role = by_service[service]["Properties"]["Role"]["Fn::GetAtt"][0]
        statements = role_statements(template, role)
        actions = sorted({a for s in statements for a in _actions(s)} - {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "logs:CreateLogStream", "logs:PutLogEvents"})
        assert actions == wanted, service


def test_batch_data_bucket_is_private_encrypted_tls_only_and_expires(env):
    cfg, template, _ = env
    buckets = resources_of_type(template, "AWS::S3::Bucket")
    (data_id,) = [lid for lid in buckets if "AccessLogs" not in lid]
    props = buckets[data_id]["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True, "RestrictPublicBuckets": True,
    }
    rules = {r.get("Prefix"): r for r in props["LifecycleConfiguration"]["Rules"]}
    assert rules["manifests/"]["ExpirationInDays"] == rules["results/"]["ExpirationInDays"] == cfg.map.results_retention_days
    assert "LoggingConfiguration" in props
    policies = [p for p in resources_of_type(template, "AWS::S3::BucketPolicy").values() if p["Properties"]["Bucket"] == {"Ref": data_id}]
    (policy,) = policies
    assert any(s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in policy["Properties"]["PolicyDocument"]["Statement"])


def test_an_express_child_over_budget_is_refused_at_synth():
    """The environment's own retries with a 60 s worker can outlast AWS's 5-minute Express limit:
    the app refuses to build and names the settings to change (app.py prints it on one line)."""
    import copy

    from stacks.app_builder import build_app
    from stacks.config import ConfigError

    context = copy.deepcopy(CONTEXT)
    dev_map = context["fanout:environments"]["dev"]["map"]
    dev_map["workerTimeoutSeconds"] = 60
    del dev_map["retry"]
    with pytest.raises(ConfigError) as refused:
        build_app("dev", context=context)
    message = str(refused.value)
    assert message.startswith("ProcessItems ") and "an EXPRESS child can run" in message
    assert "over the 300 s Express limit" in message
    assert "context.fanout:environments.dev.map.workerTimeoutSeconds" in message
    assert "context.fanout:environments.dev.map.childExecutionType to STANDARD" in message
    dev_map["childExecutionType"] = "STANDARD"  # the other way out: no 5-minute limit
    build_app("dev", context=context)


def test_the_map_worker_gets_the_configured_reserved_concurrency(tmp_path):
    import copy

    from aws_cdk import App, Environment, assertions

    from stacks.config import load_environment, read_cdk_context
    from stacks.map_workflow_stack import MapWorkflowStack

    context = copy.deepcopy(read_cdk_context())
    context["fanout:environments"]["dev"]["map"]["workerReservedConcurrency"] = 25
    cfg = load_environment(context, "dev")
    stack = MapWorkflowStack(App(outdir=str(tmp_path)), "M", cfg=cfg, env=Environment(region=cfg.region))
    template = assertions.Template.from_stack(stack).to_json()
    reserved = {
        r["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]: r["Properties"].get("ReservedConcurrentExecutions")
        for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"
        and "POWERTOOLS_SERVICE_NAME" in r["Properties"].get("Environment", {}).get("Variables", {})
    }
    assert reserved.pop(cfg.map_worker.name) == 25
    assert set(reserved.values()) == {None}


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_the_buckets_are_emptied_on_deletion_only_where_data_is_destroyed(synthesized, env_name):
    cfg = load_environment(read_cdk_context(), env_name)
    template = synthesized(env_name).template("map")
    buckets = resources_of_type(template, "AWS::S3::Bucket")
    emptied = {r["Properties"]["BucketName"]["Ref"] for r in resources_of_type(template, "Custom::S3AutoDeleteObjects").values()}
    assert emptied == (set() if cfg.retain_data else set(buckets))
    for bucket in buckets.values():
        assert bucket["DeletionPolicy"] == ("Retain" if cfg.retain_data else "Delete")

"""Assertions on the synthesized Distributed Map workflow: map configuration per environment,
per-item Retry/Catch/DLQ then fail, the verdict from the map run's counts, Catch on the maps, the
Express budget, storage settings and the IAM the Distributed Map needs (a known CDK trap)."""

import pytest

from fanout_kit.cli.budget import workflow_budget
from fanout_kit.local.template import resources_of_type
from fanout_kit.shared.limits import STATE_PAYLOAD_LIMIT_BYTES
from fanout_runtime import errors
from stacks.config import load_environment, read_cdk_context
from fanout_kit.shared import asl_graph
from fanout_kit.shared.payload_budget import Budget, Leaf, PayloadBudgetError, kit_function_outputs, payload_budget
from fanout_kit.patterns.distributed_map.express_budget import EXPRESS_LIMIT_SECONDS, check_express_children
from fanout_kit.shared.retry_policy import AMBIGUOUS_ERRORS, LAMBDA_TRANSIENT_ERRORS
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
        # the version PrepareBatch validated, not whatever is the latest when the map run reads
        assert state["ItemReader"]["Parameters"]["VersionId.$"] == "$.manifest.versionId"
        assert state["ItemSelector"] == {"index.$": "$$.Map.Item.Index", "item.$": "$$.Map.Item.Value"}
        assert state["ResultWriter"]["Parameters"]["Prefix"] == "results"
        assert state["ResultPath"] == "$.mapRun" and state["Next"] == "ReadMapRun 1"
        assert state["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.mapFailure", "Next": "MapRunNotConfirmed"}]
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
            cfg.map_worker.ambiguous._to_asl(AMBIGUOUS_ERRORS),
            cfg.map_worker.transient._to_asl(LAMBDA_TRANSIENT_ERRORS),
            cfg.map_worker.retryable._to_asl([errors.RETRYABLE]),
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
        # the one successful end: the worker's answer had no failed item, or every item it reported
        # failed succeeded when RetryFailedItems retried it ("Items failed?": failed == 0)
        ends = [n for n, s in child["States"].items() if s.get("End") or s["Type"] == "Succeed"]
        assert ends == [f"Items processed ({fmt})"]
        dead = asl_graph.reachable(child, process["Catch"][0]["Next"])
        assert f"Items processed ({fmt})" not in dead, "a failed batch must never end successfully"
        check = child["States"][process["Next"]]
        assert check["Choices"][0] == {"Not": {"Variable": "$.result.Payload.batchItemFailures", "IsPresent": True},
                                       "Next": f"Items processed ({fmt})"}
        retry = child["States"][check["Default"]]
        assert "Retry" not in retry  # a retry would run the worker's items again
        assert child["States"][retry["Catch"][0]["Next"]]["Error"] == "ItemRetryFailed"
        verdict = child["States"][retry["Next"]]
        assert verdict["Choices"][0] == {"Variable": "$.result.failed", "NumericEquals": 0, "Next": f"Items processed ({fmt})"}
        assert child["States"][verdict["Default"]]["Error"] == "ItemsPartiallyFailed"


def test_verdict_comes_from_the_map_runs_counts(env):
    cfg, _, asl = env
    top = asl["States"]
    read = top["ReadMapRun 1"]
    assert read["Resource"] == "arn:aws:states:::aws-sdk:sfn:describeMapRun"
    assert read["Parameters"] == {"MapRunArn.$": "$.mapRun.MapRunArn"}
    assert read["ResultSelector"]["failed.$"] == "$.ItemCounts.Failed"
    assert read["ResultSelector"]["running.$"] == "$.ItemCounts.Running"
    assert read["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.mapFailure", "Next": "MapRunNotConfirmed"}]
    assert top["CountUnsuccessful"]["Parameters"] == {
        "unsuccessful.$": "States.MathAdd(States.MathAdd($.counts.failed, $.counts.timedOut), $.counts.aborted)",
        "required.$": f"States.MathAdd($.total, {-cfg.map.failure_threshold})",
        "succeeded.$": "$.counts.succeeded",  # item by item after ForwardFailedItems (ItemsPartiallyFailed)
        "failed.$": "$.counts.failed",
    }
    into = sorted((n, label) for n, s in top.items() for label, t in asl_graph.edges(s) if t == "UpdateFinalStatus")
    assert into == [("MapRunConfirmed?", "choice0"), ("WithinFailureThreshold?", "choice0")]
    counts = "$.counts"
    assert top["MapRunConfirmed?"]["Choices"][0] == {
        "And": [
            {"Variable": f"{counts}.pending", "NumericEquals": 0},
            {"Variable": f"{counts}.running", "NumericEquals": 0},
            {"Variable": f"{counts}.total", "NumericEqualsPath": "$.total"},
            {"Variable": "$.tally.unsuccessful", "NumericEquals": 0},
            {"Variable": f"{counts}.succeeded", "NumericEqualsPath": "$.total"},
        ],
        "Next": "UpdateFinalStatus",
    }
    assert [c["Next"] for c in top["MapRunConfirmed?"]["Choices"][1:]] == ["TotalMismatch"]
    assert top["WithinFailureThreshold?"]["Choices"][0] == {
        "Variable": "$.tally.succeeded", "NumericGreaterThanEqualsPath": "$.tally.required",
        "Next": "UpdateFinalStatus",
    }
    failure = asl_graph.reachable(asl, "WithinFailureThreshold?", skip_edges={("WithinFailureThreshold?", "choice0")})
    assert "UpdateFinalStatus" not in failure and "BatchFailed" in failure
    for not_confirmed in ("MapRunNotConfirmed", "CountsNotFinal", "TotalMismatch"):
        reached = asl_graph.reachable(asl, not_confirmed)
        assert "UpdateFinalStatus" not in reached and {"RecordBatchFailure", "BatchNotConfirmed"} <= reached
        params = top[not_confirmed]
        assert params.get("ResultPath", "$") == "$"  # rebuilds the state: no $.mapFailure next to the cause
        assert params["Parameters"]["failure"]["notConfirmed"] is True
        assert set(params["Parameters"]) == {"batchId.$", "manifest.$", "total.$", "redriveOf.$", "failure"}
    assert top["BatchNotConfirmed"] == {
        "Type": "Fail", "Comment": top["BatchNotConfirmed"]["Comment"], "Error": "BatchNotConfirmed",
        "CausePath": "$.failure.cause",
    }
    # forwarding stopped children's items happens on every path with a failure
    assert top["MapRunConfirmed?"]["Default"] == "ForwardFailedItems"


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_the_map_run_is_read_by_a_fixed_chain_with_the_documented_waits(synthesized, env_name):
    """ReadMapRun 1..6 with Wait states of 1, 2, 4, 8, 16 s between them (31 s at most), each read
    followed by a Choice: final counts go to the verdict, else the next wait; after the 6th read
    CountsNotFinal. No loop, so the payload budget (which refuses a cycle) bounds every state."""
    app = synthesized(env_name)
    top = only_definition(app.template("map"))["States"]
    reads, waits, name = [], [], "ReadMapRun 1"
    while True:
        read = top[name]
        reads.append(name)
        assert read["Type"] == "Task" and read["Resource"].endswith(":states:::aws-sdk:sfn:describeMapRun")
        assert read["ResultPath"] == "$.counts"  # each read replaces the last
        assert [c["Next"] for c in read["Catch"]] == ["MapRunNotConfirmed"]
        check = top[read["Next"]]
        assert check["Type"] == "Choice"
        assert check["Choices"] == [{
            "And": [{"Variable": "$.counts.pending", "NumericEquals": 0}, {"Variable": "$.counts.running", "NumericEquals": 0}],
            "Next": "CountUnsuccessful",
        }]
        after = top[check["Default"]]
        if after["Type"] != "Wait":
            assert check["Default"] == "CountsNotFinal"
            break
        waits.append(after["Seconds"])
        name = after["Next"]
    assert reads == [f"ReadMapRun {n}" for n in range(1, 7)]
    assert waits == [1, 2, 4, 8, 16] and sum(waits) == 31
    assert not [n for n, s in top.items() if s["Type"] == "Wait" and n not in {top[top[r]["Next"]]["Default"] for r in reads}]
    # the whole definition, this chain included, passes the payload budget (it raises on a cycle or
    # on a state over 256 KiB); the reads stay small: the counts replace the last ones
    budget = workflow_budget(app, "map")
    sizes = {s.state: s.worst for s in budget.sizes}
    assert {f"ReadMapRun {n}" for n in range(1, 7)} | {"CountsNotFinal", "BatchNotConfirmed"} <= set(sizes)
    assert len({sizes[f"ReadMapRun {n}"] for n in range(2, 7)}) == 1  # no growth from read to read
    assert max(sizes.values()) <= STATE_PAYLOAD_LIMIT_BYTES


def test_the_old_loop_is_refused_by_the_payload_budget():
    """Why a chain: a re-read loop (Wait ─▶ ReadMapRun ─▶ Choice ─▶ Wait) cannot be bounded."""
    states = {
        "ReadMapRun": {"Type": "Task", "Resource": "arn:aws:states:::aws-sdk:sfn:describeMapRun",
                       "Parameters": {"MapRunArn.$": "$.arn"}, "ResultPath": "$.counts", "Next": "Final?"},
        "Final?": {"Type": "Choice", "Choices": [{"Variable": "$.counts.Pending", "NumericEquals": 0, "Next": "Done"}],
                   "Default": "Wait"},
        "Wait": {"Type": "Wait", "Seconds": 1, "Next": "ReadMapRun"},
        "Done": {"Type": "Succeed"},
    }
    with pytest.raises(PayloadBudgetError, match="is on a cycle"):
        payload_budget({"StartAt": "ReadMapRun", "States": states}, Budget(Leaf(100), kit_function_outputs(input_cap=100)))


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
    (versions,) = granted("s3:GetObjectVersion")  # the pinned manifest, under manifests/ only
    assert versions["Action"] == "s3:GetObjectVersion" and versions["Resource"]["Fn::Join"][1][-1] == "/manifests/*"
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

"""Assertions on the synthesized Parallel workflow: Retry/Catch per task, the direct DLQ send,
the decision graph, resource settings per environment and exact IAM grants."""

import pytest

from fanout_kit.local.template import resources_of_type
from fanout_runtime import errors
from stacks.config import load_environment, read_cdk_context
from fanout_kit.shared import asl_graph
from fanout_kit.shared.retry_policy import AMBIGUOUS_ERRORS, LAMBDA_TRANSIENT_ERRORS
from fanout_kit.shared.states import TASK_TIMEOUT_MARGIN_SECONDS
from tests.conftest import ENVIRONMENTS
from tests.templates import only_definition, role_statements

CONTEXT = read_cdk_context()


@pytest.fixture(params=ENVIRONMENTS)
def env(request, synthesized):
    app = synthesized(request.param)
    template = app.template("parallel")
    return load_environment(CONTEXT, request.param), template, only_definition(template)


def test_one_branch_per_configured_task(env):
    cfg, _, asl = env
    (parallel,) = [s for s in asl["States"].values() if s["Type"] == "Parallel"]
    starts = [b["StartAt"] for b in parallel["Branches"]]
    assert starts == [f"Run {t.name}?" for t in cfg.tasks]


def test_each_task_has_its_configured_retry_and_a_catch_to_the_dlq(env):
    cfg, _, asl = env
    states = asl_graph.all_states(asl)
    for task in cfg.tasks:
        run = states[f"Run {task.name}"]
        assert run["Resource"] == "arn:aws:states:::lambda:invoke"
        assert run["Retry"] == [
            {"ErrorEquals": [errors.NON_RETRYABLE], "MaxAttempts": 0},
            task.ambiguous._to_asl(AMBIGUOUS_ERRORS),
            task.transient._to_asl(LAMBDA_TRANSIENT_ERRORS),
            task.retryable._to_asl([errors.RETRYABLE]),
        ]
        assert run["TimeoutSeconds"] == cfg.task_timeout_seconds + TASK_TIMEOUT_MARGIN_SECONDS
        assert run["Catch"] == [
            {"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": f"DeadLetter {task.name}"}
        ]
    assert states["Run ChargePayment"]["Retry"][3]["MaxAttempts"] == 4  # the per-task override


def test_dlq_send_is_a_direct_retried_sqs_integration_with_full_context(env):
    cfg, template, asl = env
    (queue_id,) = resources_of_type(template, "AWS::SQS::Queue")
    states = asl_graph.all_states(asl)
    for task in cfg.tasks:
        send = states[f"DeadLetter {task.name}"]
        assert send["Resource"] == "arn:aws:states:::sqs:sendMessage"
        assert send["Parameters"]["QueueUrl"].endswith(f"/{queue_id}")
        body = send["Parameters"]["MessageBody"]
        assert body["batchId.$"] == "$.batchId" and body["task"] == task.name
        assert body["input.$"] == "$.input"  # the branch's own payload, kept by Input T
        assert (body["error.$"], body["cause.$"]) == ("$.failure.Error", "$.failure.Cause")
        assert body["executionArn.$"] == "$$.Execution.Id"
        assert send["Retry"][0]["MaxAttempts"] == cfg.dlq_send_retry.max_attempts
        assert send["ResultPath"] is None
        # After the send the branch reports FAILED: it never ends as a silent success.
        dead = states[send["Next"]]
        assert dead["Type"] == "Pass" and dead["Parameters"]["status"] == "FAILED"
        lost = states[send["Catch"][0]["Next"]]
        assert lost["Parameters"]["status"] == "FAILED" and lost["Parameters"]["deadLettered"] is False


def test_each_branch_keeps_only_its_own_payload_before_its_task_runs(env):
    """The Catch merges an error (a Cause of up to 32,768 characters) into the branch state: that
    state holds the ids and the task's own payload, never the whole execution input; nothing
    after the DLQ send keeps a second error; the SUCCEEDED marker carries no task output."""
    cfg, _, asl = env
    states = asl_graph.all_states(asl)
    for task in cfg.tasks:
        choice = states[f"Run {task.name}?"]
        assert [c["Next"] for c in choice["Choices"]] == [f"Input {task.name}"]
        own = states[f"Input {task.name}"]
        assert own["Type"] == "Pass" and own["Next"] == f"Run {task.name}"
        assert own["Parameters"] == {
            "batchId.$": "$.batchId", "redriveOf.$": "$.redriveOf", "input.$": f"$.tasks.{task.name}",
        }
        run = states[f"Run {task.name}"]
        assert run["Parameters"]["Payload"]["input.$"] == "$.input"
        assert run["ResultSelector"] == {"task": task.name, "status": "SUCCEEDED"}
        send = states[f"DeadLetter {task.name}"]
        assert [c.get("ResultPath", "$") for c in send["Catch"]] == [None]
    assert states["RecordBatchFailure"]["Catch"][0]["ResultPath"] is None


def test_no_lambda_sits_between_a_task_and_the_dlq(env):
    _, _, asl = env
    for _, name, state in asl_graph.iter_states(asl):
        if name.startswith("DeadLetter "):
            assert "lambda" not in state["Resource"]


def test_update_final_status_is_reachable_only_when_every_task_succeeded(env):
    cfg, _, asl = env
    top = asl["States"]
    # The only edge into UpdateFinalStatus is the decision's first rule...
    into = [(n, label) for n, s in top.items() for label, t in asl_graph.edges(s) if t == "UpdateFinalStatus"]
    assert into == [("AllTasksSucceeded?", "choice0")]
    # ...which demands SUCCEEDED (or SKIPPED in a redrive only) from every branch, by name.
    rule = top["AllTasksSucceeded?"]["Choices"][0]
    assert [c["Or"] for c in rule["And"]] == [
        [
            {"Variable": f"$.outcome.byTask.{t.name}.status", "StringEquals": "SUCCEEDED"},
            {"And": [
                {"Variable": f"$.outcome.byTask.{t.name}.status", "StringEquals": "SKIPPED"},
                {"Variable": "$.redriveOf", "IsString": True},
            ]},
        ]
        for t in cfg.tasks
    ]
    # A task with no marker, or one the verdict does not know, is not confirmed, by name.
    reported = top["EveryTaskReported?"]
    assert reported["Choices"][0]["And"] == [
        {"Variable": f"$.outcome.byTask.{t.name}.status", "IsPresent": True} for t in cfg.tasks
    ]
    assert [c["Next"] for c in reported["Choices"][1:]] == [f"{t.name} not confirmed" for t in cfg.tasks]
    assert [c["Next"] for c in top["AllTasksSucceeded?"]["Choices"][1:]] == [f"{t.name} not confirmed" for t in cfg.tasks]
    for t in cfg.tasks:
        assert top[f"{t.name} not confirmed"]["Parameters"]["task"] == t.name
        assert {"RecordBatchFailure", "BatchNotConfirmed"} <= asl_graph.reachable(asl, f"{t.name} not confirmed")
    # Every other way out of the Parallel state ends in BatchFailed or BatchNotConfirmed without UpdateFinalStatus.
    failure = asl_graph.reachable(asl, "EveryTaskReported?", skip_edges={("AllTasksSucceeded?", "choice0")})
    assert "UpdateFinalStatus" not in failure and {"BatchFailed", "BatchNotConfirmed"} <= failure
    assert top["BatchFailed"]["Type"] == "Fail" and top["BatchFailed"]["Error"] == "BatchFailed"
    assert top["BatchNotConfirmed"]["Type"] == "Fail" and top["BatchNotConfirmed"]["Error"] == "BatchNotConfirmed"
    # The Parallel state itself has no Catch that could route around the decision.
    assert "Catch" not in top["RunTasks"] and top["RunTasks"]["Next"] == "EveryTaskReported?"


def test_failure_is_recorded_with_a_condition_that_never_overwrites_success(env):
    _, _, asl = env
    record = asl["States"]["RecordBatchFailure"]
    assert record["Resource"] == "arn:aws:states:::dynamodb:updateItem"
    assert record["Parameters"]["ConditionExpression"] == "attribute_not_exists(batchId) OR #status = :failed"
    assert record["Parameters"]["ExpressionAttributeValues"][":failedTasks"] == {"SS.$": "$.outcome.failedTasks"}
    assert record["Next"] == "Confirmed failure?"
    assert asl["States"]["Confirmed failure?"]["Default"] == "BatchFailed"
    assert record["Catch"][0]["ErrorEquals"] == ["DynamoDB.ConditionalCheckFailedException"]


def test_invalid_input_fails_before_any_task(env):
    _, _, asl = env
    assert asl["StartAt"] == "ValidateInput"
    assert asl["States"]["ValidateInput"]["Next"] == "ReadBatchStatus"
    assert "Catch" not in asl["States"]["ValidateInput"]  # InvalidInput ends the execution


def test_a_duplicate_start_reads_the_status_record_before_any_task(env):
    _, template, asl = env
    (table_id,) = resources_of_type(template, "AWS::DynamoDB::Table")
    read = asl["States"]["ReadBatchStatus"]
    assert read["Resource"] == "arn:aws:states:::dynamodb:getItem"
    assert read["Parameters"]["ConsistentRead"] is True
    assert read["Parameters"]["TableName"] == table_id
    assert read["Next"] == "BatchRecorded?"
    # Reachable from the start without passing through RunTasks: the two early ends.
    before_tasks = asl_graph.reachable(
        asl, asl["StartAt"], skip_edges={("BatchRecorded?", "choice0"), ("BatchAlreadyFinal?", "default")}
    )
    assert {"AlreadyFinalized", "DuplicateOfFailedBatch"} <= before_tasks
    assert "RunTasks" not in before_tasks
    assert asl["States"]["DuplicateOfFailedBatch"]["Error"] == "FinalStatusConflict"


def test_happy_path_transitions_counted_from_the_asl(env):
    cfg, _, asl = env
    # ValidateInput, ReadBatchStatus, BatchRecorded?, RunTasks, EveryTaskReported?,
    # AllTasksSucceeded?, UpdateFinalStatus + (Choice, Input Pass, Task) per task
    assert asl_graph.happy_path_transitions(asl) == 7 + 3 * len(cfg.tasks)


def test_storage_settings_per_environment(env):
    cfg, template, _ = env
    (queue,) = resources_of_type(template, "AWS::SQS::Queue").values()
    assert queue["Properties"]["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert queue["Properties"]["SqsManagedSseEnabled"] is True
    (queue_policy,) = resources_of_type(template, "AWS::SQS::QueuePolicy").values()
    # TLS only; and the failure guard's rule may send the events it could not deliver
    deny, allow_rule = queue_policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert allow_rule["Principal"] == {"Service": "events.amazonaws.com"} and allow_rule["Action"] == "sqs:SendMessage"
    (table,) = resources_of_type(template, "AWS::DynamoDB::Table").values()
    assert table["Properties"]["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["Properties"]["SSESpecification"] == {"SSEEnabled": True}
    expected = "Retain" if cfg.retain_data else "Delete"
    assert table["DeletionPolicy"] == queue["DeletionPolicy"] == expected
    assert table["Properties"]["DeletionProtectionEnabled"] is cfg.retain_data
    for group in resources_of_type(template, "AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == cfg.log_retention_days
        assert group["DeletionPolicy"] == expected


def test_state_machine_logs_everything_and_traces(env):
    cfg, template, _ = env
    (sm,) = resources_of_type(template, "AWS::StepFunctions::StateMachine").values()
    assert sm["Properties"]["TracingConfiguration"] == {"Enabled": True}
    logging = sm["Properties"]["LoggingConfiguration"]
    assert logging["Level"] == "ALL"
    assert logging["IncludeExecutionData"] is cfg.include_execution_data
    (group_id,) = [d["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0] for d in logging["Destinations"]]
    name = template["Resources"][group_id]["Properties"]["LogGroupName"]
    # "<prefix>-parallel-<the stack id's random part>" (tests/test_template_review.py)
    assert name["Fn::Join"][1][0] == f"/aws/vendedlogs/states/{cfg.stack_prefix}-parallel"
    for fn in resources_of_type(template, "AWS::Lambda::Function").values():
        assert fn["Properties"]["TracingConfig"] == {"Mode": "Active"}
        assert fn["Properties"]["Runtime"] == "python3.13"


def _functions_by_service(template):
    return {
        fn["Properties"]["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"]: lid
        for lid, fn in resources_of_type(template, "AWS::Lambda::Function").items()
    }


def _role_of(template, fn_lid):
    return template["Resources"][fn_lid]["Properties"]["Role"]["Fn::GetAtt"][0]


def test_state_machine_role_grants_only_what_the_workflow_uses(env):
    cfg, template, _ = env
    (sm,) = resources_of_type(template, "AWS::StepFunctions::StateMachine").values()
    statements = role_statements(template, sm["Properties"]["RoleArn"]["Fn::GetAtt"][0])
    by_action = {tuple(sorted([s["Action"]] if isinstance(s["Action"], str) else s["Action"])): s for s in statements}
    (table_id,) = resources_of_type(template, "AWS::DynamoDB::Table")
    (queue_id,) = resources_of_type(template, "AWS::SQS::Queue")
    invoke = by_action[("lambda:InvokeFunction",)]
    # every function but the failure guard's (EventBridge invokes that one)
    fns = sorted(lid for service, lid in _functions_by_service(template).items() if service != "RecordExecutionFailure")
    assert invoke["Resource"] == [{"Fn::GetAtt": [f, "Arn"]} for f in fns] + [
        {"Fn::Join": ["", [{"Fn::GetAtt": [f, "Arn"]}, ":*"]]} for f in fns
    ]
    assert by_action[("sqs:SendMessage",)]["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    ddb = by_action[("dynamodb:GetItem", "dynamodb:UpdateItem")]["Resource"]["Fn::Join"][1]
    assert {"Ref": table_id} in ddb
    wildcard = [s for s in statements if s["Resource"] == "*"]
    assert len(wildcard) == 1
    assert all(a.startswith(("logs:", "xray:")) for a in wildcard[0]["Action"])
    assert all(s["Effect"] == "Allow" for s in statements)
    assert len(statements) == 4


def test_function_roles_grant_only_their_logs_traces_and_table(env):
    _, template, _ = env
    (table_id,) = resources_of_type(template, "AWS::DynamoDB::Table")
    for service, fn_lid in _functions_by_service(template).items():
        statements = role_statements(template, _role_of(template, fn_lid))
        actions = sorted(a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"]))
        expected = ["logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTelemetryRecords", "xray:PutTraceSegments"]
        if service == "UpdateFinalStatus":
            expected += ["dynamodb:GetItem", "dynamodb:UpdateItem"]
            (ddb,) = [s for s in statements if s["Action"][0].startswith("dynamodb")]
            assert ddb["Resource"] == {"Fn::GetAtt": [table_id, "Arn"]}
        if service == "RecordExecutionFailure":
            expected += ["dynamodb:UpdateItem", "sqs:SendMessage", "states:DescribeExecution"]
        assert actions == sorted(expected), service
        logs = [s for s in statements if s["Action"][0].startswith("logs")]
        assert logs[0]["Resource"]["Fn::GetAtt"][1] == "Arn"  # its own log group, not *


def test_validate_input_knows_the_configured_tasks(env):
    cfg, template, _ = env
    fn = template["Resources"][_functions_by_service(template)["ValidateInput"]]
    assert fn["Properties"]["Environment"]["Variables"]["TASK_NAMES"] == ",".join(cfg.task_names)

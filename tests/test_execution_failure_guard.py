"""The execution-failure guard: its EventBridge rule (read from the synthesized templates: moto runs
no EventBridge rules, so the pattern is checked statically) and its recorder Lambda, fed the
documented "Step Functions Execution Status Change" event against moto's DynamoDB and SQS."""

import json

import boto3
import pytest
from moto import mock_aws

from fanout_kit.local.engine import event_matches, execution_status_event
from fanout_kit.local.moto_lambda import LambdaContext, LocalFunction
from fanout_kit.local.template import local_names, make_resolver, resources_of_type
from fanout_kit.shared.final_status import read_status, record_success
from tests.ledger.ledger_tables import create_status_table
from tests.templates import role_statements

TABLE = "status"
SM = "arn:aws:states:eu-west-1:123456789012:stateMachine:sm"
EXEC = "arn:aws:states:eu-west-1:123456789012:execution:sm:run-1"


def event(status="FAILED", error="Lambda.ServiceException", input_=None, name="run-1", arn=EXEC):
    return execution_status_event(
        {
            "executionArn": arn, "stateMachineArn": SM, "name": name, "status": status,
            "input": json.dumps({"batchId": "b1"} if input_ is None else input_),
            "error": error, "cause": "the cause", "startDate": None, "stopDate": None,
        },
        "eu-west-1",
    )


@pytest.mark.parametrize("workflow", ["parallel", "map"])
def test_the_rule_matches_this_state_machines_failed_timed_out_and_aborted_executions_only(dev_app, workflow):
    template = dev_app.template(workflow)
    (rule,) = resources_of_type(template, "AWS::Events::Rule").values()
    resolve = make_resolver(*local_names(template, dev_app.region), dev_app.region)
    pattern = resolve(rule["Properties"]["EventPattern"])
    (sm_id,) = resources_of_type(template, "AWS::StepFunctions::StateMachine")
    (target,) = rule["Properties"]["Targets"]
    guard = template["Resources"][target["Arn"]["Fn::GetAtt"][0]]
    assert guard["Properties"]["Handler"] == "record_execution_failure.handler"
    this_sm = resolve({"Ref": sm_id})
    for status in ("FAILED", "TIMED_OUT", "ABORTED"):
        assert event_matches(pattern, _with(event(status), stateMachineArn=this_sm)), status
    for status in ("SUCCEEDED", "RUNNING", "PENDING_REDRIVE"):
        assert not event_matches(pattern, _with(event(status), stateMachineArn=this_sm)), status
    assert not event_matches(pattern, event("FAILED"))  # another state machine's execution
    # EventBridge may invoke the function: its resource policy names the rule.
    permission = [
        p["Properties"] for p in resources_of_type(template, "AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert [p["SourceArn"] for p in permission] == [{"Fn::GetAtt": [next(iter(resources_of_type(template, "AWS::Events::Rule"))), "Arn"]}]


def _with(evt, **detail):
    evt["detail"].update(detail)
    return evt


@pytest.fixture
def aws(monkeypatch):
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="eu-west-1")
        sqs = boto3.client("sqs", region_name="eu-west-1")
        create_status_table(ddb, TABLE)
        url = sqs.create_queue(QueueName="dlq")["QueueUrl"]
        monkeypatch.setenv("STATUS_TABLE_NAME", TABLE)
        monkeypatch.setenv("DEAD_LETTER_QUEUE_URL", url)
        from fanout_kit.shared.handlers import record_execution_failure

        record_execution_failure._dynamodb.cache_clear()
        record_execution_failure._sqs.cache_clear()
        yield ddb, sqs, url, record_execution_failure.handler
        record_execution_failure._dynamodb.cache_clear()
        record_execution_failure._sqs.cache_clear()


def messages(sqs, url):
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in got]


CONTEXT = LambdaContext(LocalFunction("RecordExecutionFailure", "record_execution_failure.handler"), "eu-west-1", "123456789012")


@pytest.mark.parametrize("status", ["FAILED", "TIMED_OUT", "ABORTED"])
def test_an_unrecorded_failed_execution_is_recorded_and_dead_lettered(aws, status):
    ddb, sqs, url, handler = aws
    error = {"FAILED": "Lambda.ServiceException", "TIMED_OUT": "States.Timeout", "ABORTED": None}[status]
    assert handler(event(status, error), CONTEXT)["action"] == "recorded"
    record = read_status(ddb, TABLE, "b1")
    assert (record["status"], record["executionArn"], record["failedExecutionStatus"]) == ("FAILED", EXEC, status)
    assert record["failedExecutionError"] == (error or status)
    (message,) = messages(sqs, url)
    assert message["kind"] == "execution" and message["statusRecorded"] is True
    assert (message["batchId"], message["executionArn"], message["cause"]) == ("b1", EXEC, "the cause")


def test_a_succeeded_batch_is_never_overwritten(aws):
    ddb, sqs, url, handler = aws
    record_success(ddb, TABLE, batch_id="b1", execution_arn="arn:other", ran_tasks=["A"], now="t0")
    assert handler(event(), CONTEXT)["action"] == "dead-lettered"
    assert read_status(ddb, TABLE, "b1")["status"] == "SUCCEEDED"
    (message,) = messages(sqs, url)
    assert message["statusRecorded"] is False


@pytest.mark.parametrize("error", ["BatchFailed", "FinalStatusConflict", "InvalidInput", "InvalidManifest"])
def test_outcomes_the_workflow_reported_itself_are_left_alone(aws, error):
    ddb, sqs, url, handler = aws
    assert handler(event(error=error), CONTEXT) == {"action": "none", "reason": error}
    assert read_status(ddb, TABLE, "b1") is None and messages(sqs, url) == []


def test_the_batch_id_defaults_to_the_execution_name(aws):
    ddb, _, _, handler = aws
    handler(event(input_={"tasks": {}}, name="order-7"), CONTEXT)
    assert read_status(ddb, TABLE, "order-7")["status"] == "FAILED"


def test_the_guarded_execution_itself_may_finalize_after_a_redrive_and_no_other(aws):
    """RedriveExecution resumes the same execution (same ARN) at UpdateFinalStatus."""
    ddb, _, _, handler = aws
    handler(event(), CONTEXT)
    other = "arn:aws:states:eu-west-1:123456789012:execution:sm:run-2"
    from fanout_runtime.errors import FinalStatusConflict

    with pytest.raises(FinalStatusConflict):
        record_success(ddb, TABLE, batch_id="b1", execution_arn=other, ran_tasks=["A"], now="t1")
    result = record_success(ddb, TABLE, batch_id="b1", execution_arn=EXEC, ran_tasks=["A"], now="t1")
    assert result.outcome == "FINALIZED" and read_status(ddb, TABLE, "b1")["status"] == "SUCCEEDED"


def stopped(evt, stop_date):
    evt["detail"]["stopDate"] = stop_date
    return evt


def test_a_repeated_delivery_adds_no_failed_run_and_no_second_message(aws):
    """EventBridge delivers at least once and Lambda retries an asynchronous invocation: the same
    event twice used to count two failed runs and send two DLQ messages."""
    ddb, sqs, url, handler = aws
    first = stopped(event(), 1764849600000)
    assert handler(first, CONTEXT)["action"] == "recorded"
    assert handler(json.loads(json.dumps(first)), CONTEXT)["action"] == "duplicate"
    assert read_status(ddb, TABLE, "b1")["failedRuns"] == 1
    assert len(messages(sqs, url)) == 1


def test_a_delivery_that_died_before_its_dlq_send_sends_it_on_the_next_one(aws):
    ddb, sqs, url, handler = aws
    from fanout_kit.shared.handlers import record_execution_failure

    evt = stopped(event(), 1764849600000)
    real = record_execution_failure._sqs()

    class Refusing:
        def send_message(self, **kwargs):
            raise RuntimeError("SQS is unavailable")

    original = record_execution_failure._sqs
    record_execution_failure._sqs = lambda: Refusing()
    try:
        with pytest.raises(RuntimeError):
            handler(evt, CONTEXT)
    finally:
        record_execution_failure._sqs = original
    assert real is original()
    assert handler(evt, CONTEXT)["action"] == "recorded"  # recorded by the first delivery, sent now
    assert read_status(ddb, TABLE, "b1")["failedRuns"] == 1
    (message,) = messages(sqs, url)
    assert message["statusRecorded"] is True


def test_the_same_execution_failing_again_after_a_redrive_is_a_new_failure(aws):
    ddb, sqs, url, handler = aws
    handler(stopped(event(), 1764849600000), CONTEXT)
    handler(stopped(event(error="States.Timeout"), 1764853200000), CONTEXT)  # redriven, failed again
    assert read_status(ddb, TABLE, "b1")["failedRuns"] == 2
    assert len(messages(sqs, url)) == 2


def test_an_event_without_input_finds_the_batch_id_by_describing_the_execution(aws):
    """Step Functions leaves the input out of an event it would make too large; the batch is the
    input's batchId, not the execution name (the old fallback recorded the wrong batch)."""
    ddb, _, _, handler = aws
    from fanout_kit.shared.handlers import record_execution_failure

    record_execution_failure._sfn.cache_clear()
    sfn = boto3.client("stepfunctions", region_name="eu-west-1")
    machine = sfn.create_state_machine(
        name="sm", definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        roleArn="arn:aws:iam::123456789012:role/sm",
    )["stateMachineArn"]
    arn = sfn.start_execution(stateMachineArn=machine, name="run-9", input=json.dumps({"batchId": "order-42"}))["executionArn"]
    evt = event(name="run-9", arn=arn)
    evt["detail"].update(input=None, inputDetails={"included": False})
    try:
        handler(evt, CONTEXT)
    finally:
        record_execution_failure._sfn.cache_clear()
    assert read_status(ddb, TABLE, "order-42")["status"] == "FAILED"
    assert read_status(ddb, TABLE, "run-9") is None


@pytest.mark.parametrize("workflow", ["parallel", "map"])
def test_an_event_that_cannot_be_recorded_is_kept_in_the_dlq(dev_app, workflow):
    """Two on-failure destinations, both the workflow's DLQ (which alarms): the rule target's
    dead-letter queue (EventBridge could not invoke the function; the queue policy lets only this
    rule send) and the function's asynchronous on-failure destination (it failed past Lambda's
    retries). The guard may describe only this state machine's executions."""
    template = dev_app.template(workflow)
    (rule_id, rule), = resources_of_type(template, "AWS::Events::Rule").items()
    (target,) = rule["Properties"]["Targets"]
    dlq_arn = target["DeadLetterConfig"]["Arn"]
    (queue_id,) = [lid for lid, q in resources_of_type(template, "AWS::SQS::Queue").items() if {"Fn::GetAtt": [lid, "Arn"]} == dlq_arn]
    (config,) = resources_of_type(template, "AWS::Lambda::EventInvokeConfig").values()
    assert config["Properties"]["DestinationConfig"]["OnFailure"]["Destination"] == dlq_arn
    assert config["Properties"]["FunctionName"] == target["Arn"]["Fn::GetAtt"][0] or config["Properties"]["FunctionName"] == {"Ref": target["Arn"]["Fn::GetAtt"][0]}
    statements = [
        s for p in resources_of_type(template, "AWS::SQS::QueuePolicy").values()
        if {"Ref": queue_id} in p["Properties"]["Queues"] for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert any(
        s.get("Principal") == {"Service": "events.amazonaws.com"} and s["Action"] == "sqs:SendMessage"
        and s["Condition"]["ArnEquals"]["aws:SourceArn"] == {"Fn::GetAtt": [rule_id, "Arn"]}
        for s in statements
    ), statements
    guard_role = template["Resources"][target["Arn"]["Fn::GetAtt"][0]]["Properties"]["Role"]["Fn::GetAtt"][0]
    describe = [s for s in role_statements(template, guard_role) if s["Action"] == "states:DescribeExecution"]
    (sm_id,) = resources_of_type(template, "AWS::StepFunctions::StateMachine")
    assert len(describe) == 1 and json.dumps({"Ref": sm_id}) in json.dumps(describe[0]["Resource"])
    assert describe[0]["Resource"]["Fn::Join"][1][-1].endswith(":*")

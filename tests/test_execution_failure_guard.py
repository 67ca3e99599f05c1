"""The execution-failure guard: its EventBridge rule (read from the synthesized templates: moto runs
no EventBridge rules, so the pattern is checked statically) and its recorder Lambda, fed the
documented "Step Functions Execution Status Change" event against moto's DynamoDB and SQS."""

import json

import boto3
import pytest
from moto import mock_aws

from fanout.local.engine import event_matches, execution_status_event
from fanout.local.moto_lambda import LambdaContext, LocalFunction
from fanout.local.template import local_names, make_resolver, resources_of_type
from fanout_common.final_status import read_status, record_success
from tests.ledger.ledger_tables import create_status_table

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
        import record_execution_failure

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
    from fanout_common.errors import FinalStatusConflict

    with pytest.raises(FinalStatusConflict):
        record_success(ddb, TABLE, batch_id="b1", execution_arn=other, ran_tasks=["A"], now="t1")
    result = record_success(ddb, TABLE, batch_id="b1", execution_arn=EXEC, ran_tasks=["A"], now="t1")
    assert result.outcome == "FINALIZED" and read_status(ddb, TABLE, "b1")["status"] == "SUCCEEDED"

"""The batch status record's rules, against moto's DynamoDB (conditional writes for real)."""

import boto3
import pytest
from moto import mock_aws

from fanout_runtime.errors import FinalStatusConflict
from tests.ledger.ledger_tables import create_status_table
from fanout_kit.shared.final_status import (
    FAILURE_CONDITION_EXPRESSION,
    FAILURE_EXPRESSION_NAMES,
    FAILURE_FIELDS,
    FAILURE_UPDATE_EXPRESSION,
    MAP_FAILURE_UPDATE_EXPRESSION,
    read_status,
    record_execution_failure,
    record_success,
)

TABLE = "status"
EXEC_1 = "arn:aws:states:eu-west-1:123456789012:execution:sm:run-1"
EXEC_2 = "arn:aws:states:eu-west-1:123456789012:execution:sm:run-2"


@pytest.fixture
def ddb():
    with mock_aws():
        client = boto3.client("dynamodb", region_name="eu-west-1")
        create_status_table(client, TABLE)
        yield client


def succeed(ddb, batch="b1", execution=EXEC_1, ran=("A", "B"), redrive_of=None, now="t1"):
    return record_success(
        ddb, TABLE, batch_id=batch, execution_arn=execution, ran_tasks=ran, redrive_of=redrive_of, now=now
    )


def record_failure(ddb, batch="b1", execution=EXEC_1, failed=("B",)):
    """What the state machine's RecordBatchFailure step sends (same expressions)."""
    ddb.update_item(
        TableName=TABLE,
        Key={"batchId": {"S": batch}},
        UpdateExpression=FAILURE_UPDATE_EXPRESSION,
        ConditionExpression=FAILURE_CONDITION_EXPRESSION,
        ExpressionAttributeNames=FAILURE_EXPRESSION_NAMES,
        ExpressionAttributeValues={
            ":failed": {"S": "FAILED"},
            ":failedTasks": {"SS": list(failed)},
            ":executionArn": {"S": execution},
            ":updatedAt": {"S": "t0"},
            ":one": {"N": "1"},
        },
    )


def test_first_success_writes_the_final_status(ddb):
    assert succeed(ddb).outcome == "FINALIZED"
    record = read_status(ddb, TABLE, "b1")
    assert record["status"] == "SUCCEEDED"
    assert record["finalizedBy"] == EXEC_1 and record["ranTasks"] == ["A", "B"]


def test_second_call_is_a_no_op(ddb):
    succeed(ddb, now="t1")
    again = succeed(ddb, now="t2")
    assert again.outcome == "ALREADY_FINALIZED" and again.finalized_by == EXEC_1
    assert read_status(ddb, TABLE, "b1")["finalizedAt"] == "t1"  # not rewritten


def test_failed_batch_is_never_flipped_by_a_repeat(ddb):
    record_failure(ddb)
    with pytest.raises(FinalStatusConflict, match="was recorded FAILED by .*run-1.*redriveOf"):
        succeed(ddb, execution=EXEC_2)
    assert read_status(ddb, TABLE, "b1")["status"] == "FAILED"


def test_a_late_failure_never_overwrites_success(ddb):
    succeed(ddb)
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        record_failure(ddb, execution=EXEC_2)
    assert read_status(ddb, TABLE, "b1")["status"] == "SUCCEEDED"


def test_redrive_of_the_recorded_failure_finalizes_once(ddb):
    record_failure(ddb, execution=EXEC_1, failed=("B",))
    assert succeed(ddb, execution=EXEC_2, ran=("B",), redrive_of=EXEC_1).outcome == "FINALIZED"
    record = read_status(ddb, TABLE, "b1")
    assert (record["status"], record["finalizedBy"], record["redriveOf"]) == ("SUCCEEDED", EXEC_2, EXEC_1)
    assert succeed(ddb, execution=EXEC_2, ran=("B",), redrive_of=EXEC_1).outcome == "ALREADY_FINALIZED"


def test_redrive_must_rerun_every_failed_task(ddb):
    record_failure(ddb, failed=("B", "C"))
    with pytest.raises(FinalStatusConflict, match="did not re-run C"):
        succeed(ddb, execution=EXEC_2, ran=("B",), redrive_of=EXEC_1)
    assert read_status(ddb, TABLE, "b1")["status"] == "FAILED"


def test_redrive_of_a_stale_execution_is_refused(ddb):
    record_failure(ddb, execution=EXEC_1)
    record_failure(ddb, execution=EXEC_2)  # a later redrive failed again: it is the one to redrive
    with pytest.raises(FinalStatusConflict):
        succeed(ddb, execution="arn:aws:states:eu-west-1:123456789012:execution:sm:run-3", ran=("B",), redrive_of=EXEC_1)
    record = read_status(ddb, TABLE, "b1")
    assert (record["status"], record["failedRuns"], record["executionArn"]) == ("FAILED", 2, EXEC_2)


def test_a_redrive_success_moves_the_failure_to_previous_failure(ddb):
    """A SUCCEEDED record used to keep failedTasks (and the Map's failedItems, failureError...) of
    the run it replaced, as if the batch were still failing. They are history now: moved to
    previousFailure in the same conditional write; failedRuns stays (a count of failed runs)."""
    record_failure(ddb, execution=EXEC_1, failed=("B",))
    succeed(ddb, execution=EXEC_2, ran=("B",), redrive_of=EXEC_1)
    record = read_status(ddb, TABLE, "b1")
    assert record["status"] == "SUCCEEDED"
    assert not set(FAILURE_FIELDS) & set(record), record
    assert record["previousFailure"] == {"failedTasks": ["B"], "executionArn": EXEC_1, "failedAt": "t0"}
    assert record["failedRuns"] == 1 and record["executionArn"] == EXEC_2


def test_a_map_redrive_success_moves_the_counted_failure(ddb):
    ddb.update_item(
        TableName=TABLE,
        Key={"batchId": {"S": "b1"}},
        UpdateExpression=MAP_FAILURE_UPDATE_EXPRESSION,
        ConditionExpression=FAILURE_CONDITION_EXPRESSION,
        ExpressionAttributeNames=FAILURE_EXPRESSION_NAMES,
        ExpressionAttributeValues={
            ":failed": {"S": "FAILED"}, ":failedItems": {"N": "3"}, ":totalItems": {"N": "20"},
            ":failureError": {"S": "ItemsFailed"}, ":resultsKey": {"S": "results/x/manifest.json"},
            ":executionArn": {"S": EXEC_1}, ":updatedAt": {"S": "t0"}, ":one": {"N": "1"},
        },
    )
    succeed(ddb, execution=EXEC_2, ran=(), redrive_of=EXEC_1)
    record = read_status(ddb, TABLE, "b1")
    assert record["status"] == "SUCCEEDED" and not set(FAILURE_FIELDS) & set(record)
    assert record["previousFailure"] == {
        "failedItems": 3, "totalItems": 20, "failureError": "ItemsFailed", "resultsKey": "results/x/manifest.json",
        "executionArn": EXEC_1, "failedAt": "t0",
    }


def test_the_guarded_execution_resumed_moves_the_guards_fields(ddb):
    record_execution_failure(
        ddb, TABLE, batch_id="b1", execution_arn=EXEC_1, execution_status="FAILED",
        error="Lambda.ServiceException", now="t0", event_key="e1",
    )
    assert succeed(ddb, execution=EXEC_1, now="t1").outcome == "FINALIZED"
    record = read_status(ddb, TABLE, "b1")
    assert record["status"] == "SUCCEEDED" and not set(FAILURE_FIELDS) & set(record)
    assert record["previousFailure"] == {
        "failedExecutionError": "Lambda.ServiceException", "failedExecutionStatus": "FAILED",
        "executionArn": EXEC_1, "failedAt": "t0",
    }
    assert succeed(ddb, execution=EXEC_1, now="t2").outcome == "ALREADY_FINALIZED"


def test_a_failed_record_that_changes_while_finalizing_is_read_again(ddb):
    """The move is conditioned on the record read (updatedAt): a guard write landing between the
    read and the write makes the write fail, and the record is read again, so previousFailure is
    what the success really replaced."""
    record_failure(ddb, execution=EXEC_1, failed=("B",))

    class Racing:
        exceptions = ddb.exceptions

        def __init__(self):
            self.raced = False

        def get_item(self, **kwargs):
            return ddb.get_item(**kwargs)

        def update_item(self, **kwargs):
            if not self.raced:
                self.raced = True
                record_execution_failure(
                    ddb, TABLE, batch_id="b1", execution_arn=EXEC_1, execution_status="FAILED",
                    error="States.Timeout", now="t0.5", event_key="e2",
                )
            return ddb.update_item(**kwargs)

    result = record_success(Racing(), TABLE, batch_id="b1", execution_arn=EXEC_2, ran_tasks=["B"], redrive_of=EXEC_1, now="t1")
    assert result.outcome == "FINALIZED"
    record = read_status(ddb, TABLE, "b1")
    assert record["previousFailure"]["failedAt"] == "t0.5"
    assert record["previousFailure"]["failedExecutionError"] == "States.Timeout"
    assert record["failedRuns"] == 2 and not set(FAILURE_FIELDS) & set(record)


def test_a_redrive_without_a_failed_record_is_refused(ddb):
    with pytest.raises(FinalStatusConflict, match="no FAILED record exists"):
        succeed(ddb, execution=EXEC_2, redrive_of=EXEC_1)
    assert read_status(ddb, TABLE, "b1") is None

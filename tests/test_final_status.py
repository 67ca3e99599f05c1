"""The batch status record's rules, against moto's DynamoDB (conditional writes for real)."""

import boto3
import pytest
from moto import mock_aws

from fanout_common.errors import FinalStatusConflict
from tests.ledger.ledger_tables import create_status_table
from fanout_common.final_status import (
    FAILURE_CONDITION_EXPRESSION,
    FAILURE_EXPRESSION_NAMES,
    FAILURE_UPDATE_EXPRESSION,
    read_status,
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

"""The DynamoDB contention model (fanout_kit/local/dynamodb_contention.py): the errors DynamoDB returns
under concurrent writes, in the shape botocore parses, on top of moto's serialized writes."""

from __future__ import annotations

import threading

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws
from moto.dynamodb.models import DynamoDBBackend

from fanout_kit.local.dynamodb_contention import (
    PARTITION_WCU_PER_SECOND,
    ContentionModel,
    dynamodb_contention,
    modelled_batch_ceiling,
)
from fanout_kit.local.moto_fixes import serialized_dynamodb_writes

META = {"pk": {"S": "BATCH#b"}, "sk": {"S": "#META"}}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def client():
    with mock_aws(), serialized_dynamodb_writes():
        # no SDK retries: the test sees each error DynamoDB would return
        ddb = boto3.client("dynamodb", region_name="eu-west-1", config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))
        ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        ddb.put_item(TableName="t", Item={**META, "n": {"N": "0"}})
        yield ddb


def _count(ddb, child: str) -> None:
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": "t", "Item": {"pk": {"S": "BATCH#b"}, "sk": {"S": f"CHILD#{child}"}},
                 "ConditionExpression": "attribute_not_exists(sk)"}},
        {"Update": {"TableName": "t", "Key": META, "UpdateExpression": "ADD n :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}}}},
    ])


def _n(ddb) -> int:
    return int(ddb.get_item(TableName="t", Key=META, ConsistentRead=True)["Item"]["n"]["N"])


def test_a_transaction_on_a_held_item_is_cancelled_with_per_item_reasons(client):
    with dynamodb_contention(window_seconds=0) as model, model.hold("t", "BATCH#b", "#META"):
        with pytest.raises(client.exceptions.TransactionCanceledException) as caught:
            _count(client, "1")
    error = caught.value.response
    assert error["Error"]["Code"] == "TransactionCanceledException"
    assert error["Error"]["Message"] == (
        "Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]"
    )
    assert error["CancellationReasons"] == [
        {"Code": "None"},
        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
    ]
    assert model.stats["transaction_conflicts"] == 1
    # nothing of it was applied
    assert _n(client) == 0
    assert "Item" not in client.get_item(TableName="t", Key={"pk": {"S": "BATCH#b"}, "sk": {"S": "CHILD#1"}})


def test_a_plain_write_on_a_held_item_gets_transaction_conflict_and_reads_do_not(client):
    with dynamodb_contention(window_seconds=0) as model, model.hold("t", "BATCH#b", "#META"):
        with pytest.raises(client.exceptions.TransactionConflictException) as caught:
            client.update_item(TableName="t", Key=META, UpdateExpression="ADD n :one",
                               ExpressionAttributeValues={":one": {"N": "1"}})
        assert caught.value.response["Error"]["Message"] == "Transaction is ongoing for the item"
        with pytest.raises(client.exceptions.TransactionConflictException):
            client.put_item(TableName="t", Item={**META, "n": {"N": "5"}})
        assert _n(client) == 0  # a consistent read is served (last committed state)
        # another item of the same partition key is not held
        client.put_item(TableName="t", Item={"pk": {"S": "BATCH#b"}, "sk": {"S": "other"}})
    assert model.stats["write_conflicts"] == 2
    _count(client, "1")  # released: it goes through
    assert _n(client) == 1


def test_a_transaction_holds_its_items_for_the_window_then_releases_them(client):
    entered, release = threading.Event(), threading.Event()

    def in_flight(seconds: float) -> None:  # the window, controlled by the test
        entered.set()
        assert release.wait(10)

    with dynamodb_contention(window_seconds=0.5, sleep=in_flight) as model:
        writer = threading.Thread(target=_count, args=(client, "1"))
        writer.start()
        assert entered.wait(10)
        assert ("t", "BATCH#b", "#META") in model.held() and ("t", "BATCH#b", "CHILD#1") in model.held()
        with pytest.raises(client.exceptions.TransactionCanceledException) as caught:
            _count(client, "2")
        assert [r["Code"] for r in caught.value.response["CancellationReasons"]] == ["None", "TransactionConflict"]
        with pytest.raises(client.exceptions.TransactionConflictException):
            client.delete_item(TableName="t", Key={"pk": {"S": "BATCH#b"}, "sk": {"S": "CHILD#1"}})
        release.set()
        writer.join(10)
        assert model.held() == set()
        _count(client, "2")
    assert _n(client) == 2
    assert model.stats["transactions"] == 2 and model.stats["transaction_conflicts"] == 1


def test_the_write_ceiling_throttles_transactions_and_plain_writes_per_partition_key(client):
    clock = Clock()
    # 2 items x 2 WCU per counting transaction: a ceiling of 6 WCU/s takes one, not two
    with dynamodb_contention(window_seconds=0, wcu_per_key_per_second=6, clock=clock) as model:
        _count(client, "1")
        with pytest.raises(client.exceptions.TransactionCanceledException) as caught:
            _count(client, "2")
        reasons = caught.value.response["CancellationReasons"]
        assert [r["Code"] for r in reasons] == ["ThrottlingError", "ThrottlingError"]
        assert reasons[0]["Message"].startswith("Throughput exceeds the current capacity")
        client.put_item(TableName="t", Item={"pk": {"S": "BATCH#b"}, "sk": {"S": "x"}})  # 1 WCU: 5 of 6
        client.put_item(TableName="t", Item={"pk": {"S": "BATCH#b"}, "sk": {"S": "y"}})  # 6 of 6
        with pytest.raises(client.exceptions.ProvisionedThroughputExceededException) as throttled:
            client.put_item(TableName="t", Item={"pk": {"S": "BATCH#b"}, "sk": {"S": "z"}})
        assert throttled.value.response["ThrottlingReasons"][0]["reason"] == "TableWriteKeyRangeThroughputExceeded"
        client.put_item(TableName="t", Item={"pk": {"S": "BATCH#other"}, "sk": {"S": "z"}})  # another key
        clock.now += 1.0  # the second is over: capacity is back
        _count(client, "2")
    assert _n(client) == 2
    assert model.stats["throttled_transactions"] == 1 and model.stats["throttled_writes"] == 1
    assert model.wcu_by_key[("t", "BATCH#b")] == 4 + 1 + 1 + 4


def test_the_model_is_switched_off_on_exit_and_not_nested(client):
    before = DynamoDBBackend.__dict__["transact_write_items"]
    with dynamodb_contention(window_seconds=0) as model:
        assert DynamoDBBackend.__dict__["transact_write_items"] is not before
        with pytest.raises(RuntimeError, match="already active"):
            with dynamodb_contention():
                pass
        with model.hold("t", "BATCH#b", "#META"):
            pass
    assert DynamoDBBackend.__dict__["transact_write_items"] is before
    with ContentionModel(window_seconds=0).hold("t", "BATCH#b", "#META"):
        _count(client, "1")  # a model that is not active changes nothing
    assert _n(client) == 1


def test_many_writers_under_the_model_conflict_and_lose_nothing_when_they_retry(client):
    def count_with_retries(child: str) -> int:
        conflicts = 0
        while True:
            try:
                _count(client, child)
                return conflicts
            except client.exceptions.TransactionCanceledException as exc:
                assert {r["Code"] for r in exc.response["CancellationReasons"]} <= {"None", "TransactionConflict"}
                conflicts += 1

    results = []
    with dynamodb_contention(window_seconds=0.002) as model:
        threads = [threading.Thread(target=lambda c=str(i): results.append(count_with_retries(c))) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert _n(client) == 12
    assert model.stats["transaction_conflicts"] == sum(results) > 0


def test_modelled_ceiling_is_the_tightest_partition_key():
    # one key taking 5 WCU per child: 200 children/s
    assert modelled_batch_ceiling({"meta": 5}) == PARTITION_WCU_PER_SECOND / 5
    # reads count against 3,000 RCU/s
    assert modelled_batch_ceiling({"shard": 0.25}, reads_per_child={"meta": 1}) == 3000
    with pytest.raises(ValueError):
        ContentionModel(window_seconds=-1)


def test_a_transaction_cancelled_by_its_condition_holds_nothing(client):
    with dynamodb_contention(window_seconds=5) as model:  # a hold would make the next call conflict
        with pytest.raises(client.exceptions.TransactionCanceledException) as caught:
            client.transact_write_items(TransactItems=[
                {"Put": {"TableName": "t", "Item": META, "ConditionExpression": "attribute_not_exists(pk)"}},
            ])
        assert caught.value.response["CancellationReasons"][0]["Code"] == "ConditionalCheckFailed"
        assert model.held() == set()
        client.put_item(TableName="t", Item={**META, "n": {"N": "7"}})  # not held: no conflict
    assert _n(client) == 7


def test_a_window_range_draws_each_transaction_s_time_in_flight(client):
    waited: list[float] = []
    with dynamodb_contention(window_seconds=(0.010, 0.015), sleep=waited.append):
        for child in "123456":
            _count(client, child)
    assert len(waited) == 6 and all(0.010 <= w <= 0.015 for w in waited) and len(set(waited)) > 1
    with pytest.raises(ValueError, match="low <= high"):
        ContentionModel(window_seconds=(0.015, 0.010))

"""The local engine's definition adaptations and emulator fixes are visible, exact and tested."""

import json
import threading

import boto3
import pytest
from moto import mock_aws

from fanout_kit.local.adapt import adapt_for_moto
from fanout_kit.local.moto_fixes import serialized_dynamodb_writes

MAP = {
    "StartAt": "M",
    "States": {
        "M": {
            "Type": "Map",
            "ItemSelector": {"index.$": "$$.Map.Item.Index", "item.$": "$$.Map.Item.Value"},
            "ItemBatcher": {"MaxItemsPerBatch": 20, "BatchInput": {"batchId.$": "$.batchId"}},
            "ToleratedFailurePercentage": 100,
            "ItemProcessor": {"ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "EXPRESS"},
                              "StartAt": "T", "States": {"T": {"Type": "Pass", "End": True}}},
            "End": True,
        }
    },
}


def test_map_adaptations_keep_the_child_input_shape():
    adapted, notes = adapt_for_moto(MAP)
    state = adapted["States"]["M"]
    assert "ItemBatcher" not in state
    # the child still receives {"Items": [...selected...], "BatchInput": {...}}: a batch of one
    assert state["ItemSelector"] == {
        "Items": [{"index.$": "$$.Map.Item.Index", "item.$": "$$.Map.Item.Value"}],
        "BatchInput": {"batchId.$": "$.batchId"},
    }
    assert state["ItemProcessor"]["ProcessorConfig"]["ExecutionType"] == "STANDARD"
    assert state["ToleratedFailurePercentage"] == 100.0 and isinstance(state["ToleratedFailurePercentage"], float)
    assert len(notes) == 3 and all(n.startswith("M: ") for n in notes)
    assert MAP["States"]["M"]["ItemBatcher"]["MaxItemsPerBatch"] == 20  # input not mutated


def test_a_definition_without_map_is_untouched():
    parallel = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}
    assert adapt_for_moto(parallel) == (parallel, [])


@pytest.fixture
def table():
    with mock_aws(), serialized_dynamodb_writes():
        client = boto3.client("dynamodb", region_name="eu-west-1")
        client.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def _count(client, child):
    client.transact_write_items(TransactItems=[
        {"Put": {"TableName": "t", "Item": {"pk": {"S": "b"}, "sk": {"S": f"c#{child}"}},
                 "ConditionExpression": "attribute_not_exists(sk)"}},
        {"Update": {"TableName": "t", "Key": {"pk": {"S": "b"}, "sk": {"S": "#meta"}},
                    "UpdateExpression": "ADD n :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}},
    ])


def test_concurrent_transactions_lose_no_increment(table):
    threads = [threading.Thread(target=_count, args=(table, i)) for i in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    item = table.get_item(TableName="t", Key={"pk": {"S": "b"}, "sk": {"S": "#meta"}})["Item"]
    assert item["n"] == {"N": "60"}


def test_a_cancelled_transaction_leaves_nothing_behind(table):
    _count(table, 1)
    with pytest.raises(table.exceptions.TransactionCanceledException):
        table.transact_write_items(TransactItems=[
            {"Update": {"TableName": "t", "Key": {"pk": {"S": "b"}, "sk": {"S": "#meta"}},
                        "UpdateExpression": "ADD n :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}},
            {"Put": {"TableName": "t", "Item": {"pk": {"S": "b"}, "sk": {"S": "new"}}}},
            {"Put": {"TableName": "t", "Item": {"pk": {"S": "b"}, "sk": {"S": "c#1"}},
                     "ConditionExpression": "attribute_not_exists(sk)"}},  # fails: already there
        ])
    items = {i["sk"]["S"]: i for i in table.scan(TableName="t")["Items"]}
    assert sorted(items) == ["#meta", "c#1"]  # the Put of "new" was rolled back
    assert items["#meta"]["n"] == {"N": "1"}  # the ADD was rolled back


def test_iterative_map_worker_replaces_the_recursive_one_and_is_restored():
    import inspect

    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor import (
        distributed_item_processor_worker as module,
    )

    from fanout_kit.local.moto_fixes import _iterative_eval_pool, iterative_map_workers

    original = module.DistributedItemProcessorWorker._eval_pool
    assert "self._eval_pool(job=next_job" in inspect.getsource(original)  # the recursion we replace
    with iterative_map_workers():
        assert module.DistributedItemProcessorWorker._eval_pool is _iterative_eval_pool
    assert module.DistributedItemProcessorWorker._eval_pool is original


def test_distributed_maps_reports_batching_and_child_type():
    from fanout_kit.local.adapt import DistributedMapRules, distributed_maps

    import copy

    distributed = copy.deepcopy(MAP)
    assert distributed["States"]["M"]["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert distributed_maps(distributed) == {"M": DistributedMapRules(items_per_batch=20, express=True)}
    distributed["States"]["M"]["ItemProcessor"]["ProcessorConfig"]["ExecutionType"] = "STANDARD"
    del distributed["States"]["M"]["ItemBatcher"]
    assert distributed_maps(distributed) == {"M": DistributedMapRules(items_per_batch=None, express=False)}
    inline = {"StartAt": "I", "States": {"I": {"Type": "Map", "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}}, "End": True}}}
    assert distributed_maps(inline) == {}


class _FakeChild:
    def __init__(self):
        self.timed_out = 0

    def set_timed_out(self):
        self.timed_out += 1


def test_child_clock_stops_an_express_child_once_over_its_limit():
    """Recorded (not slept) retry waits and simulated function timeouts count toward the Express
    limit; past it the child is stopped once, and the reason names what was charged."""
    from fanout_kit.local.engine import ChildClock

    clock = ChildClock(limit_seconds=300)
    child = _FakeChild()
    clock.start("child-1", child)
    clock.charge("child-1", 120, "retry waits")
    clock.charge("child-1", 150, "functions hung until their timeout")
    assert child.timed_out == 0
    clock.charge("child-1", 40, "retry waits")
    clock.charge("child-1", 5, "retry waits")
    assert child.timed_out == 1
    reason = clock.end("child-1")
    assert reason.startswith("Express child stopped at the 300 s limit: ran 31")
    assert "retry waits 160 s" in reason and "functions hung until their timeout 150 s" in reason
    clock.charge("unknown-child", 999, "retry waits")  # not an Express child: nothing to stop
    assert clock.end("child-1") is None


def test_dead_letter_messages_skip_children_that_dead_lettered_themselves():
    from fanout_kit.patterns.distributed_map.result_files import dead_letter_messages, result_file_keys

    manifest = {"ResultFiles": {"FAILED": [{"Key": "r/FAILED_0.json"}], "SUCCEEDED": [{"Key": "r/SUCCEEDED_0.json"}], "PENDING": []}}
    assert result_file_keys(manifest) == ["r/FAILED_0.json"]

    def entry(status, error, indexes):
        items = [{"index": i, "item": {"n": i}} for i in indexes]
        return {"ExecutionArn": f"child-{indexes[0]}", "Status": status, "Error": error, "Cause": "why",
                "Input": json.dumps({"Items": items, "BatchInput": {}}), "StopDate": "t"}

    entries = [
        entry("FAILED", "ItemsDeadLettered", [0, 1]),  # reached its own DLQ step: only counted
        entry("TIMED_OUT", "States.Timeout", [2, 3]),
        entry("FAILED", "DeadLetterSendFailed", [4]),
        entry("ABORTED", None, [5]),
        entry("SUCCEEDED", None, [6]),
    ]
    messages = list(dead_letter_messages(entries, batch_id="b", task="ProcessItem", execution_arn="parent"))
    assert [[i["index"] for i in m["items"]] for m in messages] == [[2, 3], [4], [5]]
    assert [m["childStatus"] for m in messages] == ["TIMED_OUT", "FAILED", "ABORTED"]
    assert messages[2]["error"] == "States.Aborted" and messages[2]["cause"] == "why"
    assert all(m["executionArn"] == "parent" and m["batchId"] == "b" for m in messages)
def test_reads_wait_for_a_write_in_progress(table):
    """A read never observes half of a write: it waits for the write lock (moto_fixes docstring)."""
    from fanout_kit.local import moto_fixes

    _count(table, 1)
    got = []
    with moto_fixes._LOCK:  # a write is being applied
        reader = threading.Thread(target=lambda: got.append(
            table.get_item(TableName="t", Key={"pk": {"S": "b"}, "sk": {"S": "#meta"}})["Item"]))
        reader.start()
        reader.join(0.3)
        assert reader.is_alive() and got == []  # blocked until the write is done
    reader.join(5)
    assert got and got[0]["n"] == {"N": "1"}

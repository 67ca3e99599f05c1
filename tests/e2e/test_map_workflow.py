"""End to end, the Distributed Map workflow on the synthesized dev definition (adapted for moto
in fanout/local/adapt.py), real handlers, ledger verdict. State read from the execution history,
the ledger, the status table, S3 and the DLQ."""

import json

import boto3
import pytest

from fanout.local.engine import LocalEngine
from fanout.local.history import states_entered, task_attempts
from tests.e2e.conftest import assert_no_denied_calls
from lambdas.fanout_common.ledger import Ledger, Outcome
from lambdas.fanout_common.worker import SIMULATE_KEY


@pytest.fixture
def map_engine(dev_app):
    with LocalEngine(dev_app, workflows=("map",), sleep_retries=False) as local:
        yield local
        assert_no_denied_calls(local)


def items(n, **faults):
    out = [{"imageId": f"img-{i}", "width": i} for i in range(n)]
    for index, switch in faults.items():
        out[int(index.removeprefix("i"))][SIMULATE_KEY] = switch
    return out


def run(engine, batch_id, **input_):
    return engine.run("map", {"batchId": batch_id, **input_})


def test_all_items_succeed_then_final_status_once(map_engine):
    result = run(map_engine, "m-ok", items=items(30))
    assert result.status == "SUCCEEDED"
    counts = map_engine.ledger_counts("m-ok")
    assert (counts["status"], counts["total"], counts["succeeded"], counts["failed"]) == ("COMPLETED", 30, 30, 0)
    assert task_attempts(result.history)["UpdateFinalStatus"] == 1
    record = map_engine.status_record("m-ok", "map")
    assert record["status"] == "SUCCEEDED" and record["finalizedBy"] == result.arn
    assert map_engine.dlq_messages("map") == []
    # results went to S3 (ResultWriter), not into the state
    s3 = map_engine.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=map_engine.bucket_name()).get("Contents", [])]
    assert any(k.startswith("results/") for k in keys)
    assert len(json.dumps(result.output)) < 2000


def test_one_permanent_failure_among_1000_items(map_engine):
    result = run(map_engine, "m-1000", items=items(1000, i417={"mode": "permanent"}))
    assert result.status == "FAILED" and result.error == "BatchFailed"
    assert result.cause.startswith("1 of 1000 items failed")
    (message,) = map_engine.dlq_messages("map")
    assert message["batchId"] == "m-1000" and [i["index"] for i in message["items"]] == [417]
    assert message["error"] == "RetryableTaskError" and message["executionArn"] == result.arn
    counts = map_engine.ledger_counts("m-1000")
    assert (counts["succeeded"], counts["failed"], counts["status"]) == (999, 1, "FAILED")
    assert "UpdateFinalStatus" not in states_entered(result.history)
    record = map_engine.status_record("m-1000", "map")
    assert (record["status"], record["failedItems"], record["totalItems"]) == ("FAILED", 1, 1000)


def test_a_transient_item_failure_is_retried_and_counted_once(map_engine):
    result = run(map_engine, "m-flaky", items=items(5, i2={"mode": "transient", "times": 2}))
    assert result.status == "SUCCEEDED"
    worker = map_engine.function_id("ProcessItem", "map")
    assert map_engine.router.count(worker) == 5 + 2
    counts = map_engine.ledger_counts("m-flaky")
    assert (counts["succeeded"], counts["failed"]) == (5, 0)


def test_non_retryable_item_is_tried_once(map_engine):
    result = run(map_engine, "m-fatal", items=items(4, i0={"mode": "fatal"}))
    assert result.status == "FAILED"
    worker = map_engine.function_id("ProcessItem", "map")
    assert map_engine.router.count(worker) == 4
    (message,) = map_engine.dlq_messages("map")
    assert message["error"] == "NonRetryableTaskError"


def test_duplicate_child_delivery_never_double_counts(map_engine):
    """Express children are at-least-once: deliver every item of a finished batch again."""
    run(map_engine, "m-dup", items=items(3))
    ledger = Ledger(map_engine.dynamodb, map_engine.ledger_table_name())
    again = [ledger.record_success("m-dup", str(i), decide=False).outcome for i in range(3)]
    assert again == [Outcome.DUPLICATE] * 3 or set(again) <= {Outcome.DUPLICATE, Outcome.BATCH_CLOSED}
    counts = map_engine.ledger_counts("m-dup")
    assert (counts["succeeded"], counts["done"]) == (3, 3)


def test_csv_manifest(map_engine):
    body = b"imageId,width\n" + b"".join(f"img-{i},{i}\n".encode() for i in range(12))
    manifest = map_engine.upload_manifest("manifests/images.csv", body)
    result = run(map_engine, "m-csv", manifest=manifest)
    assert result.status == "SUCCEEDED"
    assert "ProcessItems CSV" in states_entered(result.history)
    assert map_engine.ledger_counts("m-csv")["succeeded"] == 12


def test_parent_history_does_not_grow_with_n(map_engine):
    small = run(map_engine, "m-small", items=items(5))
    large = run(map_engine, "m-large", items=items(120))
    assert len(small.history) == len(large.history)


def _nothing_marked(engine, batch_id):
    assert engine.ledger_counts(batch_id) is None
    assert engine.status_record(batch_id, "map") is None
    assert engine.dlq_messages("map") == []


@pytest.mark.parametrize(
    "manifest_key, body, error, message",
    [
        ("manifests/missing.json", None, "InvalidManifest", "no such object; upload it first"),
        ("manifests/broken.json", b'[{"a": 1},', "InvalidManifest", "not valid JSON"),
        ("manifests/object.json", b'{"a": 1}', "InvalidManifest", "must be an array of items"),
        ("manifests/empty.json", b"[]", "InvalidManifest", "the batch is empty"),
        ("manifests/ragged.csv", b"a,b\n1,2\n3\n", "InvalidManifest", "CSV line 3 has 1 fields, the header has 2"),
        ("manifests/big.json", json.dumps([{"blob": "x" * 9000}]).encode(), "InvalidInput", "item is 9011 bytes, more than 8192"),
    ],
)
def test_bad_manifests_fail_with_a_named_error_and_mark_nothing(map_engine, manifest_key, body, error, message):
    if body is not None:
        map_engine.upload_manifest(manifest_key, body)
    manifest = {"bucket": map_engine.bucket_name(), "key": manifest_key}
    result = run(map_engine, "m-bad", manifest=manifest)
    assert result.status == "FAILED" and result.error == error
    assert message in json.loads(result.cause)["errorMessage"]
    _nothing_marked(map_engine, "m-bad")


@pytest.mark.parametrize(
    "input_, message",
    [
        ({"items": []}, "items: the batch is empty"),
        ({"items": [1], "manifest": {"bucket": "b", "key": "k.json"}}, "give exactly one"),
        ({"manifest": {"bucket": "other-bucket", "key": "k.json"}}, "reads manifests from its batch data bucket only"),
        ({"manifest": {"bucket": "somebucket", "key": "k.txt"}}, "manifest.format: must be JSON or CSV"),
    ],
)
def test_bad_input_fails_with_a_named_error_and_marks_nothing(map_engine, input_, message):
    result = run(map_engine, "m-bad-input", **input_)
    assert result.status == "FAILED" and result.error == "InvalidInput"
    assert message in json.loads(result.cause)["errorMessage"]
    _nothing_marked(map_engine, "m-bad-input")


def test_a_duplicate_start_of_a_finished_batch_processes_no_item(map_engine):
    first = run(map_engine, "m-twice", items=items(3))
    second = run(map_engine, "m-twice", items=items(3))
    assert (first.status, second.status) == ("SUCCEEDED", "SUCCEEDED")
    assert second.output["finalStatus"] == {"outcome": "ALREADY_FINALIZED", "finalizedBy": first.arn}
    entered = states_entered(second.history)
    assert "AlreadyFinalized" in entered
    assert not any(s.startswith(("ProcessItems", "UpdateFinalStatus")) for s in entered)

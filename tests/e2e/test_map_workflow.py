"""End to end, the Distributed Map workflow on the synthesized definitions (adapted for moto in
fanout_kit/local/adapt.py; Distributed Map children run by fanout_kit/local/moto_fixes.py), real handlers.
The verdict comes from the map run's own counts (DescribeMapRun); state is read from the execution
history, the map run, the status table, S3 and the DLQ."""

import json
from contextlib import contextmanager

import pytest

from fanout_kit.local.engine import LocalEngine
from fanout_kit.local.history import states_entered, task_attempts
from tests.e2e.conftest import assert_no_denied_calls
from fanout_runtime.faults import SIMULATE_KEY


@contextmanager
def deployed(app, **kwargs):
    """The Map workflow of ``app`` on the local engine; every AWS call it made must be allowed by
    the synthesized IAM policies of the role that made it."""
    with LocalEngine(app, workflows=("map",), sleep_retries=False, **kwargs) as local:
        yield local
        assert_no_denied_calls(local)


@pytest.fixture
def map_engine(dev_app):
    with deployed(dev_app) as local:
        yield local


def items(n, **faults):
    out = [{"imageId": f"img-{i}", "width": i} for i in range(n)]
    for index, switch in faults.items():
        out[int(index.removeprefix("i"))][SIMULATE_KEY] = switch
    return out


def run(engine, batch_id, **input_):
    return engine.run("map", {"batchId": batch_id, **input_})


def worker_calls(engine):
    worker = engine.function_id("ProcessItem", "map")
    return [r for r in engine.router.invocations if r.function == worker]


def test_all_items_succeed_then_final_status_once(map_engine):
    result = run(map_engine, "m-ok", items=items(30))
    assert result.status == "SUCCEEDED"
    counts = map_engine.map_run_counts(result.arn)
    assert (counts["total"], counts["succeeded"], counts["failed"], counts["timedOut"]) == (30, 30, 0, 0)
    assert task_attempts(result.history)["UpdateFinalStatus"] == 1
    assert "ForwardFailedItems" not in states_entered(result.history)
    record = map_engine.status_record("m-ok", "map")
    assert record["status"] == "SUCCEEDED" and record["finalizedBy"] == result.arn
    assert map_engine.dlq_messages("map") == []
    # results went to S3 (ResultWriter: a manifest and the result files), not into the state
    s3 = map_engine.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=map_engine.bucket_name()).get("Contents", [])]
    assert any(k.startswith("results/") and k.endswith("/manifest.json") for k in keys)
    assert any(k.startswith("results/") and k.endswith("/SUCCEEDED_0.json") for k in keys)
    assert len(json.dumps(result.output)) < 2000


def test_one_permanent_failure_among_1000_items(map_engine):
    result = run(map_engine, "m-1000", items=items(1000, i417={"mode": "permanent"}))
    assert result.status == "FAILED" and result.error == "BatchFailed"
    assert result.cause.startswith("1 of 1000 items did not succeed (1 failed, 0 timed out, 0 aborted")
    (message,) = map_engine.dlq_messages("map")
    assert message["batchId"] == "m-1000" and [i["index"] for i in message["items"]] == [417]
    assert message["error"] == "RetryableTaskError" and message["executionArn"] == result.arn
    assert message["childExecutionArn"] != result.arn
    counts = map_engine.map_run_counts(result.arn)
    assert (counts["succeeded"], counts["failed"], counts["total"]) == (999, 1, 1000)
    assert "UpdateFinalStatus" not in states_entered(result.history)
    record = map_engine.status_record("m-1000", "map")
    assert (record["status"], record["failedItems"], record["totalItems"]) == ("FAILED", 1, 1000)
    assert record["failureError"] == "ItemsFailed" and record["resultsKey"].endswith("/manifest.json")


def test_a_transient_item_failure_is_retried_and_succeeds(map_engine):
    result = run(map_engine, "m-flaky", items=items(5, i2={"mode": "transient", "times": 2}))
    assert result.status == "SUCCEEDED"
    assert len(worker_calls(map_engine)) == 5 + 2
    assert map_engine.map_run_counts(result.arn)["succeeded"] == 5


def test_non_retryable_item_is_tried_once(map_engine):
    result = run(map_engine, "m-fatal", items=items(4, i0={"mode": "fatal"}))
    assert result.status == "FAILED"
    assert len(worker_calls(map_engine)) == 4
    (message,) = map_engine.dlq_messages("map")
    assert message["error"] == "NonRetryableTaskError"


def test_the_configured_batch_size_is_what_the_worker_gets(synthesized):
    """prod batches 20 items per child (ItemBatcher): 45 items are 3 children of 20, 20 and 5."""
    with deployed(synthesized("prod")) as engine:
        result = run(engine, "m-batched", items=items(45))
        assert result.status == "SUCCEEDED"
        calls = worker_calls(engine)
        assert sorted(len(c.event["items"]) for c in calls) == [5, 20, 20]
        assert sorted(i["index"] for c in calls for i in c.event["items"]) == list(range(45))
        assert {c.event["batchId"] for c in calls} == {"m-batched"}
        counts = engine.map_run_counts(result.arn)
        assert (counts["total"], counts["succeeded"]) == (45, 45)  # counted in items, not children


def test_a_failed_item_fails_alone_in_its_batch(synthesized):
    """A fatal item in a batch of 20 (prod) fails alone: the worker reports it in
    batchItemFailures; the map run counts its child failed, the verdict counts items."""
    with deployed(synthesized("prod")) as engine:
        result = run(engine, "m-batch-fail", items=items(45, i21={"mode": "fatal"}))
        assert result.status == "FAILED"
        counts = engine.map_run_counts(result.arn)
        assert (counts["succeeded"], counts["failed"]) == (25, 20)
        (message,) = engine.dlq_messages("map")
        assert [i["index"] for i in message["items"]] == [21]
        assert engine.status_record("m-batch-fail", "map")["failedItems"] == 1


def test_an_express_child_over_its_time_limit_is_stopped_and_its_items_still_reach_the_dlq(dev_app):
    """AWS stops an Express child at 5 minutes without running its Catch. Here the limit is 20 s
    and item 3 hangs until its function's 30 s timeout: the child is stopped, the map run counts
    it timed out, and the parent forwards its items to the DLQ from the map run's results."""
    with deployed(dev_app, express_limit_seconds=20) as engine:
        result = run(engine, "m-slow", items=items(6, i3={"mode": "hang"}))
        assert result.status == "FAILED" and result.error == "BatchFailed"
        counts = engine.map_run_counts(result.arn)
        assert (counts["succeeded"], counts["failed"], counts["timedOut"]) == (5, 0, 1)
        (message,) = engine.dlq_messages("map")
        assert [i["index"] for i in message["items"]] == [3]
        assert message["childStatus"] == "TIMED_OUT" and message["error"] == "States.Timeout"
        assert "stopped at the 20 s limit" in message["cause"] and message["executionArn"] == result.arn
        # the child's own DLQ step never ran: the one message is the parent's
        assert message["forwardedFrom"] == "map run results"
        assert "1 of 6 items did not succeed (0 failed, 1 timed out" in result.cause
        assert engine.status_record("m-slow", "map")["failedItems"] == 1


def test_a_hung_item_within_the_limit_goes_to_the_dlq_from_its_own_child(map_engine):
    result = run(map_engine, "m-hang", items=items(3, i1={"mode": "hang"}))
    assert result.status == "FAILED"
    (message,) = map_engine.dlq_messages("map")
    assert message["error"] == "Sandbox.Timedout" and "forwardedFrom" not in message
    assert map_engine.map_run_counts(result.arn)["failed"] == 1


def test_csv_manifest(map_engine):
    body = b"imageId,width\n" + b"".join(f"img-{i},{i}\n".encode() for i in range(12))
    manifest = map_engine.upload_manifest("manifests/images.csv", body)
    result = run(map_engine, "m-csv", manifest=manifest)
    assert result.status == "SUCCEEDED"
    assert "ProcessItems CSV" in states_entered(result.history)
    assert map_engine.map_run_counts(result.arn)["succeeded"] == 12


def test_parent_history_does_not_grow_with_n(map_engine):
    small = run(map_engine, "m-small", items=items(5))
    large = run(map_engine, "m-large", items=items(120))
    assert len(small.history) == len(large.history)


def _nothing_ran(engine, result, batch_id):
    assert engine.map_run_counts(result.arn) is None
    assert worker_calls(engine) == []
    assert engine.status_record(batch_id, "map") is None
    assert engine.dlq_messages("map") == []


@pytest.mark.parametrize(
    "manifest_key, body, error, message",
    [
        ("manifests/missing.json", None, "InvalidManifest", "not found; upload it first"),
        ("manifests/broken.json", b'[{"a": 1},', "InvalidManifest", "the JSON array ends early"),
        ("manifests/object.json", b'{"a": 1}', "InvalidManifest", "must be one array of items"),
        ("manifests/empty.json", b"[]", "InvalidManifest", "the batch is empty"),
        ("manifests/ragged.csv", b"a,b\n1,2\n3\n", "InvalidManifest", "CSV line 3 has 1 fields, the header has 2"),
        ("manifests/big.json", json.dumps([{"blob": "x" * 9000}]).encode(), "InvalidManifest", "[0]: item is 9011 bytes, more than 8192"),
        ("manifests/scalars.json", b'[{"a": 1}, 1, "two", null]', "InvalidManifest", "[1]: each item must be a JSON object, got a number"),
    ],
)
def test_bad_manifests_fail_with_a_named_error_and_run_nothing(map_engine, manifest_key, body, error, message):
    if body is not None:
        map_engine.upload_manifest(manifest_key, body)
    manifest = {"bucket": map_engine.bucket_name(), "key": manifest_key}
    result = run(map_engine, "m-bad", manifest=manifest)
    assert result.status == "FAILED" and result.error == error
    assert message in json.loads(result.cause)["errorMessage"]
    _nothing_ran(map_engine, result, "m-bad")


@pytest.mark.parametrize(
    "input_, message",
    [
        ({"items": []}, "items: the batch is empty"),
        ({"items": [{"a": 1}], "manifest": {"bucket": "b", "key": "k.json"}}, "give exactly one"),
        ({"manifest": {"bucket": "other-bucket", "key": "manifests/k.json"}}, "reads manifests from its batch data bucket only"),
        ({"manifest": {"bucket": "somebucket", "key": "manifests/k.txt"}}, "manifest.format: must be JSON or CSV"),
        ({"manifest": {"bucket": "somebucket", "key": "elsewhere/k.json"}}, "manifest.key: must be under manifests/"),
        ({"items": [{"a": 1}, [2]]}, "items[1]: each item must be a JSON object, got an array"),
    ],
)
def test_bad_input_fails_with_a_named_error_and_runs_nothing(map_engine, input_, message):
    result = run(map_engine, "m-bad-input", **input_)
    assert result.status == "FAILED" and result.error in ("InvalidInput", "InvalidManifest")
    assert message in json.loads(result.cause)["errorMessage"]
    _nothing_ran(map_engine, result, "m-bad-input")


def test_a_duplicate_start_of_a_finished_batch_processes_no_item(map_engine):
    first = run(map_engine, "m-twice", items=items(3))
    second = run(map_engine, "m-twice", items=items(3))
    assert (first.status, second.status) == ("SUCCEEDED", "SUCCEEDED")
    assert second.output["finalStatus"] == {"outcome": "ALREADY_FINALIZED", "finalizedBy": first.arn}
    entered = states_entered(second.history)
    assert "AlreadyFinalized" in entered
    assert not any(s.startswith(("ProcessItems", "UpdateFinalStatus")) for s in entered)
    assert worker_calls(map_engine) and len(worker_calls(map_engine)) == 3  # the first run's only


def test_a_failed_batch_started_again_names_the_redrive_that_works(map_engine):
    """After BatchFailed the console's Redrive would re-run only the BatchFailed Fail state (AWS:
    RedriveExecution does not re-run steps that succeeded, nor a Distributed Map that exited), so
    the conflict names `fanout dlq redrive --workflow map`, the recovery the README documents."""
    failed = run(map_engine, "m-again", items=items(3, i1={"mode": "fatal"}))
    assert (failed.status, failed.error) == ("FAILED", "BatchFailed")
    again = run(map_engine, "m-again", items=items(3))
    assert (again.status, again.error) == ("FAILED", "FinalStatusConflict")
    assert failed.arn in again.cause
    assert "run `fanout dlq redrive --workflow map --batch m-again`" in again.cause
    assert "or Redrive in the console" not in again.cause


def test_failures_within_the_threshold_still_finalize_and_reach_the_dlq(tmp_path):
    """map.failureThreshold 1: one failed item among 5 finalizes the batch SUCCEEDED (the count
    decides), and the failed item is in the DLQ all the same."""
    import copy

    from fanout_kit.local.template import synthesize
    from stacks.config import read_cdk_context

    context = copy.deepcopy(read_cdk_context())
    context["fanout:environments"]["dev"]["map"]["failureThreshold"] = 1
    app = synthesize("dev", tmp_path, context=context)
    with deployed(app) as engine:
        assert engine.deployment("map").env.map.failure_threshold == 1  # the settings it was synthesized with
        tolerated = run(engine, "m-tolerated", items=items(5, i2={"mode": "fatal"}))
        assert tolerated.status == "SUCCEEDED"
        assert "WithinFailureThreshold?" in states_entered(tolerated.history)
        assert engine.status_record("m-tolerated", "map")["status"] == "SUCCEEDED"
        (message,) = engine.dlq_messages("map")
        assert [i["index"] for i in message["items"]] == [2]
        beyond = run(engine, "m-beyond", items=items(5, i1={"mode": "fatal"}, i3={"mode": "fatal"}))
        assert beyond.status == "FAILED" and "tolerated: 1" in beyond.cause
        assert engine.status_record("m-beyond", "map")["failedItems"] == 2

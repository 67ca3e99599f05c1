"""Per-item failure inside a Map batch (issue 20 part 2), end to end on the synthesized prod
definition (20 items per child) with the real handlers: a worker reports the items that failed
(``batchItemFailures``); only they are retried, dead-lettered, counted failed and redriven."""

import copy
import json
from collections import Counter

import pytest

from fanout_kit.local.history import states_entered
from tests.e2e.test_map_workflow import deployed, items, run, worker_calls


def attempts_per_index(engine):
    """How many times the worker was invoked with each item index."""
    return Counter(e["index"] for call in worker_calls(engine) for e in call.event["items"])


@pytest.fixture
def prod_engine(synthesized):
    with deployed(synthesized("prod")) as engine:
        yield engine


def test_one_poison_item_fails_alone_in_its_batch_of_20(prod_engine):
    result = run(prod_engine, "i-poison", items=items(20, i7={"mode": "permanent"}))
    assert (result.status, result.error) == ("FAILED", "BatchFailed")
    assert result.cause.startswith("1 of 20 items did not succeed (1 failed, 0 timed out, 0 aborted")
    record = prod_engine.status_record("i-poison", "map")
    assert (record["failedItems"], record["totalItems"]) == (1, 20)
    (message,) = prod_engine.dlq_messages("map")
    assert [i["index"] for i in message["items"]] == [7]
    assert message["error"] == "RetryableTaskError"
    assert [e["index"] for e in message["itemErrors"]] == [7] and "item-7" in message["itemErrors"][0]["cause"]
    assert message["executionArn"] == result.arn and message["childExecutionArn"] != result.arn
    # the poison item was retried alone (prod: retryable.maxAttempts 2); its neighbours ran once
    per_index = attempts_per_index(prod_engine)
    assert per_index[7] == 3 and {per_index[i] for i in range(20) if i != 7} == {1}
    # the map run counts the child failed (fail closed); the verdict counts items
    counts = prod_engine.map_run_counts(result.arn)
    assert (counts["succeeded"], counts["failed"]) == (0, 20)
    assert "ForwardFailedItems" in states_entered(result.history)


def test_a_transient_item_is_retried_alone_and_the_batch_succeeds(prod_engine):
    result = run(prod_engine, "i-flaky", items=items(40, i25={"mode": "transient", "times": 1}))
    assert result.status == "SUCCEEDED"
    per_index = attempts_per_index(prod_engine)
    assert per_index[25] == 2 and {per_index[i] for i in range(40) if i != 25} == {1}
    retried = [c.event for c in worker_calls(prod_engine) if [e["index"] for e in c.event["items"]] == [25]]
    assert [e["attempt"] for e in retried] == [1]
    assert prod_engine.dlq_messages("map") == []
    assert prod_engine.map_run_counts(result.arn)["succeeded"] == 40
    assert prod_engine.retry_clock.waits  # the round waited its backoff (recorded, not slept)


def test_a_fatal_item_is_not_retried(prod_engine):
    result = run(prod_engine, "i-fatal", items=items(20, i3={"mode": "fatal"}, i4={"mode": "permanent"}))
    assert result.status == "FAILED"
    per_index = attempts_per_index(prod_engine)
    assert (per_index[3], per_index[4], per_index[5]) == (1, 3, 1)
    messages = prod_engine.dlq_messages("map")
    assert sorted(i["index"] for m in messages for i in m["items"]) == [3, 4]
    errors = {e["index"]: e["error"] for m in messages for e in m["itemErrors"]}
    assert errors == {3: "NonRetryableTaskError", 4: "RetryableTaskError"}
    assert prod_engine.status_record("i-fatal", "map")["failedItems"] == 2


@pytest.mark.parametrize(
    ("answer", "fault"),
    [
        ({"processed": 19, "batchItemFailures": [{"itemIndex": 999}]}, "itemIndex: 999 is not an index of this batch"),
        ({"processed": 19, "batchItemFailures": "item 3 failed"}, "must be a list"),
        ({"processed": 18, "batchItemFailures": [{"itemIndex": 2}, {"itemIndex": 2}]}, "2 is listed twice"),
    ],
)
def test_a_malformed_answer_fails_the_whole_batch_closed(prod_engine, monkeypatch, answer, fault):
    import map_item_worker

    monkeypatch.setattr(map_item_worker, "batch_item_failures", lambda failures, processed: answer)
    result = run(prod_engine, "i-malformed", items=items(20))
    assert result.status == "FAILED"
    (message,) = prod_engine.dlq_messages("map")
    assert sorted(i["index"] for i in message["items"]) == list(range(20))
    assert message["error"] == "InvalidBatchItemFailures" and fault in message["itemErrors"][0]["cause"]
    record = prod_engine.status_record("i-malformed", "map")
    assert record["failedItems"] == 20
    assert len(worker_calls(prod_engine)) == 1  # not retried


def test_the_redrive_runs_only_the_failed_items(prod_engine):
    from fanout_kit.ops.redrive import plan_map_redrive

    result = run(prod_engine, "i-redrive", items=items(40, i5={"mode": "permanent"}, i33={"mode": "fatal"}))
    assert result.status == "FAILED"
    record = prod_engine.status_record("i-redrive", "map")
    assert record["failedItems"] == 2
    plan = plan_map_redrive(
        "i-redrive", prod_engine.dlq_peek("map"), record, prod_engine.sfn, prod_engine.client("s3"), prod_engine.bucket_name()
    )
    assert [i["index"] for i in plan.items] == [5, 33] and plan.notes == []
    assert [i["imageId"] for i in plan.execution_input["items"]] == ["img-5", "img-33"]
    before = len(worker_calls(prod_engine))
    redrive = prod_engine.run("map", plan.execution_input)
    assert redrive.status == "FAILED"  # the items still carry their faults
    calls = worker_calls(prod_engine)[before:]
    assert sorted(len(c.event["items"]) for c in calls)[-1] == 2  # one child of the 2 items, no neighbours
    assert prod_engine.status_record("i-redrive", "map")["failedItems"] == 2


def test_the_redrive_takes_partly_failed_items_from_the_results_when_the_dlq_lost_them(prod_engine):
    from fanout_kit.ops.redrive import plan_map_redrive

    run(prod_engine, "i-lost", items=items(20, i11={"mode": "fatal"}))
    record = prod_engine.status_record("i-lost", "map")
    plan = plan_map_redrive("i-lost", [], record, prod_engine.sfn, prod_engine.client("s3"), prod_engine.bucket_name())
    assert [i["index"] for i in plan.items] == [11]  # only the listed item of the partly failed child


@pytest.fixture(scope="module")
def tolerant_app(tmp_path_factory):
    """dev with prod's batching (20 items per child) and map.failureThreshold 3."""
    from fanout_kit.local.template import synthesize
    from stacks.config import read_cdk_context

    context = copy.deepcopy(read_cdk_context())
    context["fanout:environments"]["dev"]["map"].update(itemsPerBatch=20, maxItemBytes=6144, failureThreshold=3)
    return synthesize("dev", tmp_path_factory.mktemp("tolerant"), context=context)


def test_the_failure_threshold_counts_items_not_batches(tolerant_app):
    """3 poison items in 3 batches of 20: 60 items of failed children in the map run's counts,
    3 failed items for the verdict, within a threshold of 3."""
    poison = {"i5": {"mode": "fatal"}, "i27": {"mode": "fatal"}, "i58": {"mode": "fatal"}}
    with deployed(tolerant_app) as engine:
        ok = run(engine, "i-tolerated", items=items(80, **poison))
        assert ok.status == "SUCCEEDED"
        assert engine.map_run_counts(ok.arn)["failed"] == 60
        assert engine.status_record("i-tolerated", "map")["status"] == "SUCCEEDED"
        assert sorted(i["index"] for m in engine.dlq_messages("map") for i in m["items"]) == [5, 27, 58]
        beyond = run(engine, "i-beyond", items=items(80, **poison, i70={"mode": "fatal"}))
        assert beyond.status == "FAILED"
        assert beyond.cause.startswith("4 of 80 items did not succeed (4 failed") and "tolerated: 3" in beyond.cause
        assert engine.status_record("i-beyond", "map")["failedItems"] == 4


def test_the_child_keeps_its_output_and_the_happy_path_its_states(prod_engine):
    """Nothing failed: the parent runs the same states as before (no ForwardFailedItems), and each
    child's output is still {"processed": N} in the SUCCEEDED results."""
    result = run(prod_engine, "i-happy", items=items(45))
    assert result.status == "SUCCEEDED"
    assert "ForwardFailedItems" not in states_entered(result.history)
    s3 = prod_engine.client("s3")
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=prod_engine.bucket_name())["Contents"] if o["Key"].endswith("SUCCEEDED_0.json")]
    outputs = [json.loads(e["Output"]) for e in json.loads(s3.get_object(Bucket=prod_engine.bucket_name(), Key=keys[0])["Body"].read())]
    assert sorted(o["processed"] for o in outputs) == [5, 20, 20]

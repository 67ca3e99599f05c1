"""Per-item failures of a Map batch, the pure parts: the worker's answer checked, the retry rounds,
the child's verdict, the fan-in's item count and the results read back item by item."""

import json

import pytest

from fanout_kit.patterns.distributed_map.item_failures import InvalidBatchItemFailures, Policy, check_failures, dead_letter_bodies, run_rounds
from fanout_kit.patterns.distributed_map.result_files import (
    ITEMS_PARTIALLY_FAILED,
    already_dead_lettered,
    failed_items,
    item_outcome,
    partial_cause,
)
from fanout_kit.ops.outcomes import entry_outcomes
from fanout_runtime.events import batch_item_failure, batch_item_failures
from fanout_kit.patterns.distributed_map.handlers.forward_failed_items import item_tally

BATCH = [{"index": i, "item": {"n": i}} for i in range(20, 40)]
POLICY = Policy(interval_seconds=5, max_attempts=2, backoff_rate=2.0, max_delay_seconds=10, worker_timeout_seconds=20)


def test_the_runtime_helper_builds_the_documented_answer():
    answer = batch_item_failures([batch_item_failure(23, RuntimeError("503 from the image service"))], processed=19)
    assert answer == {"processed": 19, "batchItemFailures": [
        {"itemIndex": 23, "error": "RuntimeError", "cause": "503 from the image service"}]}
    assert batch_item_failures([], processed=20) == {"processed": 20}
    with pytest.raises(TypeError):
        batch_item_failure(True)


@pytest.mark.parametrize(
    ("failures", "fault"),
    [
        ("item 3", "must be a list"),
        ({"itemIndex": 21}, "must be a list"),
        ([21], "[0]: must be an object"),
        ([{"itemIndex": "21"}], "[0].itemIndex: must be the item's int index"),
        ([{"itemIndex": True}], "[0].itemIndex: must be the item's int index"),
        ([{"itemIndex": 5}], "[0].itemIndex: 5 is not an index of this batch (20 item(s), indexes 20..39)"),
        ([{"itemIndex": 21}, {"itemIndex": 21}], "[1].itemIndex: 21 is listed twice"),
    ],
)
def test_a_malformed_answer_is_refused_naming_the_field(failures, fault):
    with pytest.raises(InvalidBatchItemFailures, match=None) as caught:
        check_failures({"processed": 1, "batchItemFailures": failures}, BATCH)
    assert fault in str(caught.value)


def test_a_well_formed_answer():
    assert check_failures({"processed": 20}, BATCH) == []
    assert check_failures({"batchItemFailures": []}, BATCH) == []
    (failure,) = check_failures({"batchItemFailures": [{"itemIndex": 22, "cause": "x" * 5000}]}, BATCH)
    assert (failure.index, failure.error, len(failure.cause)) == (22, "NonRetryableTaskError", 1024)


class Worker:
    """Fails each index in ``fail`` until its attempt reaches the given number (None: always)."""

    def __init__(self, fail, error="RetryableTaskError"):
        self.fail, self.error, self.calls = fail, error, []

    def __call__(self, entries, attempt):
        self.calls.append(([e["index"] for e in entries], attempt))
        bad = [e["index"] for e in entries if e["index"] in self.fail and (self.fail[e["index"]] is None or attempt < self.fail[e["index"]])]
        return {"processed": len(entries) - len(bad),
                "batchItemFailures": [{"itemIndex": i, "error": self.error} for i in bad]}, None, ""


def rounds(answer, worker, policy=POLICY, seconds=1000.0):
    slept = []
    outcome = run_rounds(BATCH, answer, policy, invoke=worker, seconds_left=lambda: seconds, sleep=slept.append,
                         draw=lambda low, high: high)
    return outcome, slept


def test_only_the_failed_items_are_retried_with_backoff_then_dead_lettered():
    worker = Worker({27: None, 31: 1})
    first = {"processed": 18, "batchItemFailures": [{"itemIndex": 27, "error": "RetryableTaskError"},
                                                      {"itemIndex": 31, "error": "RetryableTaskError"}]}
    outcome, slept = rounds(first, worker)
    assert worker.calls == [([27, 31], 1), ([27], 2)]  # 31 succeeded on its retry; 27 never
    assert slept == [5, 10]  # interval x rate^n, capped by max_delay_seconds (full jitter draws below)
    assert outcome.failed_indexes == [27]
    verdict = outcome.verdict()
    assert verdict["error"] == ITEMS_PARTIALLY_FAILED and verdict["failed"] == 1
    cause = json.loads(verdict["cause"])
    assert (cause["failedIndexes"], cause["errors"], cause["items"]) == ([27], ["RetryableTaskError"], 20)
    assert len(cause["causes"]) == 1


def test_a_non_retryable_item_is_not_retried_and_retry_on_names_are():
    policy = Policy(5, 2, 2.0, 10, retry_on=("ThrottlingException",), never_retry=("CardDeclined",), worker_timeout_seconds=20)
    first = {"batchItemFailures": [{"itemIndex": 20, "error": "CardDeclined"}, {"itemIndex": 21, "error": "ThrottlingException"},
                                   {"itemIndex": 22, "error": "ValueError"}]}
    worker = Worker({})
    outcome, _ = rounds(first, worker, policy)
    assert worker.calls == [([21], 1)] and outcome.failed_indexes == [20, 22]


def test_no_round_starts_without_the_time_for_it():
    """The child's time (an Express child: what its 5 minutes leave) bounds the rounds."""
    first = {"batchItemFailures": [{"itemIndex": 25, "error": "RetryableTaskError"}]}
    worker = Worker({25: None})
    outcome, slept = rounds(first, worker, seconds=20.0)  # a round needs wait 5 + worker 20 + 2
    assert worker.calls == [] and slept == [] and outcome.failed_indexes == [25]
    assert "the child's time is spent" in outcome.failed[0][1].cause


def test_a_retry_that_fails_as_a_whole_fails_only_its_items():
    first = {"batchItemFailures": [{"itemIndex": 25, "error": "RetryableTaskError"}]}
    outcome, _ = rounds(first, lambda entries, attempt: (None, "Sandbox.Timedout", "Task timed out"))
    assert outcome.failed_indexes == [25] and outcome.failed[0][1].error == "Sandbox.Timedout"


def test_a_malformed_first_answer_dead_letters_the_whole_batch():
    outcome, _ = rounds({"batchItemFailures": [{"itemIndex": 99}]}, Worker({}))
    verdict = outcome.verdict()
    assert verdict["error"] == "ItemsDeadLettered" and verdict["failed"] == 20
    assert "InvalidBatchItemFailures" in verdict["cause"] and "99 is not an index of this batch" in verdict["cause"]
    (body,) = dead_letter_bodies(outcome, batch_id="b", task="T", execution_arn="p", child_execution_arn="c", failed_at="t")
    assert [i["index"] for i in body["items"]] == list(range(20, 40)) and body["error"] == "InvalidBatchItemFailures"


def test_the_dead_letter_message_lists_only_the_failed_items_with_their_own_errors():
    first = {"batchItemFailures": [{"itemIndex": 30, "error": "NonRetryableTaskError", "cause": "bad size"},
                                   {"itemIndex": 24, "error": "KeyError", "cause": "'width'"}]}
    outcome, _ = rounds(first, Worker({}))
    (body,) = dead_letter_bodies(outcome, batch_id="b", task="T", execution_arn="p", child_execution_arn="c", failed_at="t")
    assert body["items"] == [{"index": 24, "item": {"n": 24}}, {"index": 30, "item": {"n": 30}}]
    assert body["itemErrors"] == [{"index": 24, "error": "KeyError", "cause": "'width'"},
                                  {"index": 30, "error": "NonRetryableTaskError", "cause": "bad size"}]
    assert body["error"] == ITEMS_PARTIALLY_FAILED  # two different errors
    many = dead_letter_bodies(outcome, batch_id="b", task="T", execution_arn="p", child_execution_arn="c",
                              failed_at="t", max_bytes=200)
    assert [len(b["items"]) for b in many] == [1, 1]  # split past the size, never an item lost


def partial_entry(failed, errors=None, cause=None):
    return {
        "Status": "FAILED", "Error": ITEMS_PARTIALLY_FAILED, "ExecutionArn": "arn:child",
        "Input": json.dumps({"Items": BATCH, "BatchInput": {"batchId": "b"}}),
        "Cause": cause if cause is not None else partial_cause(failed, 20, "m", errors),
    }


def test_the_fan_in_counts_a_partly_failed_child_item_by_item():
    entry = partial_entry([27, 31])
    assert item_outcome(entry) == (2, 18) and already_dead_lettered(entry)
    assert [i["index"] for i in failed_items(entry)] == [27, 31]
    # a cause that does not list a subset of the child's items: every item failed, forwarded again
    for bad in ("not json", json.dumps({"failedIndexes": [5]}), json.dumps({"failedIndexes": []}),
                json.dumps({"failedIndexes": [27, 27]})):
        entry = partial_entry([], cause=bad)
        assert item_outcome(entry) == (20, 0) and not already_dead_lettered(entry) and len(failed_items(entry)) == 20


def test_the_item_tally_never_moves_more_than_the_map_run_counted_failed():
    counts = {"succeeded": 99_940, "failed": 60, "timedOut": 0, "aborted": 0}
    tally = {"unsuccessful": 60, "required": 100_000, "succeeded": 99_940, "failed": 60}
    assert item_tally(counts, tally, 57) == {"unsuccessful": 3, "required": 100_000, "succeeded": 99_997, "failed": 3}
    assert item_tally(counts, tally, 10_000)["succeeded"] == 100_000  # bounded by the failed count


def test_the_results_expand_a_partly_failed_child_to_item_outcomes():
    entry = partial_entry([], cause=partial_cause([27, 31], 20, "m", ["RetryableTaskError", "KeyError"], ["503", "'w'"]))
    outcomes = list(entry_outcomes(entry, "results/r/FAILED_0.json"))
    failed = [(o.index, o.status, o.error, o.cause) for o in outcomes if o.failed]
    assert failed == [(27, "FAILED", "RetryableTaskError", "503"), (31, "FAILED", "KeyError", "'w'")]
    assert {o.status for o in outcomes if not o.failed} == {"SUCCEEDED"} and len(outcomes) == 20
    unreadable = list(entry_outcomes(partial_entry([], cause="?"), "k"))
    assert all(o.failed for o in unreadable)

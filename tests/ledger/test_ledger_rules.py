"""The ledger's rules, one by one (in-process moto)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from fanout_kit.patterns.completion_ledger.ledger import (
    SWEEPER,
    BatchNotRegistered,
    InvalidChildMessage,
    Ledger,
    LedgerContention,
    Outcome,
    TooManyChildren,
    TotalMismatch,
    sweep_overdue,
)

NOW = 1_700_000_000


def ledger_of(aws, **kwargs) -> Ledger:
    return Ledger(aws.dynamodb, aws.ledger_table, clock=lambda: NOW, **kwargs)


def counts(ledger: Ledger, batch_id: str) -> tuple:
    b = ledger.read_batch(batch_id)
    return b["status"], b["succeeded"], b["failed"], b["done"], b["total"]


def test_total_in_first_message_creates_the_batch_and_completes_it(aws):
    ledger = ledger_of(aws)
    first = ledger.record_success("b", "0", total=3, index=0)
    assert first.outcome is Outcome.COUNTED and first.status == "RUNNING" and first.succeeded == 1
    assert ledger.record_success("b", "1", total=3).outcome is Outcome.COUNTED
    last = ledger.record_success("b", "2", total=3)
    assert last.outcome is Outcome.COMPLETED and last.must_finalize and not last.resumed
    assert counts(ledger, "b") == ("COMPLETED", 3, 0, 3, 3)
    item = ledger.read_batch("b")
    assert item["expiresAt"] == NOW + 30 * 86400 and item["createdAt"].startswith("2023-11-14T22:13:20")


def test_registered_up_front_accepts_messages_without_total(aws):
    ledger = ledger_of(aws)
    assert ledger.register_batch("b", 2).outcome is Outcome.REGISTERED
    assert ledger.register_batch("b", 2).outcome is Outcome.ALREADY_REGISTERED
    assert ledger.record_success("b", "x").outcome is Outcome.COUNTED
    assert ledger.record_success("b", "y", total=2).outcome is Outcome.COMPLETED  # a total may be given too
    assert counts(ledger, "b") == ("COMPLETED", 2, 0, 2, 2)


def test_registering_again_with_another_total_names_both(aws):
    ledger = ledger_of(aws)
    ledger.register_batch("b", 2)
    with pytest.raises(TotalMismatch, match="total=2 but this message says total=5"):
        ledger.register_batch("b", 5)


def test_child_without_total_for_an_unregistered_batch_is_refused(aws):
    with pytest.raises(BatchNotRegistered, match="never registered"):
        ledger_of(aws).record_success("nobody", "c1")
    assert ledger_of(aws).read_batch("nobody") is None  # nothing half-written


def test_duplicate_delivery_is_a_no_op(aws):
    ledger = ledger_of(aws)
    ledger.record_success("b", "c1", total=3)
    again = ledger.record_success("b", "c1", total=3)
    assert again.outcome is Outcome.DUPLICATE and not again.must_finalize
    # the same child failing later (a late DLQ delivery) does not count either
    assert ledger.record_failure("b", "c1", total=3).outcome is Outcome.DUPLICATE
    assert counts(ledger, "b") == ("RUNNING", 1, 0, 1, 3)


def test_total_mismatch_is_an_error_naming_both_totals_and_counts_nothing(aws):
    ledger = ledger_of(aws)
    ledger.record_success("b", "c1", total=3)
    with pytest.raises(TotalMismatch) as err:
        ledger.record_success("b", "c2", total=4)
    assert (err.value.stored, err.value.supplied) == (3, 4)
    assert "total=3" in str(err.value) and "total=4" in str(err.value)
    assert counts(ledger, "b") == ("RUNNING", 1, 0, 1, 3)
    assert ledger.record_success("b", "c2", total=3).outcome is Outcome.COUNTED  # its mark was not kept


def test_children_beyond_the_total_and_bad_indexes_are_refused(aws):
    ledger = ledger_of(aws)
    ledger.register_batch("b", 1)
    with pytest.raises(InvalidChildMessage, match="out of range"):
        ledger.record_success("b", "5", index=5)
    with pytest.raises(InvalidChildMessage, match=r"index must be a whole number in \[0, total\)"):
        ledger.record_success("b", "7", total=1, index=7)
    ledger.record_success("b", "0", index=0)  # the only child: COMPLETED
    assert ledger.record_success("b", "extra").outcome is Outcome.BATCH_CLOSED  # a closed batch takes no more
    assert counts(ledger, "b") == ("COMPLETED", 1, 0, 1, 1)


def test_too_many_children_while_running(aws, monkeypatch):
    ledger = ledger_of(aws)
    ledger.register_batch("b", 1)
    # a crash right after the counting transaction leaves the batch RUNNING with done == total
    monkeypatch.setattr(ledger, "_decide", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("crash")))
    with pytest.raises(RuntimeError):
        ledger.record_success("b", "a")
    monkeypatch.undo()
    with pytest.raises(TooManyChildren, match="one too many"):
        ledger.record_success("b", "intruder")


def test_crash_between_transaction_and_decision_is_healed_by_redelivery(aws, monkeypatch):
    ledger = ledger_of(aws)
    ledger.record_success("b", "a", total=2)
    monkeypatch.setattr(ledger, "_decide", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("crash")))
    with pytest.raises(RuntimeError):
        ledger.record_success("b", "b", total=2)  # counted, but the decision never made
    monkeypatch.undo()
    assert counts(ledger, "b") == ("RUNNING", 2, 0, 2, 2)
    healed = ledger.record_success("b", "b", total=2)  # the redelivery
    assert healed.outcome is Outcome.COMPLETED and not healed.resumed
    assert counts(ledger, "b") == ("COMPLETED", 2, 0, 2, 2)


def test_the_winner_gets_its_follow_up_again_until_it_acknowledges(aws):
    ledger = ledger_of(aws)
    ledger.record_success("b", "a", total=2)
    assert ledger.record_success("b", "b", total=2).outcome is Outcome.COMPLETED
    again = ledger.record_success("b", "b", total=2)  # e.g. UpdateFinalStatus failed, message retried
    assert again.outcome is Outcome.COMPLETED and again.resumed
    assert ledger.record_success("b", "a", total=2).outcome is Outcome.DUPLICATE  # never another child
    assert ledger.acknowledge_finish("b", "b", "ledger:test:b") is True
    assert ledger.acknowledge_finish("b", "b", "ledger:test:b") is False
    assert ledger.record_success("b", "b", total=2).outcome is Outcome.DUPLICATE
    assert ledger.read_batch("b")["finishedBy"] == "ledger:test:b"


def test_first_failure_fails_the_batch_once_with_the_default_threshold(aws):
    ledger = ledger_of(aws)
    ledger.record_success("b", "a", total=4)
    won = ledger.record_failure("b", "b", total=4, reason="dead-lettered")
    assert won.outcome is Outcome.FAILED_BATCH and won.must_alarm and won.reason == "more than 0 children failed"
    assert ledger.acknowledge_finish("b", "b", "ledger:test:b")
    assert ledger.record_failure("b", "c", total=4).outcome is Outcome.BATCH_CLOSED
    assert ledger.record_failure("b", "b", total=4).outcome is Outcome.DUPLICATE
    assert ledger.record_success("b", "d", total=4).outcome is Outcome.BATCH_CLOSED
    assert counts(ledger, "b") == ("FAILED", 1, 1, 2, 4)


def test_threshold_tolerates_failures_then_fails_once(aws):
    ledger = ledger_of(aws, failure_threshold=1)
    assert ledger.record_failure("b", "a", total=4).outcome is Outcome.COUNTED  # tolerated
    assert ledger.record_failure("b", "b", total=4).outcome is Outcome.FAILED_BATCH  # 2 > 1
    assert ledger.record_failure("b", "c", total=4).outcome is Outcome.BATCH_CLOSED


def test_a_tolerated_failure_as_the_last_child_completes_the_batch(aws):
    ledger = ledger_of(aws, failure_threshold=1)
    ledger.record_success("b", "a", total=2)
    last = ledger.record_failure("b", "b", total=2)
    assert last.outcome is Outcome.COMPLETED and last.failed == 1
    assert counts(ledger, "b") == ("COMPLETED", 1, 1, 2, 2)


def test_completed_never_reverts(aws):
    ledger = ledger_of(aws, deadline_seconds=60)
    ledger.record_success("b", "a", total=1)
    assert ledger.read_batch("b")["status"] == "COMPLETED"
    assert ledger.record_failure("b", "z", total=1).outcome is Outcome.BATCH_CLOSED
    assert ledger.fail_overdue("b", now=NOW + 10_000).outcome is Outcome.NOT_OVERDUE
    assert ledger.record_success("b", "a", total=1).outcome in (Outcome.COMPLETED, Outcome.DUPLICATE)
    item = ledger.read_batch("b")
    assert item["status"] == "COMPLETED" and "runningDeadline" not in item and "sweepKey" not in item


def test_deadline_sweep_fails_overdue_batches_once(aws):
    ledger = ledger_of(aws, deadline_seconds=600)
    ledger.record_success("late", "a", total=2)  # deadline NOW + 600 from the first message
    ledger.register_batch("early", 2, deadline=NOW + 60)
    ledger.register_batch("done", 1, deadline=NOW + 60)
    ledger.record_success("done", "a")
    assert list(ledger.overdue_batch_ids(now=NOW + 59)) == []
    assert list(ledger.overdue_batch_ids(now=NOW + 60)) == ["early"]  # "done" left the index
    assert sorted(ledger.overdue_batch_ids(now=NOW + 600)) == ["early", "late"]
    won = sweep_overdue(aws.dynamodb, aws.ledger_table, now=NOW + 600)
    assert sorted(r.batch_id for r in won) == ["early", "late"]
    assert all(r.outcome is Outcome.FAILED_BATCH and r.reason == "deadline passed" for r in won)
    assert sweep_overdue(aws.dynamodb, aws.ledger_table, now=NOW + 600) == []
    assert ledger.read_batch("late")["finisherChild"] == SWEEPER
    assert ledger.record_success("late", "b", total=2).outcome is Outcome.BATCH_CLOSED
    assert counts(ledger, "done")[0] == "COMPLETED"


def test_a_batch_still_in_time_is_not_failed(aws):
    ledger = ledger_of(aws)
    ledger.register_batch("b", 2, deadline=NOW + 60)
    assert ledger.fail_overdue("b", now=NOW).outcome is Outcome.NOT_OVERDUE
    assert counts(ledger, "b")[0] == "RUNNING"


def test_child_marks_are_kept_per_child_with_ttl(aws):
    ledger = ledger_of(aws, ttl_days=7)
    ledger.record_failure("b", "a", total=2, reason="dead-lettered (message m-1)")
    mark = aws.dynamodb.get_item(
        TableName=aws.ledger_table, Key={"pk": {"S": "BATCH#b"}, "sk": {"S": "CHILD#a"}}
    )["Item"]
    assert mark["outcome"]["S"] == "FAILED" and mark["reason"]["S"] == "dead-lettered (message m-1)"
    assert int(mark["expiresAt"]["N"]) == NOW + 7 * 86400


class ConflictingClient:
    """A DynamoDB client whose transactions conflict ``conflicts`` times, then pass to moto."""

    def __init__(self, real, conflicts: int) -> None:
        self.real, self.conflicts, self.calls = real, conflicts, 0

    def transact_write_items(self, **kwargs):
        self.calls += 1
        if self.conflicts:
            self.conflicts -= 1
            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                    "CancellationReasons": [{"Code": "None"}, {"Code": "TransactionConflict"}],
                },
                "TransactWriteItems",
            )
        return self.real.transact_write_items(**kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_transaction_conflicts_are_retried(aws):
    client = ConflictingClient(aws.dynamodb, conflicts=2)
    ledger = Ledger(client, aws.ledger_table, clock=lambda: NOW, sleep=lambda s: None)
    assert ledger.record_success("b", "a", total=2).outcome is Outcome.COUNTED
    assert client.calls == 3
    assert counts(ledger, "b") == ("RUNNING", 1, 0, 1, 2)


def test_persistent_conflicts_raise_a_retryable_contention_error(aws):
    client = ConflictingClient(aws.dynamodb, conflicts=100)
    ledger = Ledger(client, aws.ledger_table, sleep=lambda s: None, max_conflict_attempts=3)
    with pytest.raises(LedgerContention, match="3 times"):
        ledger.record_success("b", "a", total=2)
    assert ledger.read_batch("b") is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"total": 0}, "total must be a whole number >= 1"),
        ({"total": True}, "total must be a whole number >= 1"),
        ({"index": -1}, "index must be a whole number"),
    ],
)
def test_bad_child_fields_are_named(aws, kwargs, message):
    with pytest.raises(InvalidChildMessage, match=message):
        ledger_of(aws).record_success("b", "a", **kwargs)


def test_child_ids_may_not_look_like_the_sweeper(aws):
    with pytest.raises(InvalidChildMessage, match="may not start with '#'"):
        ledger_of(aws).record_success("b", SWEEPER, total=1)


def test_count_only_then_decide_once(aws):
    """decide=False counts with one request; decide() gives the verdict once (the Map workflow)."""
    ledger = ledger_of(aws)
    ledger.register_batch("m", 3)
    assert [ledger.record_success("m", str(i), decide=False).outcome for i in (0, 1, 2, 2)] == [
        Outcome.COUNTED, Outcome.COUNTED, Outcome.COUNTED, Outcome.DUPLICATE]
    assert ledger.read_batch("m")["status"] == "RUNNING"  # nobody decided yet
    verdict = ledger.decide("m", by="arn:exec:1")
    assert verdict == {"verdict": "COMPLETED", "batchId": "m", "total": 3, "succeeded": 3, "failed": 0,
                       "unaccounted": 0, "decidedBy": "arn:exec:1", "won": True}
    assert ledger.decide("m", by="arn:exec:2") == {**verdict, "won": False}  # a retry: same verdict


def test_decide_fails_a_batch_with_failed_or_unaccounted_children(aws):
    ledger = ledger_of(aws)
    ledger.register_batch("m", 4)
    ledger.record_success("m", "0", decide=False)
    ledger.record_failure("m", "1", reason="dead-lettered", decide=False)
    verdict = ledger.decide("m", by="arn:exec:1")
    assert (verdict["verdict"], verdict["failed"], verdict["unaccounted"], verdict["won"]) == ("FAILED", 1, 2, True)
    assert ledger.read_batch("m")["failReason"] == "1 children failed, 2 not accounted for"
    with pytest.raises(BatchNotRegistered):
        ledger.decide("never", by="x")

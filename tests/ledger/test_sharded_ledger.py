"""The sharded counter (``counter_shards`` K > 1) and the contention handling, rule by rule
(in-process moto)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from fanout_kit.shared import final_status
from fanout_kit.patterns.completion_ledger.ledger import (
    BatchNotRegistered,
    Ledger,
    LedgerContention,
    LedgerError,
    Outcome,
    TotalMismatch,
    shard_of,
)

NOW = 1_700_000_000


def sharded(aws, shards=4, **kwargs) -> Ledger:
    return Ledger(aws.dynamodb, aws.ledger_table, clock=lambda: NOW, counter_shards=shards, **kwargs)


def items(aws):
    return {(i["pk"]["S"], i["sk"]["S"]): i for i in aws.dynamodb.scan(TableName=aws.ledger_table)["Items"]}


def test_children_spread_over_shard_keys_and_one_caller_completes(aws):
    ledger = sharded(aws, deadline_seconds=600)
    outcomes = [ledger.record_success("b", str(i), total=8, index=i).outcome for i in range(8)]
    assert outcomes == [Outcome.COUNTED] * 7 + [Outcome.COMPLETED]
    stored = items(aws)
    # child i and its counter live under BATCH#b#S<i % 4>; the batch item only holds the verdict
    for i in range(8):
        assert (f"BATCH#b#S{i % 4}", f"CHILD#{i}") in stored
    assert {stored[(f"BATCH#b#S{k}", "#SHARD")]["done"]["N"] for k in range(4)} == {"2"}
    meta = ledger.read_batch("b")
    assert (meta["status"], meta["succeeded"], meta["failed"], meta["done"], meta["total"], meta["shards"]) == (
        "COMPLETED", 8, 0, 8, 8, 4)
    assert meta["finisherChild"] == "7" and meta["deadline"] == NOW + 600  # created by a decision check
    # every redelivery is a no-op; the winner's gets its follow-up again until acknowledged
    again = [ledger.record_success("b", str(i), total=8, index=i) for i in range(8)]
    assert [r.outcome for r in again[:7]] == [Outcome.DUPLICATE] * 7
    assert again[7].outcome is Outcome.COMPLETED and again[7].resumed
    assert ledger.acknowledge_finish("b", "7", "me")
    assert ledger.record_success("b", "7", total=8, index=7).outcome is Outcome.DUPLICATE


def test_running_counts_are_the_sums_of_the_shards(aws):
    ledger = sharded(aws)
    ledger.record_success("b", "x", total=5)  # no index: a stable hash picks the shard
    ledger.record_success("b", "y", total=5)
    assert shard_of("x", None, 4) == shard_of("x", None, 4)
    batch = ledger.read_batch("b")
    assert (batch["status"], batch["succeeded"], batch["done"], batch["total"]) == ("RUNNING", 2, 2, 5)


def test_registered_batch_takes_children_without_total(aws):
    ledger = sharded(aws, shards=3)
    assert ledger.register_batch("r", 3).outcome is Outcome.REGISTERED
    assert [ledger.record_success("r", str(i), index=i).outcome for i in range(3)] == [
        Outcome.COUNTED, Outcome.COUNTED, Outcome.COMPLETED]
    with pytest.raises(BatchNotRegistered):
        ledger.record_success("never", "0")


def test_a_failure_over_the_threshold_fails_the_batch_once_with_its_counts(aws):
    ledger = sharded(aws, failure_threshold=1)
    assert ledger.record_failure("f", "0", total=6, index=0, reason="boom").outcome is Outcome.COUNTED  # tolerated
    assert ledger.record_success("f", "1", total=6, index=1).outcome is Outcome.COUNTED
    lost = ledger.record_failure("f", "2", total=6, index=2, reason="boom")
    assert lost.outcome is Outcome.FAILED_BATCH and lost.must_alarm and (lost.failed, lost.total) == (2, 6)
    assert ledger.record_failure("f", "3", total=6, index=3).outcome is Outcome.COUNTED  # late: verdict stands
    batch = ledger.read_batch("f")
    assert (batch["status"], batch["failed"], batch["succeeded"], batch["failReason"]) == (
        "FAILED", 2, 1, "more than 1 children failed")


def test_mismatched_totals_extra_children_and_another_k_are_refused(aws):
    ledger = sharded(aws, shards=2)
    ledger.record_success("m", "0", total=2, index=0)
    with pytest.raises(TotalMismatch):
        ledger.record_success("m", "2", total=3, index=2)
    ledger.record_success("m", "1", total=2, index=1)  # COMPLETED
    assert ledger.record_success("m", "2", total=2).outcome in (Outcome.BATCH_CLOSED, Outcome.COUNTED)
    other = sharded(aws, shards=2)
    other.register_batch("t", 1)
    other.record_success("t", "a", total=1, index=0)
    # shard 0 of a total=1 batch is full (its counter refuses the child) and the batch is decided
    closed = sharded(aws, shards=2).record_success("t", "b", total=1, index=0)
    assert closed.outcome is Outcome.BATCH_CLOSED and closed.status == "COMPLETED"
    assert ("BATCH#t#S0", "CHILD#b") not in items(aws)  # the transaction was cancelled as a whole
    with pytest.raises(LedgerError, match="opened with 2 counter shards but this consumer uses 3"):
        sharded(aws, shards=3).record_success("m", "x", total=2)


class RefusingClient:
    """DynamoDB refuses ``times`` requests of one operation with the given error, then passes."""

    def __init__(self, real, operation: str, error: dict, times: int) -> None:
        self.real, self.operation, self.error, self.times, self.calls = real, operation, error, times, 0

    def __getattr__(self, name):
        method = getattr(self.real, name)
        if name != self.operation:
            return method

        def refused(**kwargs):
            self.calls += 1
            if self.times:
                self.times -= 1
                raise ClientError(self.error, name)
            return method(**kwargs)

        return refused


THROTTLED = {"Error": {"Code": "TransactionCanceledException", "Message": "throttled"},
             "CancellationReasons": [{"Code": "ThrottlingError"}, {"Code": "ThrottlingError"}]}
CONFLICT = {"Error": {"Code": "TransactionConflictException", "Message": "Transaction is ongoing for the item"}}


@pytest.mark.parametrize("shards", [1, 4])
def test_throttled_transactions_are_retried_like_conflicts(aws, shards):
    client = RefusingClient(aws.dynamodb, "transact_write_items", THROTTLED, times=2)
    ledger = Ledger(client, aws.ledger_table, sleep=lambda s: None, counter_shards=shards)
    assert ledger.record_success("b", "a", total=1).outcome is Outcome.COMPLETED
    assert client.calls == 3


def test_a_transition_that_keeps_conflicting_raises_ledger_contention(aws):
    ledger = Ledger(aws.dynamodb, aws.ledger_table, sleep=lambda s: None)
    ledger.record_success("b", "a", total=2)
    stuck = Ledger(RefusingClient(aws.dynamodb, "update_item", CONFLICT, times=100), aws.ledger_table,
                   sleep=lambda s: None, max_conflict_attempts=3)
    with pytest.raises(LedgerContention, match="TransactionConflictException 3 times"):
        stuck.record_success("b", "b", total=2)  # counted; the transition cannot be written
    healed = ledger.record_success("b", "b", total=2)  # the redelivery decides
    assert healed.outcome is Outcome.COMPLETED and not healed.resumed


def test_counted_failure_record_is_idempotent_per_finisher(aws):
    args = dict(batch_id="x", failed_items=1, total_items=3, now="2024-01-01T00:00:00Z")
    assert final_status.record_counted_failure(aws.dynamodb, aws.status_table, execution_arn="ledger:a", **args) == "RECORDED"
    assert final_status.record_counted_failure(aws.dynamodb, aws.status_table, execution_arn="ledger:a", **args) == "ALREADY_RECORDED"
    record = final_status.read_status(aws.dynamodb, aws.status_table, "x")
    assert (record["status"], record["failedItems"], record["totalItems"], record["failedRuns"]) == ("FAILED", 1, 3, 1)
    final_status.record_success(aws.dynamodb, aws.status_table, batch_id="y", execution_arn="e", ran_tasks=[], now="t")
    with pytest.raises(final_status.FinalStatusConflict):
        final_status.record_counted_failure(aws.dynamodb, aws.status_table, execution_arn="ledger:b",
                                            **{**args, "batch_id": "y"})

"""Concurrency: many threads record the children of one batch against a DynamoDB emulator over HTTP,
with the DynamoDB contention model on (transactions hold their items in flight and cancel each other
with TransactionConflict, plain writes to held items get TransactionConflictException).

Every child is delivered twice, the last children finish at the same instant (a Barrier), and the
round is repeated: the batch is decided exactly once, finalized exactly once, and the counts are
exact, with one counter item (K=1) and with the sharded counter (K=4). A delivery whose contention
outlasts the ledger's own retries (LedgerContention) is delivered again, as the queue would. A
control test shows the read-add-write counter losing increments under the same conditions.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from fanout_kit.shared import final_status
from fanout_kit.patterns.completion_ledger.ledger import Ledger, LedgerContention, Outcome, shard_key

from tests.ledger.ledger_tables import create_ledger_table, create_status_table

ROUNDS = 6  # per counter layout; each round races 32 deliveries under the contention model
SHARDS = (1, 4)
CHILDREN = 16
LAST_TOGETHER = 8  # the last 8 children (16 deliveries) are released at the same time
WORKERS = 2 * LAST_TOGETHER


@pytest.fixture(scope="module")
def pool():
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="child") as executor:
        yield executor


def _deliver(ledger: Ledger, status_table: str, batch_id: str, index: int, *, with_total: bool, fail: bool,
             barrier: threading.Barrier | None, redeliveries: list):
    if barrier is not None:
        barrier.wait(timeout=30)
    child = f"c{index:02d}"
    total = CHILDREN if with_total else None
    while True:
        try:
            if fail:
                result = ledger.record_failure(batch_id, child, total=total, index=index, reason="boom")
            else:
                result = ledger.record_success(batch_id, child, total=total, index=index)
            break
        except LedgerContention:  # the consumer reports a batch item failure; the queue redelivers
            redeliveries.append(child)
    finalized = None
    if result.must_finalize:  # the winner's follow-up, as ledger_runtime.finish does it
        finalized = final_status.record_success(
            ledger.client, status_table, batch_id=batch_id, execution_arn=f"ledger:race:{child}",
            ran_tasks=[], now="2024-01-01T00:00:00Z",
        ).outcome
        ledger.acknowledge_finish(batch_id, child, f"ledger:race:{child}")
    return result, finalized


def _round(http_dynamodb, pool, round_no: int, *, register: bool, failing: int | None, shards: int = 1):
    table = create_ledger_table(http_dynamodb, f"race-{round_no}-{uuid.uuid4().hex[:6]}")
    status_table = create_status_table(http_dynamodb, f"status-{round_no}-{uuid.uuid4().hex[:6]}")
    # few attempts, so that contention outlasting the ledger's retries happens too
    ledger = Ledger(http_dynamodb, table, failure_threshold=0, counter_shards=shards, max_conflict_attempts=4)
    redeliveries: list = []
    batch_id = f"batch-{round_no}"
    if register:
        assert ledger.register_batch(batch_id, CHILDREN).outcome is Outcome.REGISTERED
    early = range(CHILDREN - LAST_TOGETHER)
    last = range(CHILDREN - LAST_TOGETHER, CHILDREN)

    def submit(index, barrier=None):
        return pool.submit(_deliver, ledger, status_table, batch_id, index, with_total=not register,
                           fail=index == failing, barrier=barrier, redeliveries=redeliveries)

    results = [f.result() for f in [submit(i) for i in early for _ in range(2)]]
    barrier = threading.Barrier(2 * LAST_TOGETHER)
    results += [f.result() for f in [submit(i, barrier) for i in last for _ in range(2)]]
    return ledger, batch_id, status_table, results


@pytest.mark.parametrize("shards", SHARDS)
@pytest.mark.parametrize("round_no", range(ROUNDS))
def test_last_children_together_every_child_twice_finalizes_once(http_dynamodb, pool, contention, round_no, shards):
    # Alternate the two ways a batch starts: registered up front / total in the first message.
    # A round in which the scheduler let no two writes overlap (a loaded machine can serialize the
    # threads) proves nothing about contention: it is raced again, on a new table, up to 3 times.
    for attempt in range(3):
        ledger, batch_id, status_table, results = _round(http_dynamodb, pool, 10 * round_no + attempt,
                                                          register=round_no % 2 == 0, failing=None, shards=shards)
        if contention.stats["transaction_conflicts"] > 0:
            break
    assert contention.stats["transaction_conflicts"] > 0  # the model made writers collide
    outcomes = Counter(r.outcome for r, _ in results if not r.resumed)
    winners = [r for r, _ in results if r.outcome is Outcome.COMPLETED and not r.resumed]
    assert len(winners) == 1, outcomes
    # Every child was counted by one of its two deliveries; the other saw a DUPLICATE (or, when both
    # race, the duplicate may win the transition and the counting delivery reports COUNTED or the
    # resumed win). The batch item below proves nothing was counted twice.
    counted = {r.child_id for r, _ in results if r.outcome in (Outcome.COUNTED, Outcome.COMPLETED)}
    assert counted == {f"c{i:02d}" for i in range(CHILDREN)}, outcomes
    assert set(outcomes) <= {Outcome.COUNTED, Outcome.COMPLETED, Outcome.DUPLICATE}, outcomes
    # Every COMPLETED handed out (the win, and a redelivery of the winner before it acknowledged)
    # names the same child; UpdateFinalStatus wrote SUCCEEDED exactly once.
    assert {r.child_id for r, _ in results if r.outcome is Outcome.COMPLETED} == {winners[0].child_id}
    assert [f for _, f in results if f is not None].count("FINALIZED") == 1
    batch = ledger.read_batch(batch_id)
    assert (batch["status"], batch["succeeded"], batch["failed"], batch["done"], batch["total"]) == (
        "COMPLETED", CHILDREN, 0, CHILDREN, CHILDREN)
    assert batch["finisherChild"] == winners[0].child_id and "finalizedAt" in batch
    status = final_status.read_status(http_dynamodb, status_table, batch_id)
    assert status["status"] == "SUCCEEDED" and status["finalizedBy"] == f"ledger:race:{winners[0].child_id}"


@pytest.mark.parametrize("shards", SHARDS)
@pytest.mark.parametrize("round_no", range(2))
def test_a_failure_among_the_last_children_fails_the_batch_once(http_dynamodb, pool, contention, round_no, shards):
    failing = CHILDREN - 1 - round_no  # one of the children released together fails
    ledger, batch_id, _, results = _round(http_dynamodb, pool, 100 + round_no, register=round_no % 2 == 0,
                                          failing=failing, shards=shards)
    won = [r for r, _ in results if r.outcome is Outcome.FAILED_BATCH and not r.resumed]
    # Exactly one caller wins RUNNING -> FAILED: usually the failing child, but any child whose
    # decision check sees the failure already counted may make the (due) transition first.
    assert len(won) == 1, won
    assert not [r for r, _ in results if r.outcome is Outcome.COMPLETED]
    batch = ledger.read_batch(batch_id)
    assert batch["status"] == "FAILED" and batch["failed"] == 1
    # Children whose record was counted (by either of its two deliveries: when both race, the
    # duplicate may win the FAILED transition and the counting delivery gets it as resumed).
    counted = {r.child_id for r, _ in results if r.outcome in (Outcome.COUNTED, Outcome.FAILED_BATCH)}
    if shards == 1:
        assert batch["done"] == batch["succeeded"] + 1 == len(counted)  # nothing counted twice, none lost
    else:
        # sharded: the verdict keeps the counts it was decided on; children arriving later are still
        # marked on their shards (reported COUNTED). The shards hold every counted child once.
        shard_items = [ledger.client.get_item(TableName=ledger.table_name, Key=shard_key(batch_id, k),
                                              ConsistentRead=True)["Item"] for k in range(shards)]
        assert sum(int(i["done"]["N"]) for i in shard_items) == len(counted) == CHILDREN
        assert sum(int(i["failed"]["N"]) for i in shard_items) == 1


def test_control_read_add_write_counter_loses_increments(http_dynamodb, pool):
    """What the ledger replaces: 10 consumers read the counter, add one, write it back."""
    table = create_status_table(http_dynamodb, f"naive-{uuid.uuid4().hex[:6]}")
    key = {"batchId": {"S": "naive"}}
    http_dynamodb.put_item(TableName=table, Item={**key, "done": {"N": "0"}})
    barrier = threading.Barrier(10)

    def consumer():
        done = int(http_dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["done"]["N"])
        barrier.wait(timeout=30)  # every consumer has read before any writes
        http_dynamodb.put_item(TableName=table, Item={**key, "done": {"N": str(done + 1)}})
        return done + 1 == 10  # "I saw the last child finish"

    saw_last = [f.result() for f in [pool.submit(consumer) for _ in range(10)]]
    final = int(http_dynamodb.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]["done"]["N"])
    assert final == 1 and not any(saw_last)  # 9 increments lost; "last child done" never detected

"""The work record (fanout_kit.patterns.completion_ledger.work_record): a child whose work succeeded is counted succeeded
exactly once, whatever happens to its message, and its work is not run again.

The counter is made to lose every race with the DynamoDB contention model
(fanout_kit/local/dynamodb_contention.py: ``hold`` plays another transaction in flight on the batch
item, so each TransactWriteItems is cancelled with TransactionConflict, as DynamoDB documents),
until the message has been received maxReceiveCount times and is dead-lettered.
"""

from __future__ import annotations

from collections import Counter

import pytest

from fanout_kit.patterns.completion_ledger.handlers import ledger_dlq_recorder
from fanout_kit.patterns.completion_ledger.handlers import ledger_kinesis_consumer
from fanout_kit.patterns.completion_ledger.handlers import ledger_sqs_consumer
from fanout_kit.local.dynamodb_contention import dynamodb_contention
from fanout_kit.local.moto_fixes import serialized_dynamodb_writes
from fanout_kit.shared import final_status
from fanout_kit.patterns.completion_ledger import runtime as ledger_runtime
from fanout_kit.patterns.completion_ledger import ledger as ledger_module
from fanout_kit.patterns.completion_ledger.ledger import Ledger, shard_pk
from fanout_kit.patterns.completion_ledger.work_record import WORK_FAILED, WORK_SUCCEEDED, WorkRecords
from tests.ledger.test_consumers import child, kinesis_record, sqs_record

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

MAX_RECEIVE_COUNT = 3  # what the model used (dev now has 5; fewer receives is the harder case)


@pytest.fixture
def runs(monkeypatch):
    """How often each child's work ran (the real example work, counted)."""
    counted: Counter[str] = Counter()
    real = ledger_runtime.do_child_work

    def counting(message, attempt):
        counted[message.child_id] += 1
        return real(message, attempt)

    monkeypatch.setattr(ledger_runtime, "do_child_work", counting)
    return counted


@pytest.fixture
def few_attempts(monkeypatch):
    """The ledger gives up after 3 cancelled transactions, without sleeping (fast tests)."""
    build = ledger_runtime.ledger_from_env

    def fewer(client=None):
        ledger = build(client)
        ledger.max_conflict_attempts = 3
        return ledger

    monkeypatch.setattr(ledger_runtime, "ledger_from_env", fewer)
    monkeypatch.setattr(ledger_module.Ledger, "_backoff", lambda self, attempt: None)


def counter_key(batch_id: str, shards: str) -> tuple[str, str]:
    return ("BATCH#" + batch_id, "#META") if shards == "1" else (shard_pk(batch_id, 0), "#SHARD")


def read_batch(env, batch_id: str, shards: str):
    return Ledger(env.dynamodb, env.ledger_table, counter_shards=int(shards)).read_batch(batch_id)


@pytest.mark.parametrize("shards", ["1", "4"])
def test_work_succeeded_but_message_dead_lettered_counts_the_child_succeeded_once(
    handler_env, monkeypatch, runs, few_attempts, shards
):
    monkeypatch.setenv("LEDGER_COUNTER_SHARDS", shards)
    body = child("lost-race", 0, total=1)
    with serialized_dynamodb_writes(), dynamodb_contention(window_seconds=0) as model:
        with model.hold(handler_env.ledger_table, *counter_key("lost-race", shards)):
            for receive in range(1, MAX_RECEIVE_COUNT + 1):  # every receive loses the race
                record = sqs_record(body, message_id="m-0", receive_count=receive)
                assert ledger_sqs_consumer.handler({"Records": [record]}, handler_env.context) == {
                    "batchItemFailures": [{"itemIdentifier": "m-0"}]
                }
        assert model.stats["transaction_conflicts"] == 3 * MAX_RECEIVE_COUNT
    assert runs == {"0": 1}  # the redeliveries did not run the work again
    assert read_batch(handler_env, "lost-race", shards) is None  # nothing counted yet
    # SQS moves the message to the DLQ; its recorder finds the work SUCCEEDED and counts that
    dead = sqs_record(body, message_id="m-0")
    assert ledger_dlq_recorder.handler({"Records": [dead]}, handler_env.context) == {"batchItemFailures": []}
    assert ledger_dlq_recorder.handler({"Records": [dead]}, handler_env.context) == {"batchItemFailures": []}
    batch = read_batch(handler_env, "lost-race", shards)
    assert (batch["status"], batch["succeeded"], batch["failed"]) == ("COMPLETED", 1, 0)
    assert [i["executionArn"] for i in handler_env.lambda_client.invocations] == ["ledger:sqs-dlq:0"]
    status = final_status.read_status(handler_env.dynamodb, handler_env.status_table, "lost-race")
    assert status["status"] == "SUCCEEDED"
    assert runs == {"0": 1}


def test_a_redelivered_child_whose_work_succeeded_only_records_it(handler_env, runs, few_attempts):
    bodies = [child("redo", i, total=2) for i in range(2)]
    with serialized_dynamodb_writes(), dynamodb_contention(window_seconds=0) as model:
        with model.hold(handler_env.ledger_table, "BATCH#redo", "#META"):
            first = sqs_record(bodies[0], message_id="m-0")
            assert ledger_sqs_consumer.handler({"Records": [first]}, handler_env.context) == {
                "batchItemFailures": [{"itemIdentifier": "m-0"}]
            }
    work = WorkRecords(handler_env.dynamodb, handler_env.ledger_table).read("redo", "0")
    assert (work["workOutcome"], work["attempts"], "leaseUntil" in work) == (WORK_SUCCEEDED, 1, False)
    again = [sqs_record(bodies[0], receive_count=2), sqs_record(bodies[1]), sqs_record(bodies[1], receive_count=2)]
    assert ledger_sqs_consumer.handler({"Records": again}, handler_env.context) == {"batchItemFailures": []}
    assert runs == {"0": 1, "1": 1}  # neither the redelivery nor the duplicate ran the work again
    batch = read_batch(handler_env, "redo", "1")
    assert (batch["status"], batch["succeeded"], batch["failed"]) == ("COMPLETED", 2, 0)
    assert len(handler_env.lambda_client.invocations) == 1


def test_a_duplicate_delivered_while_another_runs_the_work_is_retried_not_run(handler_env, runs):
    work = WorkRecords(handler_env.dynamodb, handler_env.ledger_table)
    assert work.claim("busy", "0", "other-invocation", lease_seconds=60).value == "RUN"
    duplicate = sqs_record(child("busy", 0, total=1), message_id="dup")
    assert ledger_sqs_consumer.handler({"Records": [duplicate]}, handler_env.context) == {
        "batchItemFailures": [{"itemIdentifier": "dup"}]
    }
    # the DLQ recorder waits for the holder too: the child is neither failed nor succeeded yet
    assert ledger_dlq_recorder.handler({"Records": [duplicate]}, handler_env.context) == {
        "batchItemFailures": [{"itemIdentifier": "dup"}]
    }
    assert runs == {} and read_batch(handler_env, "busy", "1") is None
    assert work.succeeded("busy", "0", "other-invocation")  # the holder ends; its recording was lost
    assert ledger_dlq_recorder.handler({"Records": [duplicate]}, handler_env.context) == {"batchItemFailures": []}
    assert read_batch(handler_env, "busy", "1")["status"] == "COMPLETED" and runs == {}


def test_an_expired_claim_is_taken_over(handler_env, runs):
    clock = [1_000.0]
    work = WorkRecords(handler_env.dynamodb, handler_env.ledger_table, clock=lambda: clock[0])
    assert work.claim("crash", "0", "crashed-invocation", lease_seconds=30).value == "RUN"
    clock[0] += 31  # the holder's invocation ended (timeout) without storing an outcome
    assert work.claim("crash", "0", "next", lease_seconds=30).value == "RUN"
    assert work.read("crash", "0")["attempts"] == 2


def test_a_failed_child_is_dead_lettered_failed_for_good(handler_env, runs):
    body = child("bad", 0, total=2, fail={"mode": "permanent"})
    for receive in range(1, MAX_RECEIVE_COUNT + 1):
        assert ledger_sqs_consumer.handler({"Records": [sqs_record(body, message_id="b", receive_count=receive)]},
                                           handler_env.context) == {"batchItemFailures": [{"itemIdentifier": "b"}]}
    assert runs == {"0": MAX_RECEIVE_COUNT}  # a failed work is retried on each receive
    assert WorkRecords(handler_env.dynamodb, handler_env.ledger_table).read("bad", "0")["workOutcome"] == WORK_FAILED
    assert ledger_dlq_recorder.handler({"Records": [sqs_record(body)]}, handler_env.context) == {"batchItemFailures": []}
    assert read_batch(handler_env, "bad", "1")["status"] == "FAILED"
    # a late duplicate of the message in the source queue: the child is settled, its work not run
    late = sqs_record(child("bad", 0, total=2), receive_count=1)
    assert ledger_sqs_consumer.handler({"Records": [late]}, handler_env.context) == {"batchItemFailures": []}
    assert runs == {"0": MAX_RECEIVE_COUNT}
    batch = read_batch(handler_env, "bad", "1")
    assert (batch["status"], batch["succeeded"], batch["failed"]) == ("FAILED", 0, 1)


def test_kinesis_redelivery_after_a_lost_race_does_not_run_the_work_again(handler_env, runs, few_attempts):
    body = child("kin", 0, total=1)
    with serialized_dynamodb_writes(), dynamodb_contention(window_seconds=0) as model:
        with model.hold(handler_env.ledger_table, "BATCH#kin", "#META"):
            assert ledger_kinesis_consumer.handler({"Records": [kinesis_record(body, "100")]}, handler_env.context) == {
                "batchItemFailures": [{"itemIdentifier": "100"}]
            }
    assert ledger_kinesis_consumer.handler({"Records": [kinesis_record(body, "100")]}, handler_env.context) == {
        "batchItemFailures": []
    }
    assert runs == {"0": 1} and read_batch(handler_env, "kin", "1")["status"] == "COMPLETED"

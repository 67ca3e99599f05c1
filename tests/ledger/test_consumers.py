"""The ledger's Lambda handlers with in-process moto: partial batch responses, DLQ/on-failure
recorders counting failures once, the winner finalizing through UpdateFinalStatus, the sweeper."""

from __future__ import annotations

import base64
import io
import json
import uuid

import boto3
import pytest

from fanout_kit.patterns.completion_ledger.handlers import ledger_dlq_recorder
from fanout_kit.patterns.completion_ledger.handlers import ledger_kinesis_consumer
from fanout_kit.patterns.completion_ledger.handlers import ledger_kinesis_failure_recorder
from fanout_kit.patterns.completion_ledger.handlers import ledger_sqs_consumer
from fanout_kit.patterns.completion_ledger.handlers import ledger_sweeper
from fanout_kit.shared import final_status
from fanout_kit.patterns.completion_ledger.ledger import Ledger
from fanout_kit.local.ledger_producer import demo_messages, send_to_kinesis, send_to_sqs

# Invocations that decide nothing emit no metric; Powertools warns about each (pytest resets the
# filter ledger_runtime installs for Lambda).
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")

QUEUE_ARN = "arn:aws:sqs:eu-west-1:123456789012:child-queue"


def sqs_record(body, *, receive_count=1, message_id=None) -> dict:
    text = body if isinstance(body, str) else json.dumps(body)
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": "rh",
        "body": text,
        "attributes": {"ApproximateReceiveCount": str(receive_count), "SentTimestamp": "1700000000000"},
        "messageAttributes": {},
        "md5OfBody": "x",
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "eu-west-1",
    }


def kinesis_record(body, sequence: str, shard: str = "shardId-000000000000") -> dict:
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": "pk",
            "sequenceNumber": sequence,
            "data": base64.b64encode(json.dumps(body).encode()).decode(),
            "approximateArrivalTimestamp": 1700000000.0,
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard}:{sequence}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": "arn:aws:iam::123456789012:role/r",
        "awsRegion": "eu-west-1",
        "eventSourceARN": "arn:aws:kinesis:eu-west-1:123456789012:stream/children",
    }


def child(batch_id, index, total=3, fail=None):
    payload = {"simulateFailure": fail} if fail else {}
    return {"batchId": batch_id, "index": index, "total": total, "payload": payload}


def ledger_batch(env, batch_id):
    return Ledger(env.dynamodb, env.ledger_table).read_batch(batch_id)


@pytest.fixture
def log_lines(monkeypatch):
    """The JSON lines the handlers' Powertools Logger writes during the test."""
    from fanout_kit.shared.observability import logger

    buffer = io.StringIO()
    handler = logger.registered_handler
    previous = handler.setStream(buffer)
    yield lambda: [json.loads(line) for line in buffer.getvalue().splitlines() if line.strip()]
    handler.setStream(previous)


def test_sqs_partial_batch_failure_response_names_only_the_failed_message(handler_env):
    records = [sqs_record(child("s1", 0)), sqs_record(child("s1", 1, fail={"mode": "permanent"})), sqs_record(child("s1", 2))]
    response = ledger_sqs_consumer.handler({"Records": records}, handler_env.context)
    assert response == {"batchItemFailures": [{"itemIdentifier": records[1]["messageId"]}]}
    batch = ledger_batch(handler_env, "s1")
    assert (batch["status"], batch["succeeded"], batch["failed"]) == ("RUNNING", 2, 0)  # retries don't count
    assert handler_env.lambda_client.invocations == []


def test_sqs_all_children_and_a_duplicate_finalize_exactly_once(handler_env, capfd):
    bodies = [child("s2", i) for i in range(3)]
    first = ledger_sqs_consumer.handler({"Records": [sqs_record(b) for b in bodies[:2]]}, handler_env.context)
    second = ledger_sqs_consumer.handler(
        {"Records": [sqs_record(bodies[2]), sqs_record(bodies[0], receive_count=2)]}, handler_env.context
    )
    assert first == second == {"batchItemFailures": []}
    assert handler_env.lambda_client.invocations == [{  # resultsAt: where the children's marks are
        "batchId": "s2", "executionArn": "ledger:sqs:2", "results": {},
        "resultsAt": f"dynamodb://{handler_env.ledger_table}/BATCH#s2"}]
    status = final_status.read_status(handler_env.dynamodb, handler_env.status_table, "s2")
    assert status["status"] == "SUCCEEDED" and status["finalizedBy"] == "ledger:sqs:2"
    batch = ledger_batch(handler_env, "s2")
    assert (batch["status"], batch["succeeded"], batch["finishedBy"]) == ("COMPLETED", 3, "ledger:sqs:2")
    assert "LedgerBatchCompleted" in capfd.readouterr().out  # the EMF metric line


def test_sqs_transient_failure_is_retried_and_then_counted_as_success(handler_env):
    body = child("s3", 0, total=1, fail={"mode": "transient", "times": 1})
    failed = ledger_sqs_consumer.handler({"Records": [sqs_record(body, message_id="m1")]}, handler_env.context)
    assert failed == {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    ok = ledger_sqs_consumer.handler({"Records": [sqs_record(body, receive_count=2)]}, handler_env.context)
    assert ok == {"batchItemFailures": []}
    assert ledger_batch(handler_env, "s3")["status"] == "COMPLETED"


def test_finalize_failure_is_retried_by_the_same_winner(handler_env):
    handler_env.lambda_client.fail_next = 1
    body = child("s4", 0, total=1)
    failed = ledger_sqs_consumer.handler({"Records": [sqs_record(body, message_id="m1")]}, handler_env.context)
    assert failed == {"batchItemFailures": [{"itemIdentifier": "m1"}]}
    assert final_status.read_status(handler_env.dynamodb, handler_env.status_table, "s4") is None
    ok = ledger_sqs_consumer.handler({"Records": [sqs_record(body, receive_count=2)]}, handler_env.context)
    assert ok == {"batchItemFailures": []}
    assert final_status.read_status(handler_env.dynamodb, handler_env.status_table, "s4")["status"] == "SUCCEEDED"
    assert "finalizedAt" in ledger_batch(handler_env, "s4")
    assert len(handler_env.lambda_client.invocations) == 2


def test_every_log_line_of_a_child_names_batch_and_child(handler_env, log_lines):
    from fanout_kit.shared.observability import logger

    logger.setLevel("INFO")
    try:
        ledger_sqs_consumer.handler({"Records": [sqs_record(child("s5", 1, fail={"mode": "fatal"}))]}, handler_env.context)
        ledger_sqs_consumer.handler({"Records": [sqs_record(child("s5", 0, total=2))]}, handler_env.context)
    finally:
        logger.setLevel("WARNING")
    lines = log_lines()
    assert {line["message"] for line in lines} >= {"child work failed", "child recorded"}
    assert all(line.get("batch_id") == "s5" and line.get("child_id") in ("0", "1") for line in lines)


def test_dlq_recorder_counts_a_dead_lettered_child_once_and_alarms_once(handler_env, capfd, log_lines):
    ledger_sqs_consumer.handler({"Records": [sqs_record(child("d1", 0))]}, handler_env.context)
    dead = sqs_record(child("d1", 1, fail={"mode": "permanent"}), message_id="dead-1")
    assert ledger_dlq_recorder.handler({"Records": [dead]}, handler_env.context) == {"batchItemFailures": []}
    out = capfd.readouterr().out
    assert out.count('"LedgerBatchFailed":[1.0]') == 1
    assert [(e["message"], e["batch_id"], e["child_id"]) for e in log_lines() if e["level"] == "ERROR"] == [
        ("batch FAILED", "d1", "1")
    ]
    assert '"environment":"test","service":"CompletionLedger"' in out  # the alarm's dimensions
    # the DLQ message delivered again (e.g. the recorder's response was lost): not counted again
    assert ledger_dlq_recorder.handler({"Records": [dead]}, handler_env.context) == {"batchItemFailures": []}
    assert '"LedgerBatchFailed"' not in capfd.readouterr().out
    batch = ledger_batch(handler_env, "d1")
    assert (batch["status"], batch["succeeded"], batch["failed"], batch["done"]) == ("FAILED", 1, 1, 2)
    assert handler_env.lambda_client.invocations == []
    # the winner wrote the batch's FAILED status record (the Map workflow's shape), once
    record = final_status.read_status(handler_env.dynamodb, handler_env.status_table, "d1")
    assert (record["status"], record["failedItems"], record["totalItems"], record["executionArn"],
            record["failedRuns"]) == ("FAILED", 1, 3, "ledger:sqs-dlq:1", 1)


@pytest.mark.parametrize("shards", ["1", "4"])
def test_contention_beyond_the_ledger_retries_returns_the_message_and_it_counts_once(handler_env, monkeypatch, shards):
    """Under the contention model, an item held by another transaction for longer than the ledger
    retries: the message is reported as a batch item failure (back to the queue), and counted once
    when it is delivered again."""
    from fanout_kit.local.dynamodb_contention import dynamodb_contention
    from fanout_kit.local.moto_fixes import serialized_dynamodb_writes
    from fanout_kit.patterns.completion_ledger import ledger as ledger_module
    from fanout_kit.patterns.completion_ledger.ledger import shard_pk

    monkeypatch.setenv("LEDGER_COUNTER_SHARDS", shards)
    from fanout_kit.patterns.completion_ledger import runtime as ledger_runtime

    build = ledger_runtime.ledger_from_env

    def fewer_attempts(client=None):
        ledger = build(client)
        ledger.max_conflict_attempts = 3
        return ledger

    monkeypatch.setattr(ledger_runtime, "ledger_from_env", fewer_attempts)
    monkeypatch.setattr(ledger_module.Ledger, "_backoff", lambda self, attempt: None)
    record = sqs_record(child("hot", 0, total=2), message_id="m-0")
    pk = "BATCH#hot" if shards == "1" else shard_pk("hot", 0)
    sk = "#META" if shards == "1" else "#SHARD"
    with serialized_dynamodb_writes(), dynamodb_contention(window_seconds=0) as model:
        with model.hold(handler_env.ledger_table, pk, sk):  # another writer's transaction, in flight
            response = ledger_sqs_consumer.handler({"Records": [record]}, handler_env.context)
        assert response == {"batchItemFailures": [{"itemIdentifier": "m-0"}]}
        assert model.stats["transaction_conflicts"] == 3
        assert ledger_batch(handler_env, "hot") is None  # nothing counted
        again = sqs_record(child("hot", 0, total=2), message_id="m-0", receive_count=2)
        assert ledger_sqs_consumer.handler({"Records": [again]}, handler_env.context) == {"batchItemFailures": []}
        assert ledger_sqs_consumer.handler({"Records": [again]}, handler_env.context) == {"batchItemFailures": []}
    batch = ledger_batch(handler_env, "hot") if shards == "1" else Ledger(
        handler_env.dynamodb, handler_env.ledger_table, counter_shards=4).read_batch("hot")
    assert (batch["status"], batch["succeeded"], batch["done"]) == ("RUNNING", 1, 1)


def test_dlq_recorder_leaves_unattributable_messages_in_the_dlq(handler_env):
    junk = sqs_record("not json at all", message_id="junk")
    assert ledger_dlq_recorder.handler({"Records": [junk]}, handler_env.context) == {
        "batchItemFailures": [{"itemIdentifier": "junk"}]
    }


def test_kinesis_partial_response_and_a_batch_split_over_shards(handler_env):
    bodies = [child("k1", i, total=4) for i in range(4)]
    bad = dict(bodies[1], payload={"simulateFailure": {"mode": "permanent"}})
    shard0 = [kinesis_record(bodies[0], "100"), kinesis_record(bad, "101"), kinesis_record(bodies[2], "102")]
    assert ledger_kinesis_consumer.handler({"Records": shard0}, handler_env.context) == {
        "batchItemFailures": [{"itemIdentifier": "101"}]
    }
    shard1 = [kinesis_record(bodies[3], "200", shard="shardId-000000000001")]
    assert ledger_kinesis_consumer.handler({"Records": shard1}, handler_env.context) == {"batchItemFailures": []}
    # Lambda retries from 101 (the records after it again: duplicates are no-ops); now it succeeds
    retry = [kinesis_record(bodies[1], "101"), kinesis_record(bodies[2], "102")]
    assert ledger_kinesis_consumer.handler({"Records": retry}, handler_env.context) == {"batchItemFailures": []}
    batch = ledger_batch(handler_env, "k1")
    assert (batch["status"], batch["succeeded"], batch["failed"]) == ("COMPLETED", 4, 0)
    assert [i["executionArn"] for i in handler_env.lambda_client.invocations] == ["ledger:kinesis:1"]


def test_kinesis_failure_recorder_reads_the_failed_range_and_counts_it_once(handler_env):
    kinesis = boto3.client("kinesis", region_name="eu-west-1")
    kinesis.create_stream(StreamName="children", ShardCount=1)
    arn = kinesis.describe_stream_summary(StreamName="children")["StreamDescriptionSummary"]["StreamARN"]
    ledger_kinesis_failure_recorder.kinesis_client.cache_clear()
    messages = demo_messages("k2", 4, fail=[2])
    assert send_to_kinesis(kinesis, arn, messages) == 4
    shard = kinesis.list_shards(StreamARN=arn)["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(StreamARN=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    stored = kinesis.get_records(ShardIterator=iterator, StreamARN=arn)["Records"]
    events = [kinesis_record(json.loads(r["Data"]), r["SequenceNumber"], shard) for r in stored]
    # children 0 and 1 succeed; the consumer fails on 2; Lambda exhausts retries for the range 2..3
    assert ledger_kinesis_consumer.handler({"Records": events[:3]}, handler_env.context) == {
        "batchItemFailures": [{"itemIdentifier": stored[2]["SequenceNumber"]}]
    }
    # the range reported to the on-failure queue covers 1..3: child 1 had succeeded already
    on_failure = {
        "requestContext": {"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 4},
        "KinesisBatchInfo": {
            "shardId": shard,
            "startSequenceNumber": stored[1]["SequenceNumber"],
            "endSequenceNumber": stored[3]["SequenceNumber"],
            "streamArn": arn,
            "batchSize": 3,
        },
    }
    record = sqs_record(on_failure, message_id="range-1")
    assert ledger_kinesis_failure_recorder.handler({"Records": [record]}, handler_env.context) == {"batchItemFailures": []}
    batch = ledger_batch(handler_env, "k2")
    assert (batch["status"], batch["succeeded"], batch["failed"], batch["done"]) == ("FAILED", 2, 1, 3)  # child 3: batch already FAILED, not counted
    assert ledger_kinesis_failure_recorder.handler({"Records": [record]}, handler_env.context) == {"batchItemFailures": []}
    assert ledger_batch(handler_env, "k2")["failed"] == 1  # redelivered range: counted once


def test_kinesis_failure_recorder_keeps_messages_it_cannot_use(handler_env):
    record = sqs_record({"requestContext": {}}, message_id="odd")
    assert ledger_kinesis_failure_recorder.handler({"Records": [record]}, handler_env.context) == {
        "batchItemFailures": [{"itemIdentifier": "odd"}]
    }


def test_sweeper_fails_overdue_batches_and_alarms(handler_env, capfd):
    ledger = Ledger(handler_env.dynamodb, handler_env.ledger_table)
    ledger.register_batch("late", 3, deadline=1)
    ledger.register_batch("in-time", 3, deadline=4_000_000_000)
    assert ledger_sweeper.handler({}, handler_env.context) == {"checked": 1, "failed": ["late"]}
    assert '"LedgerBatchFailed"' in capfd.readouterr().out
    assert ledger_sweeper.handler({}, handler_env.context) == {"checked": 0, "failed": []}
    assert ledger.read_batch("late")["status"] == "FAILED" and ledger.read_batch("in-time")["status"] == "RUNNING"


def test_producer_sends_a_demo_batch_to_sqs(handler_env):
    sqs = boto3.client("sqs", region_name="eu-west-1")
    url = sqs.create_queue(QueueName="children")["QueueUrl"]
    assert send_to_sqs(sqs, url, demo_messages("p1", 12, include_total=False)) == 12
    received = []
    while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        received += batch
        sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": m["MessageId"], "ReceiptHandle": m["ReceiptHandle"]} for m in batch])
    Ledger(handler_env.dynamodb, handler_env.ledger_table).register_batch("p1", 12)
    records = [sqs_record(json.loads(m["Body"]), message_id=m["MessageId"]) for m in received]
    assert ledger_sqs_consumer.handler({"Records": records[:10]}, handler_env.context) == {"batchItemFailures": []}
    assert ledger_sqs_consumer.handler({"Records": records[10:]}, handler_env.context) == {"batchItemFailures": []}
    assert ledger_batch(handler_env, "p1")["status"] == "COMPLETED"
    assert len(handler_env.lambda_client.invocations) == 1

"""The completion ledger's Kinesis path end to end on moto (``fanout ledger --source kinesis``): the
synthesized dev ledger stack, moto Kinesis, the real consumer / on-failure recorder /
UpdateFinalStatus handlers in-process, a local poller standing in for the Kinesis event source
mapping (batch size, partial batch responses, bisect on error, retry quota, on-failure
destination), the DynamoDB contention model on.

Assertions read the emulated tables and queues (through ``on_engine``) and the stand-in's facts;
the last tests drive the stand-in itself with a function that raises, for bisection.
"""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import boto3
import pytest
from moto import mock_aws

from fanout_kit.cli import run_ledger
from fanout_kit.local import ledger_run
from fanout_kit.local.event_sources import KinesisEventSource, KinesisMapping
from fanout_kit.shared.final_status import read_status

pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture(autouse=True)
def _restore_metrics_dimensions():
    from fanout_kit.shared.observability import ledger_metrics as metrics

    before = dict(metrics.default_dimensions)
    yield
    metrics.clear_default_dimensions()
    if before:
        metrics.set_default_dimensions(**before)


def run(app, batch_id, *, children, fail=(), duplicate=False):
    seen = SimpleNamespace()

    def inspect(engine):
        stack = engine.stacks["ledger"]
        seen.batch = ledger_run.ledger_of(engine).read_batch(batch_id)
        seen.status = read_status(engine.dynamodb, stack.setting("STATUS_TABLE_NAME"), batch_id)
        finalizer = stack.setting("FINALIZER_FUNCTION_NAME")
        seen.finalizer_events = [r.event for r in engine.router.invocations if r.function == finalizer]
        seen.count = engine.router.count

    facts = ledger_run.run_ledger_batch(
        app, source="kinesis", children=children, fail=list(fail), concurrency=1, duplicate=duplicate,
        batch_id=batch_id, on_engine=inspect,
    )
    assert not facts["timed_out"]
    return facts, seen


def test_all_children_succeed_then_final_status_once(dev_app):
    facts, seen = run(dev_app, "kin-happy", children=25)
    assert (seen.batch["status"], seen.batch["succeeded"], seen.batch["failed"], seen.batch["done"]) == (
        "COMPLETED", 25, 0, 25)
    assert seen.count(facts["function_ids"]["update_final_status"]) == 1
    (event,) = seen.finalizer_events
    assert event["executionArn"] == seen.batch["finishedBy"] and seen.batch["finishedBy"].startswith("ledger:kinesis:")
    assert seen.status["status"] == "SUCCEEDED" and facts["status_record"] == seen.status
    # 25 records, BatchSize 100 from the template: one invocation, each record once, nothing failed
    assert facts["batch_size"] == 100 and facts["kinesis_invocations"] == 1
    assert facts["deliveries"] == {i: 1 for i in range(25)}
    assert facts["discarded_ranges"] == [] and seen.count(facts["function_ids"]["recorder"]) == 0
    assert run_ledger.exit_code(facts) == 0


def test_every_record_twice_is_counted_once(dev_app):
    facts, seen = run(dev_app, "kin-dupes", children=20, duplicate=True)
    assert facts["sent"] == 40 and facts["deliveries"] == {i: 2 for i in range(20)}
    assert (seen.batch["status"], seen.batch["succeeded"], seen.batch["done"]) == ("COMPLETED", 20, 20)
    assert {e["executionArn"] for e in seen.finalizer_events} == {seen.batch["finishedBy"]}
    assert seen.status["status"] == "SUCCEEDED"


def test_a_failing_record_is_retried_from_its_sequence_number_then_its_range_goes_to_the_on_failure_queue(dev_app):
    facts, seen = run(dev_app, "kin-doomed", children=25, fail=[3], duplicate=True)
    retries = facts["max_retry_attempts"]
    assert retries == 3  # cdk.json dev kinesisRetryAttempts
    # both copies of child 3 sit in the retried remainder: 1 + MaximumRetryAttempts attempts each
    assert facts["deliveries"][3] == 2 * (1 + retries)
    assert facts["partial_failures"] == 1 + retries and facts["retries"] == retries
    assert facts["function_errors"] == 0 and facts["bisections"] == 0  # partial responses, no errors
    (discarded,) = facts["discarded_ranges"]
    # the remainder from child 3's first copy (position 3 of 50) to the end: 47 records
    assert (discarded["batchSize"], discarded["attempts"]) == (47, 1 + retries)
    # children 3..24 of the first copies, then all 25 second copies (records 26..50)
    assert discarded["children"] == list(range(3, 25)) + list(range(25))
    # the recorder read the range back: child 3 counted FAILED once, the others were no-ops
    assert seen.count(facts["function_ids"]["recorder"]) >= 1
    assert (seen.batch["status"], seen.batch["succeeded"], seen.batch["failed"], seen.batch["done"]) == (
        "FAILED", 24, 1, 25)
    assert seen.batch["finishedBy"] == "ledger:kinesis-failed:3"
    assert seen.finalizer_events == []
    assert (seen.status["status"], seen.status["failedItems"], seen.status["totalItems"]) == ("FAILED", 1, 25)
    assert facts["failure_queue_messages_left"] == []
    assert run_ledger.exit_code(facts) == 1


def test_main_runs_the_kinesis_path_and_prints_the_record(dev_app, monkeypatch, capsys):
    import fanout_kit.local.template as template

    monkeypatch.setattr(template, "synthesize", lambda env_name="dev", outdir=None: dev_app)
    monkeypatch.setenv("COLUMNS", "200")
    for key in run_ledger.QUIET_ENV:
        monkeypatch.setenv(key, run_ledger.QUIET_ENV[key])
    code = run_ledger.main(["--source", "kinesis", "--children", "6", "--fail", "2", "--batch-id", "kin-cli"])
    out = capsys.readouterr().out
    assert code == 1
    assert "ledger batch kin-cli (kinesis, counter shards 1): FAILED" in out
    assert '"executionArn": "ledger:kinesis-failed:2"' in out and '"status": "FAILED"' in out
    assert "ranges sent to the on-failure queue: 1" in out
    assert "exit code 1: the batch FAILED" in out


# --------------------------------------------------------------------------- the stand-in alone


class StubRouter:
    """Stands in for the engine's Lambda router: the function raises when a batch holds "poison"."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def invoke(self, function_id, payload, headers):
        import base64

        records = json.loads(payload)["Records"]
        bodies = [json.loads(base64.b64decode(r["kinesis"]["data"]))["childId"] for r in records]
        self.batches.append(bodies)
        if "poison" in bodies:
            headers["x-amz-function-error"] = "Unhandled"
            return b'{"errorType": "Boom"}'
        return b'{"batchItemFailures": []}'


def test_a_function_error_bisects_the_batch_until_the_poison_record_is_isolated_and_discarded():
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name="eu-west-1")
        sqs = boto3.client("sqs", region_name="eu-west-1")
        kinesis.create_stream(StreamName="s", ShardCount=1)
        arn = kinesis.describe_stream(StreamName="s")["StreamDescription"]["StreamARN"]
        queue = sqs.create_queue(QueueName="on-failure")["QueueUrl"]
        ids = ["a", "b", "poison", "d"]
        kinesis.put_records(StreamARN=arn, Records=[
            {"Data": json.dumps({"childId": c}).encode(), "PartitionKey": "k"} for c in ids])
        router = StubRouter()
        engine = SimpleNamespace(router=router, region="eu-west-1", sqs=sqs, client=lambda service: kinesis)
        mapping = KinesisMapping(
            logical_id="M", stream_id="s", stream_arn=arn, function_id="Fn", batch_size=10, bisect_on_error=True,
            max_retry_attempts=1, report_batch_item_failures=True, on_failure_queue_id="on-failure")
        source = KinesisEventSource(engine, mapping, failure_queue_url=queue,
                                    sqs_lock=threading.Lock(), stop=threading.Event())
        assert source._poll_once(source.shards[0]) is True
        # [a b poison d] fails -> halves [a b] ok, [poison d] fails -> [poison] fails twice
        # (1 + MaximumRetryAttempts), discarded; [d] ok. Splitting costs no retry.
        assert router.batches == [ids, ["a", "b"], ["poison", "d"], ["poison"], ["poison"], ["d"]]
        assert (source.stats.bisections, source.stats.function_errors, source.stats.retries) == (2, 4, 1)
        (message,) = sqs.receive_message(QueueUrl=queue)["Messages"]
        body = json.loads(message["Body"])
        assert body["requestContext"]["condition"] == "RetryAttemptsExhausted"
        assert body["requestContext"]["approximateInvokeCount"] == 2
        assert body["responseContext"]["functionError"] == "Unhandled"
        info = body["KinesisBatchInfo"]
        assert (info["shardId"], info["batchSize"], info["streamArn"]) == ("shardId-000000000000", 1, arn)
        assert info["startSequenceNumber"] == info["endSequenceNumber"] == "3"  # the poison record alone
        assert source._poll_once(source.shards[0]) is False and source.idle()  # caught up

"""The completion ledger's SQS path end to end on moto (``fanout_kit.local.ledger_run``): the synthesized dev
ledger stack, the real consumer / DLQ recorder / UpdateFinalStatus handlers in-process, local
pollers standing in for the SQS event source mappings, the DynamoDB contention model on (the
demo's default: transactions in flight cancel each other as on DynamoDB).

Assertions read the emulated DynamoDB tables and SQS queues and the Lambda router's invocation
records (inside the engine, through ``on_engine``), never printed text; except the last test,
which checks that the command line prints the outcome.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from fanout_kit.cli import run_ledger
from fanout_kit.local import ledger_run
from fanout_kit.patterns.completion_ledger.ledger import BATCH_PREFIX, CHILD_PREFIX, batch_key, plain
from fanout_kit.shared.final_status import read_status
from tests.e2e.conftest import assert_no_denied_calls

# Invocations that decide nothing emit no metric; Powertools warns about each.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish")


@pytest.fixture(autouse=True)
def _restore_metrics_dimensions():
    """The in-process handlers share one Powertools Metrics object with the other ledger tests:
    put its default dimensions (the winner sets ``environment``) back as they were."""
    from fanout_kit.shared.observability import ledger_metrics as metrics

    before = dict(metrics.default_dimensions)
    yield
    metrics.clear_default_dimensions()
    if before:
        metrics.set_default_dimensions(**before)


def run(app, batch_id, *, children, fail=(), concurrency=4, duplicate=False, visibility_timeout=1):
    """Run the demo; returns its facts plus what the emulated services held at the end."""
    seen = SimpleNamespace()

    def inspect(engine):
        assert_no_denied_calls(engine)
        stack = engine.stacks["ledger"]
        ledger_table = stack.setting("LEDGER_TABLE_NAME")
        item = engine.dynamodb.get_item(TableName=ledger_table, Key=batch_key(batch_id), ConsistentRead=True)
        seen.batch = plain(item.get("Item"))
        children_items = engine.dynamodb.query(
            TableName=ledger_table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :child)",
            ExpressionAttributeValues={":pk": {"S": BATCH_PREFIX + batch_id}, ":child": {"S": CHILD_PREFIX}},
            ConsistentRead=True,
        )["Items"]
        seen.children = {plain(i)["sk"][len(CHILD_PREFIX):]: plain(i) for i in children_items}
        seen.status = read_status(engine.dynamodb, stack.setting("STATUS_TABLE_NAME"), batch_id)
        finalizer = stack.setting("FINALIZER_FUNCTION_NAME")
        seen.finalizer_events = [r.event for r in engine.router.invocations if r.function == finalizer]
        seen.count = engine.router.count
        seen.depth = {
            lid: sum(int(v) for v in engine.sqs.get_queue_attributes(
                QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
            )["Attributes"].values())
            for lid, url in stack.queues.items()
        }
        seen.redrive = json.loads(engine.sqs.get_queue_attributes(
            QueueUrl=stack.queues[[q for q in stack.queues if q.startswith("ChildQueue")][0]],
            AttributeNames=["RedrivePolicy"],
        )["Attributes"]["RedrivePolicy"])

    facts = ledger_run.run_ledger_batch(
        app,
        children=children,
        fail=list(fail),
        concurrency=concurrency,
        duplicate=duplicate,
        batch_id=batch_id,
        visibility_timeout=visibility_timeout,
        on_engine=inspect,
    )
    assert not facts["timed_out"]
    return facts, seen


def test_all_children_succeed_then_final_status_once(dev_app):
    # A visibility timeout longer than any batch takes, even on a loaded machine: so that "every
    # message delivered once" holds (with 1 s a slow batch is legitimately redelivered).
    facts, seen = run(dev_app, "sqs-happy", children=25, concurrency=10, visibility_timeout=60)
    assert seen.batch["status"] == "COMPLETED"
    assert (seen.batch["total"], seen.batch["succeeded"], seen.batch["failed"], seen.batch["done"]) == (25, 25, 0, 25)
    assert sorted(seen.children, key=int) == [str(i) for i in range(25)]
    assert {c["outcome"] for c in seen.children.values()} == {"SUCCEEDED"}
    # the winner finalized exactly once, and acknowledged it
    ids = facts["function_ids"]
    assert seen.count(ids["update_final_status"]) == 1
    (event,) = seen.finalizer_events
    assert event["batchId"] == "sqs-happy" and event["executionArn"] == seen.batch["finishedBy"]
    assert seen.batch["finishedBy"].startswith("ledger:sqs:") and "finalizedAt" in seen.batch
    assert seen.status["status"] == "SUCCEEDED" and seen.status["finalizedBy"] == seen.batch["finishedBy"]
    # every message consumed once (25 messages in batches of at most 10), nothing dead-lettered
    assert seen.count(ids["consumer"]) >= 3 and seen.count(ids["dlq_recorder"]) == 0
    assert all(n == 1 for n in facts["deliveries"].values()) and len(facts["deliveries"]) == 25
    assert set(seen.depth.values()) == {0}
    assert facts["dlq_messages_left"] == [] and facts["source_messages_left"] == 0
    assert facts["ledger_status"] == "COMPLETED" and facts["update_final_status_invocations"] == 1
    assert facts["batch_size"] == 10 and facts["max_receive_count"] == seen.redrive["maxReceiveCount"] == 5
    assert facts["contention"] is not None and facts["contention"]["transactions"] >= 25  # the model was on


def test_duplicate_delivery_is_not_double_counted(dev_app):
    facts, seen = run(dev_app, "sqs-dupes", children=20, concurrency=10, duplicate=True, visibility_timeout=60)
    assert facts["sent"] == 40
    # each copy delivered at least once; a copy that arrives while the other copy runs the work is
    # retried (ChildWorkInProgress) and then only records the work's outcome
    assert all(n >= 2 for n in facts["deliveries"].values()) and len(facts["deliveries"]) == 20
    assert seen.batch["status"] == "COMPLETED"
    assert (seen.batch["total"], seen.batch["succeeded"], seen.batch["failed"], seen.batch["done"]) == (20, 20, 0, 20)
    assert len(seen.children) == 20
    # Only the winner may finalize; a copy of the winning child redelivered before the winner
    # acknowledged may repeat the (idempotent) call, never another child.
    assert seen.count(facts["function_ids"]["update_final_status"]) >= 1
    assert {e["executionArn"] for e in seen.finalizer_events} == {seen.batch["finishedBy"]}
    assert seen.status["status"] == "SUCCEEDED" and seen.status["finalizedBy"] == seen.batch["finishedBy"]
    assert set(seen.depth.values()) == {0}


def test_a_failing_child_is_retried_dead_lettered_and_fails_the_batch_once(dev_app):
    facts, seen = run(dev_app, "sqs-doomed", children=25, fail=[3], concurrency=10, duplicate=True, visibility_timeout=2)
    max_receive = seen.redrive["maxReceiveCount"]
    # a copy of child 3 was delivered maxReceiveCount times, then moved to the DLQ by SQS; the other
    # copy too, unless the DLQ recorder settled the child FAILED first (its work record is then
    # final: that copy records the failure without running the work, and is deleted)
    assert max_receive < facts["deliveries"][3] <= 2 * max_receive
    assert facts["receive_counts"][3] == max_receive
    assert 3 in facts["dead_lettered"]
    assert seen.count(facts["function_ids"]["dlq_recorder"]) >= 1
    # counted failed once, by the DLQ recorder; the others succeeded once. (On a loaded machine a
    # batch can outlast the short local visibility timeout: its messages are delivered again, as
    # SQS does, and may reach the DLQ too; a child whose work was already counted stays counted
    # SUCCEEDED: the DLQ recorder's duplicate changes nothing.)
    assert seen.children["3"]["outcome"] == "FAILED" and "dead-lettered" in seen.children["3"]["reason"]
    assert {k for k, c in seen.children.items() if c["outcome"] == "SUCCEEDED"} == {str(i) for i in range(25)} - {"3"}
    assert seen.batch["status"] == "FAILED"
    assert (seen.batch["succeeded"], seen.batch["failed"], seen.batch["done"]) == (24, 1, 25)
    # exactly one finisher: the caller whose record completed the count (child 3's DLQ recorder,
    # or a consumer whose success came last); it wrote the FAILED status record
    assert seen.batch["finishedBy"].startswith(("ledger:sqs-dlq:", "ledger:sqs:"))
    # UpdateFinalStatus never ran; the FAILED winner wrote the batch's FAILED status record
    assert seen.count(facts["function_ids"]["update_final_status"]) == 0 and seen.finalizer_events == []
    assert (seen.status["status"], seen.status["failedItems"], seen.status["totalItems"], seen.status["executionArn"]) == (
        "FAILED", 1, 25, seen.batch["finishedBy"])
    assert facts["status_record"] == seen.status
    assert set(seen.depth.values()) == {0} and facts["dlq_messages_left"] == []


def test_main_prints_the_outcome(dev_app, monkeypatch, capsys):
    import fanout_kit.local.template as template

    monkeypatch.setattr(template, "synthesize", lambda env_name="dev", outdir=None: dev_app)
    monkeypatch.setenv("COLUMNS", "200")  # one outcome fact per line
    for key in run_ledger.QUIET_ENV:  # main sets these defaults; put them back afterwards
        monkeypatch.setenv(key, run_ledger.QUIET_ENV[key])
    code = run_ledger.main(["--children", "5", "--concurrency", "2", "--batch-id", "sqs-cli"])
    out = capsys.readouterr().out
    assert code == 0
    assert "ledger batch sqs-cli (sqs, counter shards 1): COMPLETED" in out
    assert "succeeded=5, failed=0, done=5" in out
    assert "UpdateFinalStatus: ran (1 invocation(s))" in out
    assert '"status": "SUCCEEDED"' in out
    assert "dead-letter queue: 0 message(s) left" in out
    assert "DynamoDB contention model (3 ms in flight)" in out
    assert "wall time:" in out
    assert "exit code 0: the batch COMPLETED" in out


def test_usage_errors_are_one_line_and_exit_2(dev_app, monkeypatch, capsys):
    import fanout_kit.local.template as template

    monkeypatch.setattr(template, "synthesize", lambda env_name="dev", outdir=None: dev_app)
    for key in run_ledger.QUIET_ENV:
        monkeypatch.setenv(key, run_ledger.QUIET_ENV[key])
    assert run_ledger.main(["--fail", "x"]) == 2
    assert capsys.readouterr().err == "fanout ledger: --fail 'x': comma-separated whole numbers (child indexes) expected\n"
    assert run_ledger.main(["--children", "3", "--fail", "7"]) == 2
    assert capsys.readouterr().err.strip().endswith("fail: child indexes must be in [0, 3), got [7]")


def test_help_says_what_the_exit_code_means(capsys):
    import argparse

    with pytest.raises(SystemExit):
        run_ledger.add_arguments(argparse.ArgumentParser(prog="fanout ledger")).parse_args(["--help"])
    out = capsys.readouterr().out
    assert "--source {sqs,kinesis}" in out and "--contention-window MS" in out
    assert "exit codes:" in out and "0  the batch COMPLETED" in out and "1  the batch FAILED" in out

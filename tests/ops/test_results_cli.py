"""``fanout results`` against a "deployed" environment (the moto server of tests/ops/conftest.py,
reached over HTTP as AWS would be), and the one-line summary ``fanout watch`` ends with."""

from __future__ import annotations

import csv
import io
import json

from tests.ops.test_ops_cli import started_arn, watch


def test_watch_ends_with_the_summary_and_results_lists_the_failed_task(cli, deployment, batch_file):
    arn = started_arn(cli("start", batch_file("rs-1", NotifyCustomer={"mode": "permanent"})))
    watched = watch(cli, arn)
    assert watched.code == 1
    assert watched.out.strip().splitlines()[-1] == (
        "batch rs-1: FAILED — 1 of 3 tasks failed (NotifyCustomer); list them: fanout results rs-1 --env dev --failed")

    listed = cli("results", "rs-1", "--env", "dev", "--failed", "--format", "json")
    assert listed.code == 0, listed.err
    (failed,) = json.loads(listed.out)
    assert (failed["task"], failed["status"], failed["error"], failed["attempts"]) == (
        "NotifyCustomer", "FAILED", "RetryableTaskError", 4)
    assert failed["execution_arn"] == arn
    (message,) = deployment.engine.dlq_peek()
    assert failed["dlq_message_id"] == message.message_id  # the message the DLQ holds

    every = cli("results", "rs-1")  # --env dev is the default; the workflow is found by its record
    assert every.code == 0, every.err
    assert "batch rs-1 (parallel): FAILED" in every.out and "3 task(s); 1 failed" in every.out


def test_watch_of_a_succeeded_batch_ends_with_the_summary(cli, deployment, batch_file):
    watched = watch(cli, started_arn(cli("start", batch_file("rs-ok"))))
    assert watched.code == 0
    assert watched.out.strip().splitlines()[-1] == (
        "batch rs-ok: SUCCEEDED — all 3 tasks succeeded; list them: fanout results rs-ok --env dev")
    assert deployment.engine.status_record("rs-ok")["resultsAt"].startswith("arn:aws:states:")


def test_a_deployed_map_batch_lists_its_failed_items(cli, map_deployment, tmp_path):
    faults = {1: {"mode": "permanent"}, 4: {"mode": "fatal"}}
    items = [{"imageId": f"img-{i}", **({"simulateFailure": faults[i]} if i in faults else {})} for i in range(6)]
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"batchId": "rs-map", "items": items}))
    watched = watch(cli, started_arn(cli("start", "--workflow", "map", str(path))))
    assert watched.code == 1
    assert watched.out.strip().splitlines()[-1] == (
        "batch rs-map: FAILED — 2 of 6 items failed; list them: fanout results rs-map --env dev --failed")

    listed = cli("results", "rs-map", "--workflow", "map", "--failed", "--format", "csv")
    assert listed.code == 0, listed.err
    rows = list(csv.DictReader(io.StringIO(listed.out)))
    # each failed item with its own error (the worker reported them per item: batchItemFailures)
    assert sorted((int(r["index"]), r["status"], r["error"]) for r in rows) == [
        (1, "FAILED", "RetryableTaskError"), (4, "FAILED", "NonRetryableTaskError")]
    assert all(r["result_file"].startswith("results/") for r in rows)


def test_an_unknown_batch_is_one_line_and_exit_2(cli, deployment):
    missing = cli("results", "no-such-batch", "--workflow", "parallel")
    assert missing.code == 2 and missing.err.startswith("fanout: batch no-such-batch: no status record in dev")
    assert len(missing.err.strip().splitlines()) == 1


def test_a_stack_of_an_app_is_found_with_app_and_stack(cli, deployment, batch_file, dev_app):
    """--app PATH (here the synthesized assembly of the kit's own app, whose constructs record their
    workflow metadata as any app's do) and --stack: the deployed stack's outputs name the tables."""
    watch(cli, started_arn(cli("start", batch_file("rs-app"))))
    stack = deployment.engine.deployment("parallel").stack_name
    listed = cli("results", "rs-app", "--app", str(dev_app.outdir), "--stack", stack, "--format", "json")
    assert listed.code == 0, listed.err
    assert sorted(o["task"] for o in json.loads(listed.out)) == ["ChargePayment", "NotifyCustomer", "ReserveInventory"]
    missing = cli("results", "rs-app", "--app", str(dev_app.outdir), "--stack", "NoSuchStack")
    assert missing.code == 2 and "--stack NoSuchStack: no such stack in --app" in missing.err


def test_a_batch_run_locally_but_asked_of_the_deployment_names_local(cli, deployment, tmp_path, monkeypatch):
    from fanout_kit.ops.results import batch_folder

    monkeypatch.setenv("FANOUT_STATE_DIR", str(tmp_path))
    saved = batch_folder("ran-here")
    saved.mkdir(parents=True)
    (saved / "record.json").write_text(json.dumps({"batchId": "ran-here", "record": {"status": "SUCCEEDED"},
                                                  "target": {"workflow": "parallel", "status_table": "t"}}))
    asked = cli("results", "ran-here", "--workflow", "parallel")
    assert asked.code == 2 and asked.err.startswith("fanout: batch ran-here: no status record in dev")
    assert asked.err.rstrip().endswith("(a batch ran-here was run locally here: fanout results ran-here --local)")
    assert len(asked.err.strip().splitlines()) == 1

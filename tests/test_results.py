"""``fanout results`` and fanout_kit.ops.results (its Python API): a batch's outcomes item by item (Map), task by task
(Parallel), child by child (ledger), from what ``fanout run`` / ``fanout ledger`` saved locally;
the readers stream; bad input is one line. The deployed path: tests/ops/test_results_cli.py."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import fanout_kit.local.template as template_module
from fanout_kit.cli.main import main
from fanout_kit.ops.results import LocalSource, map_outcomes, summary_line, write_outcomes
from fanout_kit.ops.outcomes import Outcome, entry_outcomes

EXAMPLE = "examples/batch.json"


@pytest.fixture(autouse=True)
def reuse_session_synth(monkeypatch, dev_app):
    monkeypatch.setattr(template_module, "synthesize", lambda env_name="dev", outdir=None: dev_app)


@pytest.fixture(autouse=True)
def state_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("FANOUT_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def results(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["results", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_local_parallel_batch_lists_its_failed_task_with_error_cause_attempts_and_dlq_message(capsys, tmp_path):
    batch = json.loads(Path(EXAMPLE).read_text()) | {"batchId": "res-par-1"}
    (tmp_path / "b.json").write_text(json.dumps(batch))
    assert main(["run", str(tmp_path / "b.json"), "--no-sleep", "--fail", "NotifyCustomer=permanent",
                 "--fail", "ChargePayment=transient:1"]) == 1
    run = capsys.readouterr().out
    assert ("batch res-par-1: FAILED — 1 of 3 tasks failed (NotifyCustomer); list them: "
            "fanout results res-par-1 --local --failed") in run

    code, out, err = results(capsys, "res-par-1", "--local", "--format", "json")
    assert code == 0, err
    by_task = {o["task"]: o for o in json.loads(out)}
    assert [by_task[t]["index"] for t in ("ReserveInventory", "ChargePayment", "NotifyCustomer")] == [0, 1, 2]
    assert (by_task["ReserveInventory"]["status"], by_task["ReserveInventory"]["attempts"]) == ("SUCCEEDED", 1)
    assert (by_task["ChargePayment"]["status"], by_task["ChargePayment"]["attempts"]) == ("SUCCEEDED", 2)
    failed = by_task["NotifyCustomer"]
    assert (failed["status"], failed["error"], failed["attempts"]) == ("FAILED", "RetryableTaskError", 4)
    assert "simulated permanent failure of NotifyCustomer (attempt 4)" in failed["cause"]
    # the DLQ message id is the one the DLQ holds (its DeadLetter send's MessageId)
    saved = json.loads(next((tmp_path / "state").glob("res-par-1-*/record.json")).read_text())
    assert failed["execution_arn"] == saved["record"]["executionArn"] == saved["record"]["resultsAt"]
    assert failed["dlq_message_id"] and len(failed["dlq_message_id"]) == 36

    code, out, _ = results(capsys, "res-par-1", "--local", "--failed")
    assert code == 0
    assert "NotifyCustomer" in out and "ReserveInventory" not in out and "ChargePayment" not in out
    assert f"dlq message {failed['dlq_message_id']}" in out
    assert "1 task(s) that did not succeed; 1 failed" in out

    code, out, _ = results(capsys, "res-par-1", "--local", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["task"], r["status"], r["attempts"]) for r in rows] == [
        ("ReserveInventory", "SUCCEEDED", "1"), ("ChargePayment", "SUCCEEDED", "2"), ("NotifyCustomer", "FAILED", "4")]


def test_a_local_map_batch_lists_its_failing_items(capsys, tmp_path):
    items = [{"imageId": f"img-{i}"} for i in range(12)]
    (tmp_path / "m.json").write_text(json.dumps({"batchId": "res-map-1", "items": items}))
    assert main(["run", str(tmp_path / "m.json"), "--workflow", "map", "--no-sleep",
                 "--fail-item", "3=permanent", "--fail-item", "10=fatal"]) == 1
    run = capsys.readouterr().out
    assert ("batch res-map-1: FAILED — 2 of 12 items failed; list them: fanout results res-map-1 --local --failed"
            in run)

    code, out, err = results(capsys, "res-map-1", "--local", "--failed", "--format", "json")
    assert code == 0, err
    failed = sorted(json.loads(out), key=lambda o: o["index"])
    assert [(o["index"], o["item"]["imageId"], o["status"], o["error"]) for o in failed] == [
        (3, "img-3", "FAILED", "RetryableTaskError"), (10, "img-10", "FAILED", "NonRetryableTaskError")]
    assert "simulated non-retryable failure of item-10" in failed[1]["cause"]
    assert all(o["result_file"].startswith("results/") and o["execution_arn"] for o in failed)

    code, out, _ = results(capsys, "res-map-1", "--local", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert sorted(int(r["index"]) for r in rows) == list(range(12))
    assert {int(r["index"]) for r in rows if r["status"] != "SUCCEEDED"} == {3, 10}
    assert json.loads(next(r for r in rows if r["index"] == "5")["item"]) == {"imageId": "img-5"}

    code, out, _ = results(capsys, "res-map-1", "--local")
    assert code == 0 and "12 item(s); 2 failed" in out


def test_a_succeeded_map_batch_records_where_its_results_are(capsys, tmp_path):
    (tmp_path / "m.json").write_text(json.dumps({"batchId": "res-map-ok", "items": [{"n": i} for i in range(4)]}))
    assert main(["run", str(tmp_path / "m.json"), "--workflow", "map", "--no-sleep"]) == 0
    run = capsys.readouterr().out
    assert "batch res-map-ok: SUCCEEDED — all 4 items succeeded; list them: fanout results res-map-ok --local" in run
    assert '"resultsAt": "s3://' in run  # the status record points to the ResultWriter manifest
    code, out, _ = results(capsys, "res-map-ok", "--local", "--failed")
    assert code == 0 and "0 item(s) that did not succeed; 0 failed" in out


def test_a_local_ledger_batch_lists_its_children_from_their_marks(capsys, dev_app):
    from fanout_kit.local.ledger_run import run_ledger_batch

    facts = run_ledger_batch(dev_app, children=6, fail=[2], concurrency=2, duplicate=False, batch_id="res-led-1")
    assert facts["status_record"]["status"] == "FAILED"
    assert facts["status_record"]["resultsAt"].startswith("dynamodb://") and facts["saved"]
    code, out, err = results(capsys, "res-led-1", "--local", "--format", "json")
    assert code == 0, err
    children = {o["task"]: o for o in json.loads(out)}
    assert sorted(children, key=int) == [str(i) for i in range(6)]
    assert {c for c, o in children.items() if o["status"] != "SUCCEEDED"} == {"2"}
    assert children["2"]["index"] == 2 and children["2"]["dlq_message_id"]  # the DLQ recorder's message
    code, out, _ = results(capsys, "res-led-1", "--local", "--failed", "--format", "csv")
    assert [r["task"] for r in csv.DictReader(io.StringIO(out))] == ["2"]


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["nope-batch", "--local"], "batch nope-batch: not in the local state"),
        (["b", "--local", "--env", "dev"], "--local reads the batches fanout run / fanout ledger saved here: drop --env"),
        (["b", "--stack", "S"], "--stack S: needs --app PATH"),
        (["b", "--app", "x", "--env", "dev"], "--app and --env: pass one"),
        (["b", "--env", "nowhere"], "unknown environment 'nowhere': pass --env with one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, expected):
    code, out, err = results(capsys, *argv)
    assert code == 2
    assert err.startswith("fanout: ") and expected in err and len(err.strip().splitlines()) == 1, err


def test_an_app_path_without_cdk_json_is_named(capsys, tmp_path):
    code, _, err = results(capsys, "b", "--app", str(tmp_path))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"--app {tmp_path}: neither a CDK app (cdk.json) nor a cloud assembly (manifest.json)" in err


def test_an_unknown_format_is_refused(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["results", "b", "--local", "--format", "xx"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == ("fanout results: argument --format: invalid choice: 'xx' (choose from "
                                       "'table', 'json', 'csv'); see fanout results --help\n")


# --------------------------------------------------------------------------- the readers
def child_entry(first: int, size: int, status: str = "SUCCEEDED", **extra) -> dict:
    """One child's entry of a ResultWriter file, the shape Step Functions writes (Input: a JSON
    string of the child's ItemBatcher input)."""
    items = [{"index": i, "item": {"imageId": f"img-{i}", "pad": "x" * 40}} for i in range(first, first + size)]
    return {
        "ExecutionArn": f"arn:aws:states:eu-west-1:123456789012:express:M/P:child-{first}",
        "Input": json.dumps({"Items": items, "BatchInput": {"batchId": "b"}}),
        "InputDetails": {"Included": True},
        "Name": f"child-{first}",
        "Output": json.dumps({"processed": size}) if status == "SUCCEEDED" else None,
        "Status": status,
        **extra,
    }


def test_a_child_entry_holding_a_batch_of_items_expands_to_each_item():
    entry = child_entry(40, 20, "FAILED", Error="ItemsDeadLettered", Cause="boom")
    outcomes = list(entry_outcomes(entry, "results/r/FAILED_0.json"))
    assert [o.index for o in outcomes] == list(range(40, 60))
    assert {(o.status, o.error, o.cause, o.result_file) for o in outcomes} == {
        ("FAILED", "ItemsDeadLettered", "boom", "results/r/FAILED_0.json")}
    assert outcomes[0].item == {"imageId": "img-40", "pad": "x" * 40} and outcomes[0].failed


class CountingSource(LocalSource):
    """A LocalSource that records how many bytes of each file were handed out, in small chunks."""

    def __init__(self, folder, chunk):
        super().__init__(folder)
        self.chunk, self.read = chunk, {}

    def read_chunks(self, bucket, key):
        path = self._object(bucket, key)
        with path.open("rb") as stream:
            while data := stream.read(self.chunk):
                self.read[key] = self.read.get(key, 0) + len(data)
                yield data


def write_run(folder: Path, groups: dict[str, list[dict]]) -> None:
    (folder / "record.json").write_text(json.dumps({"batchId": "b", "record": {}, "target": {}}))
    base = folder / "s3" / "bucket" / "results" / "r"
    base.mkdir(parents=True)
    files = {}
    for group, entries in groups.items():
        (base / f"{group}_0.json").write_text(json.dumps(entries))
        files[group] = [{"Key": f"results/r/{group}_0.json", "Size": (base / f"{group}_0.json").stat().st_size}]
    (base / "manifest.json").write_text(json.dumps({"DestinationBucket": "bucket", "ResultFiles": files}))


def test_the_map_reader_streams_a_result_file_and_skips_succeeded_files_with_failed(tmp_path):
    write_run(tmp_path, {
        "SUCCEEDED": [child_entry(i * 20, 20) for i in range(50)],
        "FAILED": [child_entry(1000, 20, "FAILED", Error="ItemsDeadLettered", Cause="c"),
                   child_entry(1020, 20, "TIMED_OUT")],
    })
    succeeded_size = (tmp_path / "s3/bucket/results/r/SUCCEEDED_0.json").stat().st_size
    source = CountingSource(tmp_path, chunk=4096)
    stream = map_outcomes(source, "bucket", "results/r/manifest.json")
    first = next(stream)
    assert first.index == 0 and first.status == "SUCCEEDED"
    # one child entry parsed: a few chunks of the ~200 KB file read, not the file
    assert source.read["results/r/SUCCEEDED_0.json"] <= 3 * 4096 < succeeded_size
    rest = list(stream)
    assert len(rest) + 1 == 1040 and source.read["results/r/SUCCEEDED_0.json"] == succeeded_size

    source = CountingSource(tmp_path, chunk=4096)
    failed = list(map_outcomes(source, "bucket", "results/r/manifest.json", failed_only=True))
    assert [o.index for o in failed] == list(range(1000, 1040))
    assert {o.status for o in failed} == {"FAILED", "TIMED_OUT"}
    assert "results/r/SUCCEEDED_0.json" not in source.read  # never opened


def test_formats_stream_and_parse():
    outcomes = [Outcome(index=0, status="SUCCEEDED", item={"a": 1}), Outcome(index=1, status="FAILED", item="x",
                                                                              error="E", cause="line1\nline2")]
    for fmt in ("json", "csv", "table"):
        out = io.StringIO()
        assert write_outcomes(iter(outcomes), fmt, out) == (2, 1)
        if fmt == "json":
            assert [o["status"] for o in json.loads(out.getvalue())] == ["SUCCEEDED", "FAILED"]
        elif fmt == "csv":
            rows = list(csv.DictReader(io.StringIO(out.getvalue())))
            assert rows[1]["cause"] == "line1\nline2" and json.loads(rows[0]["item"]) == {"a": 1}
        else:
            assert "E: line1 line2" in out.getvalue()  # one line per outcome
    empty = io.StringIO()
    write_outcomes(iter(()), "json", empty)
    assert json.loads(empty.getvalue()) == []


def test_summary_lines():
    failed = {"status": "FAILED", "failedItems": 3, "totalItems": 100000}
    assert summary_line("B", "map", failed, "fanout results B --env dev") == (
        "batch B: FAILED — 3 of 100,000 items failed; list them: fanout results B --env dev --failed")
    guard = {"status": "FAILED", "failedExecutionStatus": "TIMED_OUT", "failedExecutionError": "States.Timeout"}
    assert summary_line("B", "parallel", guard, "fanout results B --local") == (
        "batch B: FAILED — the execution ended TIMED_OUT (States.Timeout); list them: fanout results B --local --failed")
    assert summary_line("B", "map", None, "x").startswith("batch B: no status record yet")


def history_of(*steps):
    """A Parallel execution's history events (GetExecutionHistory's shapes) from (type, state, details)."""
    events, previous = [], 0
    for number, (kind, state, details) in enumerate(steps, 1):
        event = {"id": number, "previousEventId": previous, "type": kind}
        if kind.endswith("StateEntered"):
            event["stateEnteredEventDetails"] = {"name": state}
        elif kind.endswith("StateExited"):
            event["stateExitedEventDetails"] = {"name": state}
        elif details:
            event[details[0]] = details[1]
        events.append(event)
        previous = number
    return events


def test_parallel_outcomes_read_across_history_pages_and_a_task_the_record_names_failed_is_not_confirmed():
    from fanout_kit.ops.results import BatchResults, Target, parallel_outcomes

    arn = "arn:aws:states:eu-west-1:123456789012:execution:sm:x"
    events = history_of(
        ("ExecutionStarted", None, ("executionStartedEventDetails", {"input": json.dumps({"tasks": {"B": {}, "A": {}}})})),
        ("ChoiceStateEntered", "Run A?", None), ("PassStateEntered", "Input A", None),
        ("TaskStateEntered", "Run A", None), ("TaskScheduled", None, None),
        ("TaskFailed", None, ("taskFailedEventDetails", {"error": "Boom", "cause": "first"})),
        ("TaskScheduled", None, None), ("TaskSucceeded", None, ("taskSucceededEventDetails", {"output": "{}"})),
        ("TaskStateExited", "Run A", None),
        ("ChoiceStateEntered", "Run B?", None), ("TaskStateEntered", "Run B", None), ("TaskScheduled", None, None),
        ("TaskFailed", None, ("taskFailedEventDetails", {"error": "Fatal", "cause": "no"})),
        ("TaskStateEntered", "DeadLetter B", None), ("TaskScheduled", None, None),
        ("TaskSucceeded", None, ("taskSucceededEventDetails", {"output": json.dumps({"MessageId": "m-1"})})),
        ("PassStateEntered", "B dead-lettered", None),
    )
    pages = [events[:5], events[5:11], events[11:]]  # GetExecutionHistory pages: state follows across them
    a_and_b = parallel_outcomes(pages, arn)
    assert [(o.index, o.task, o.status, o.attempts, o.error, o.dlq_message_id) for o in a_and_b] == [
        (0, "B", "FAILED", 1, "Fatal", "m-1"), (1, "A", "SUCCEEDED", 2, None, None)]

    class Pages:
        def history_pages(self, execution_arn):
            assert execution_arn == arn
            return iter(pages)

    record = {"status": "FAILED", "executionArn": arn, "resultsAt": arn, "failedTasks": ["A", "B"]}
    batch = BatchResults("x", Target("parallel", "t"), record, Pages(), arn)
    shown = {o.task: o for o in batch.outcomes(failed_only=True)}
    assert (shown["A"].status, shown["A"].error) == ("NOT_CONFIRMED", "BatchNotConfirmed")
    assert shown["B"].status == "FAILED"

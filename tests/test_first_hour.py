"""A new user's mistakes (issue 11), each through the real CLI in a subprocess: the exit code, one
clean ``fanout: ...`` line on stderr, no traceback, and for a bad flag, environment, cdk.json or input
file an answer before any synth (a copy of the kit whose synth cache stays empty).

Times are measured by benchmarks/first_hour.py, not asserted here."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from fanout_kit.shared.limits import PARALLEL_INPUT_MAX_BYTES
from tests.conftest import ROOT

KIT_PARTS = ("app.py", "cdk.json", "fanout_kit", "fanout_runtime", "stacks", "lambdas", "examples")
PARALLEL = json.loads((ROOT / "examples" / "batch.json").read_text())


@dataclass
class Result:
    code: int
    out: str
    err: str

    def one_line(self) -> str:
        text = self.out + self.err
        assert "Traceback" not in text and "Exception ignored" not in text, text
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("fanout: ") and len(lines[0]) > len("fanout: ") + 10, lines[0]
        return lines[0]


def copy_kit(dest: Path) -> Path:
    for name in KIT_PARTS:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", ".fanout-cache"),
                            symlinks=True)
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest / name)
    return dest


def kit_path(kit: Path) -> str:
    """The copy's import roots (as setup.sh's .pth: the kit and its lambdas/), ahead of the shared
    venv's .pth, so the copy runs its own handlers and fanout_kit, not another checkout's."""
    return os.pathsep.join((str(kit), str(kit / "lambdas")))


def run_fanout(kit: Path, *args: str, stdin: str | None = None, timeout: float = 120) -> Result:
    env = {**os.environ, "PYTHONPATH": kit_path(kit)}
    for key in ("COLUMNS", "POWERTOOLS_LOG_LEVEL", "POWERTOOLS_METRICS_DISABLED"):
        env.pop(key, None)  # as a user's shell has them (tests/conftest.py sets the log level)
    done = subprocess.run(
        [sys.executable, "-m", "fanout_kit", *args],
        cwd=kit, env=env, input=stdin, capture_output=True, text=True, timeout=timeout,
    )
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    return copy_kit(tmp_path_factory.mktemp("kit") / "kit")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("inputs")
    files = {
        "number-batch-id.json": {**PARALLEL, "batchId": 12345},
        "array.json": [PARALLEL],
        "null.json": None,
        "300kb.json": {**PARALLEL, "tasks": {**PARALLEL["tasks"], "ReserveInventory": {"pad": "x" * 300_000}}},
        "200kb.json": {**PARALLEL, "tasks": {**PARALLEL["tasks"], "ReserveInventory": {"pad": "x" * 200_000}}},
        "unknown-task.json": {**PARALLEL, "tasks": {**PARALLEL["tasks"], "ShipParcel": {}}},
    }
    for name, data in files.items():
        (folder / name).write_text(json.dumps(data))
    (folder / "broken.json").write_text('{"tasks": {')
    (folder / "rows.csv").write_text("sku,qty\nA,1\nB,2,extra\n")
    return {name: str(folder / name) for name in [*files, "broken.json", "rows.csv"]}


def no_synth(kit: Path) -> bool:
    return not (kit / ".fanout-cache").exists()


BAD_RUNS = {
    # name: (arguments, exit code, what the one line says)
    "batchId a number": (["run", "{number-batch-id.json}"], 2, "batchId: must be a string, got number"),
    "input a top-level array": (["run", "{array.json}"], 2, "execution input must be a JSON object"),
    "input null": (["run", "{null.json}"], 2, "execution input must be a JSON object"),
    "input not JSON": (["run", "{broken.json}"], 2, "not valid JSON: Expecting"),
    "input file missing": (["run", "no-such-file.json"], 2, "input file no-such-file.json: No such file"),
    "unknown task": (["run", "{unknown-task.json}"], 2, "tasks.ShipParcel: unknown task"),
    "input over 256 KiB": (["run", "{300kb.json}"], 2, "more than the 262144 bytes (256 KiB)"),
    # under AWS's limit, over the Parallel workflow's cap (fanout_kit.shared.limits)
    "input over the Parallel cap": (
        ["run", "{200kb.json}"], 2, f"bytes of JSON, over the {PARALLEL_INPUT_MAX_BYTES:,}-byte cap"),
    "map input to the parallel workflow": (["run", "examples/map-batch.json"], 2, "items: unknown field"),
    "--manifest without --workflow map": (
        ["run", "examples/batch.json", "--manifest", "examples/manifest.csv"], 2, "needs --workflow map"),
    "--manifest file missing": (
        ["run", "examples/map-manifest-input.json", "--workflow", "map", "--manifest", "nope.json"],
        2, "--manifest nope.json: No such file"),
    "--manifest malformed CSV": (
        ["run", "examples/map-manifest-input.json", "--workflow", "map", "--manifest", "{rows.csv}"],
        2, "CSV line 3 has 3 fields, the header has 2"),
    "--env unknown": (["run", "examples/batch.json", "--env", "nope"], 2,
                      "unknown environment 'nope': pass --env with one of: dev, prod"),
    "--fail malformed": (["run", "examples/batch.json", "--fail", "ChargePayment=sometimes"], 2,
                         "expected TASK=transient:K, TASK=permanent, TASK=fatal, TASK=timeout, TASK=oom or TASK=crash"),
    "--fail unknown task": (["run", "examples/batch.json", "--fail", "NoSuch=fatal"], 2,
                            "--fail NoSuch: no such task in the input"),
    "--fail on the map workflow": (["run", "examples/map-batch.json", "--workflow", "map", "--fail",
                                    "ChargePayment=fatal"], 2, "applies to the Parallel workflow's tasks"),
    "--fail-item on the parallel workflow": (["run", "examples/batch.json", "--fail-item", "3=fatal"], 2,
                                             "applies to the Map workflow's items"),
    "--dlq-send-failures with nothing dead-lettered": (
        ["run", "examples/batch.json", "--dlq-send-failures", "2"], 2, "nothing is dead-lettered in this run"),
    "--dlq-send-failures negative": (["run", "examples/batch.json", "--dlq-send-failures", "-3"], 2,
                                     "--dlq-send-failures -3: must be 0 or more"),
    "--lambda-fault malformed": (["run", "examples/batch.json", "--lambda-fault", "X=Boom"], 2,
                                 "CODE one of ServiceException"),
    "--name not an execution name": (["run", "examples/batch.json", "--name", "a b"], 2,
                                     "--name 'a b': 1-80 of letters"),
    "ledger --env unknown": (["ledger", "--env", "nope"], 2, "unknown environment 'nope'"),
    "start --env unknown": (["start", "examples/batch.json", "--env", "nope"], 2, "unknown environment 'nope'"),
    "start input over 256 KiB": (["start", "{300kb.json}"], 2, "more than the 262144 bytes (256 KiB)"),
    "start input null": (["start", "{null.json}"], 2, "execution input must be a JSON object"),
}


@pytest.mark.parametrize("case", list(BAD_RUNS))
def test_a_mistake_is_one_line_before_any_synth(kit, inputs, case):
    argv, code, says = BAD_RUNS[case]
    result = run_fanout(kit, *[inputs[a[1:-1]] if a.startswith("{") else a for a in argv])
    line = result.one_line()
    assert result.code == code, (result.code, line)
    assert says in line, line
    assert result.out == ""
    assert no_synth(kit)


@pytest.mark.parametrize(
    "damage, says",
    [
        (lambda text: text.replace('"env": "dev",', '"env": "dev"'),
         "cdk.json: not valid JSON: Expecting ',' delimiter (line "),
        (lambda text: text.replace('"taskTimeoutSeconds": 30', '"taskTimeoutSecond": 30'),
         "cdk.json: context.fanout:environments.dev.taskTimeoutSeconds: must be a whole number from 1 to 900 (Lambda allows at most 900 s), got None"),
    ],
    ids=["broken JSON", "a typo in a setting"],
)
@pytest.mark.parametrize(
    "argv",
    [["run", "examples/batch.json"], ["ledger"], ["start", "examples/batch.json"], ["dlq", "list"]],
    ids=lambda argv: argv[0],
)
def test_a_damaged_cdk_json_is_one_line_in_every_command(tmp_path, damage, says, argv):
    kit = copy_kit(tmp_path / "kit")
    cdk_json = kit / "cdk.json"
    cdk_json.write_text(damage(cdk_json.read_text()))
    result = run_fanout(kit, *argv)
    line = result.one_line()
    assert result.code == 2 and says in line, line
    assert no_synth(kit)


def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    """Ctrl-C reaches the whole foreground process group (jsii's Node included), mid-synth."""
    kit = copy_kit(tmp_path / "kit")
    env = {**os.environ, "PYTHONPATH": kit_path(kit)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "fanout_kit", "run", "examples/batch.json"],
        cwd=kit, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    # Inside the synth: its work folder exists (polling, not a fixed sleep: a loaded machine may
    # still be importing after a few seconds, where Ctrl-C is Python's own traceback).
    deadline = time.monotonic() + 60
    while not any((kit / ".fanout-cache" / "synth").glob(".dev-*")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.5)  # jsii's Node is up
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert Result(proc.returncode, out, err).one_line() == "fanout: interrupted"
    assert proc.returncode == 130


def test_a_lambda_fault_on_no_such_function_names_the_functions(tmp_path):
    kit = copy_kit(tmp_path / "kit")
    result = run_fanout(kit, "run", "examples/batch.json", "--no-sleep", "--lambda-fault", "NoSuch=ServiceException:2")
    line = result.one_line()
    assert result.code == 2
    assert line == (
        "fanout: --lambda-fault NoSuch=...: no function NoSuch in the parallel workflow; functions: "
        "ChargePayment, NotifyCustomer, RecordExecutionFailure, ReserveInventory, UpdateFinalStatus, ValidateInput"
    )


def test_piped_output_is_clean_whole_lines():
    """Not a terminal: no handler log lines, no 80-column wrapping, one plain line per task change."""
    result = run_fanout(ROOT, "run", "examples/batch.json", "--no-sleep", "--fail", "NotifyCustomer=fatal")
    assert result.code == 1 and result.err == ""
    lines = result.out.splitlines()
    assert not [line for line in lines if line.lstrip().startswith('{"level"')]
    assert "NotifyCustomer: dead-lettered, attempt 1, last error NonRetryableTaskError" in lines
    (head,) = [line for line in lines if line.startswith("execution ")]
    assert re.fullmatch(r"execution FAILED  arn:aws:states:eu-west-1:\d{12}:execution:\S+:local-[0-9a-f]{12}", head)
    (error,) = [line for line in lines if line.startswith("  error: ")]
    assert error.startswith("  error: BatchFailed: 1 of 3 tasks failed: [\"NotifyCustomer\"]")
    (record,) = [line for line in lines if line.startswith("final status record: ")]
    assert json.loads(record.removeprefix("final status record: "))["failedTasks"] == ["NotifyCustomer"]
    assert max(len(line) for line in lines) > 80  # long lines stay whole


def test_the_fanout_command_is_installed_by_setup():
    """setup.sh writes .venv/bin/fanout (test.sh runs setup.sh first)."""
    script = ROOT / ".venv" / "bin" / "fanout"
    assert script.is_file() and os.access(script, os.X_OK), "run ./setup.sh --no-demo"
    done = subprocess.run([str(script), "run", "no-such-file.json"], capture_output=True, text=True,
                          cwd="/", timeout=60)
    assert done.returncode == 2
    assert Result(done.returncode, done.stdout, done.stderr).one_line() == (
        "fanout: input file no-such-file.json: No such file or directory"
    )

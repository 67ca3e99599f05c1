"""``fanout run``: exit codes, fault switches and clear errors (engine in-process)."""

import json

import pytest

import fanout_kit.local.template as template_module
from fanout_kit.cli.main import main
from fanout_kit.cli.faults import FaultSpecError, apply_task_faults, parse_lambda_fault, parse_task_fault

EXAMPLE = "examples/batch.json"


@pytest.fixture(autouse=True)
def reuse_session_synth(monkeypatch, dev_app):
    monkeypatch.setattr(template_module, "synthesize", lambda env_name="dev", outdir=None: dev_app)


def test_demo_succeeds_with_exit_code_0(capsys):
    assert main(["run", EXAMPLE, "--no-sleep"]) == 0
    out = capsys.readouterr().out
    assert "execution SUCCEEDED" in out and '"status": "SUCCEEDED"' in out
    assert "dead-letter queue: 0 message(s)" in out


def test_demo_with_a_permanent_failure_exits_1_and_shows_the_dlq(capsys):
    assert main(["run", EXAMPLE, "--no-sleep", "--fail", "NotifyCustomer=permanent"]) == 1
    out = capsys.readouterr().out
    assert "execution FAILED" in out and "BatchFailed" in out
    assert "dead-letter queue: 1 message(s)" in out and "task=NotifyCustomer" in out
    assert "NotifyCustomer=4" in out  # attempts: the first + MaxAttempts 3 retries


def test_bad_fault_switch_exits_2_with_the_expected_form(capsys):
    assert main(["run", EXAMPLE, "--fail", "ChargePayment=sometimes"]) == 2
    assert "expected TASK=transient:K, TASK=permanent, TASK=fatal, TASK=timeout, TASK=oom or TASK=crash" in capsys.readouterr().err


def test_malformed_input_file_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["run", str(bad)]) == 2
    assert "bad.json: not valid JSON: Expecting property name enclosed in double quotes (line 1, column 2)" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: No such file or directory" in capsys.readouterr().err


def test_fault_parsing():
    assert parse_task_fault("ChargePayment=transient:3").payload_switch() == {"mode": "transient", "times": 3}
    assert parse_task_fault("X=permanent").payload_switch() == {"mode": "permanent"}
    assert parse_lambda_fault("UpdateFinalStatus=ServiceException:2") == (
        "UpdateFinalStatus", ["ServiceException", "ServiceException"],
    )
    with pytest.raises(FaultSpecError, match="CODE one of ServiceException"):
        parse_lambda_fault("X=Boom")
    data = json.loads(open(EXAMPLE).read())
    with pytest.raises(FaultSpecError, match="no such task in the input"):
        apply_task_faults(data, [parse_task_fault("Nope=fatal")])
    faulted = apply_task_faults(data, [parse_task_fault("ChargePayment=fatal")])
    assert faulted["tasks"]["ChargePayment"]["simulateFailure"] == {"mode": "fatal"}
    assert "simulateFailure" not in data["tasks"]["ChargePayment"]  # input not mutated


def test_a_lambda_error_cause_is_one_line():
    from fanout_kit.cli.views import error_line

    blob = json.dumps({
        "errorMessage": "tasks.Foo: unknown task; configured tasks are A, B",
        "errorType": "InvalidInput",
        "requestId": "5f0c",
        "stackTrace": ['  File "/var/task/validate_input.py", line 20, in handler\n', "    raise\n"],
    })
    assert error_line("InvalidInput", blob) == "InvalidInput: tasks.Foo: unknown task; configured tasks are A, B"
    assert error_line("BatchFailed", "1 of 3 tasks failed:\n[\"X\"]") == 'BatchFailed: 1 of 3 tasks failed: ["X"]'
    assert error_line("States.Timeout", None) == "States.Timeout"


def test_dlq_send_failures_are_retried_when_a_task_is_dead_lettered(capsys):
    """docs/getting-started.md: --fail NotifyCustomer=permanent --dlq-send-failures 2: the DLQ send fails twice, is
    retried, and the message arrives."""
    assert main(["run", EXAMPLE, "--no-sleep", "--fail", "NotifyCustomer=permanent", "--dlq-send-failures", "2"]) == 1
    out = capsys.readouterr().out
    assert "DeadLetter NotifyCustomer=3" in out  # 2 failed sends + the one that went through
    assert "dead-letter queue: 1 message(s)" in out

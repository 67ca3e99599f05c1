"""Execution-input validation: every bad field is named with its fix; nothing else is accepted."""

import pytest

from fanout_runtime.errors import InvalidInput
from fanout_kit.patterns.parallel.validation import validate_batch_input

TASKS = ["ReserveInventory", "ChargePayment"]
GOOD = {"batchId": "order-1", "tasks": {"ReserveInventory": {}, "ChargePayment": {"amountCents": 1}}}


def test_valid_input_is_normalized():
    assert validate_batch_input(GOOD, TASKS) == {**GOOD, "redriveOf": None}


def test_batch_id_defaults_to_the_execution_name():
    out = validate_batch_input({"tasks": GOOD["tasks"]}, TASKS, execution_name="exec-7")
    assert out["batchId"] == "exec-7"


def test_batch_id_generated_without_execution_name():
    out = validate_batch_input({"tasks": GOOD["tasks"]}, TASKS, execution_name=None)
    assert out["batchId"].startswith("batch-") and len(out["batchId"]) > 20


@pytest.mark.parametrize(
    "event, expected",
    [
        ([], "execution input must be a JSON object"),
        ({"tasks": GOOD["tasks"], "batchId": 5}, "batchId: must be a string, got number"),
        ({"tasks": GOOD["tasks"], "batchId": "has space"}, "batchId: must be 1-80 characters"),
        ({"batchId": "x"}, 'tasks: missing; give one payload object per task: "ReserveInventory"'),
        ({"tasks": []}, "tasks: must be an object keyed by task name, got array"),
        ({"tasks": {**GOOD["tasks"], "Typo": {}}}, "tasks.Typo: unknown task; configured tasks are"),
        ({"tasks": {"ReserveInventory": {}, "ChargePayment": 3}}, "tasks.ChargePayment: payload must be a JSON object"),
        ({"tasks": {"ReserveInventory": {}}}, "tasks.ChargePayment: missing; every configured task"),
        ({"tasks": GOOD["tasks"], "task": {}}, "task: unknown field; allowed fields are batchId, tasks, redriveOf"),
        ({"tasks": GOOD["tasks"], "redriveOf": "nope"}, "redriveOf: must be the ARN of the failed execution"),
        ({"tasks": {}, "redriveOf": "arn:aws:states:eu-west-1:123456789012:execution:sm:e1"}, "a redrive must name at least one task"),
    ],
)
def test_bad_input_names_the_field_and_the_fix(event, expected):
    with pytest.raises(InvalidInput) as err:
        validate_batch_input(event, TASKS)
    assert expected in str(err.value)


def test_all_problems_are_reported_at_once():
    with pytest.raises(InvalidInput) as err:
        validate_batch_input({"batchId": 1, "tasks": {"Nope": 1}}, TASKS)
    message = str(err.value)
    for part in ("batchId:", "tasks.Nope:", "tasks.ReserveInventory: missing", "tasks.ChargePayment: missing"):
        assert part in message


def test_a_redrive_may_run_a_subset():
    arn = "arn:aws:states:eu-west-1:123456789012:execution:sm:e1"
    out = validate_batch_input({"batchId": "b", "tasks": {"ChargePayment": {}}, "redriveOf": arn}, TASKS)
    assert out["tasks"] == {"ChargePayment": {}} and out["redriveOf"] == arn


def test_task_handler_emits_metrics_per_outcome(monkeypatch, capsys):
    """The shared task wrapper publishes TaskSucceeded / TaskFailed / TaskRetried (EMF on stdout)."""
    import json as _json

    from fanout_runtime.errors import RetryableTaskError
    from tasks import handler as worker  # the example tasks' wrapper (this app's own code)
    from tasks.handler import metrics

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "Demo")
    metrics.clear_metrics()
    capsys.readouterr()

    @worker.task_handler
    def handler(task):
        return {"ok": True}

    class Ctx:
        function_name, memory_limit_in_mb, invoked_function_arn, aws_request_id = "f", 128, "arn", "r"

    def emitted():
        lines = [line for line in capsys.readouterr().out.splitlines() if "\"_aws\"" in line]
        return {m["Name"] for line in lines for d in _json.loads(line)["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}

    event = {"batchId": "b", "task": "Demo", "input": {}, "attempt": 1}
    assert handler(event, Ctx()) == {"ok": True}
    assert emitted() == {"TaskSucceeded", "TaskRetried"}
    with pytest.raises(RetryableTaskError):
        handler({**event, "attempt": 0, "input": {"simulateFailure": {"mode": "permanent"}}}, Ctx())
    assert emitted() == {"TaskFailed"}


def test_task_log_keys_do_not_leak_into_the_next_function():
    """In Lambda one process runs one invocation; the local engine runs every handler in one
    process. A task's task_id/attempt keys must not appear on another function's log lines."""
    import io
    import json as _json
    import logging

    from tasks import handler as worker
    from tasks.handler import logger

    logger.remove_keys(["task_id", "attempt"])  # as in a fresh process (other tests log too)
    stream = io.StringIO()
    capture = logging.StreamHandler(stream)
    capture.setFormatter(logger.registered_formatter)
    logger._logger.addHandler(capture)
    level = logger._logger.level
    logger.setLevel(logging.INFO)

    @worker.task_handler
    def handler(task):
        logger.info("inside")
        return {"ok": True}

    class Ctx:
        function_name, memory_limit_in_mb, invoked_function_arn, aws_request_id = "f", 128, "arn", "r"

    try:
        handler({"batchId": "b", "task": "NotifyCustomer", "input": {}, "attempt": 2}, Ctx())
        logger.info("next function")  # the next handler logs through the same shared logger
    finally:
        logger._logger.removeHandler(capture)
        logger.setLevel(level)
    lines = [_json.loads(line) for line in stream.getvalue().splitlines()]
    inside = next(line for line in lines if line["message"] == "inside")
    after = next(line for line in lines if line["message"] == "next function")
    assert inside["task_id"] == "NotifyCustomer" and inside["attempt"] == 3
    assert "task_id" not in after and "attempt" not in after


def test_an_input_over_the_parallel_cap_is_refused_in_one_line_naming_the_cap():
    from fanout_kit.shared.limits import PARALLEL_INPUT_MAX_BYTES, payload_size

    event = {"batchId": "big", "tasks": {"ReserveInventory": {}, "ChargePayment": {"note": ""}}}
    event["tasks"]["ChargePayment"]["note"] = "x" * (PARALLEL_INPUT_MAX_BYTES - payload_size(event))
    assert validate_batch_input(event, TASKS)["tasks"] == event["tasks"]  # exactly the cap passes
    event["tasks"]["ChargePayment"]["note"] += "é"  # 2 bytes in UTF-8: the cap counts bytes
    with pytest.raises(InvalidInput) as raised:
        validate_batch_input(event, TASKS)
    message = str(raised.value)
    assert message.startswith(f"input: {PARALLEL_INPUT_MAX_BYTES + 2:,} bytes of JSON, over the ")
    assert f"{PARALLEL_INPUT_MAX_BYTES:,}-byte cap" in message and "\n" not in message


def test_a_task_output_over_its_cap_fails_the_task_as_not_retryable():
    """Past 256 KiB the Invoke connector's output fails the whole execution (not catchable): the
    wrapper refuses a large output first, so the task is dead-lettered instead."""
    from fanout_runtime.errors import NonRetryableTaskError
    from fanout_runtime.events import TASK_OUTPUT_MAX_BYTES
    from tasks import handler as worker

    @worker.task_handler
    def handler(task):
        return {"blob": "x" * TASK_OUTPUT_MAX_BYTES}

    class Ctx:
        function_name, memory_limit_in_mb, invoked_function_arn, aws_request_id = "f", 128, "arn", "r"

    with pytest.raises(NonRetryableTaskError, match=f"Demo output: .* over the {TASK_OUTPUT_MAX_BYTES:,}-byte cap"):
        handler({"batchId": "b", "task": "Demo", "input": {}, "attempt": 0}, Ctx())

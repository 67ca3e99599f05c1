"""The contract of the users' functions (issue 18, item 4): the events they receive, as
``fanout_runtime.events`` defines them, are the ones the synthesized workflows and the ledger send;
the error classes the workflows retry or dead-letter ship in the runtime layer the constructs
attach, importable on AWS from the layer alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import get_type_hints

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from fanout_kit.local.template import state_machine_definitions
from fanout_kit.shared.asl_graph import all_states
from fanout_kit import CompletionLedger, DistributedMapFanOut, FanOutTask, ParallelFanOut
from fanout_kit.shared.layer import RUNTIME_SOURCE, layer_asset_dir, runtime_layer
from fanout_runtime import errors, events
from fanout_runtime.events import (
    LedgerChildEvent,
    MapItem,
    MapWorkerEvent,
    MapWorkerPartialResult,
    MapWorkerResult,
    TaskEvent,
    parse_ledger_child_event,
    parse_map_worker_event,
    parse_task_event,
)

REGION = "eu-west-1"


def user_function(stack: Stack, name: str) -> lambda_.Function:
    return lambda_.Function(
        stack, name, runtime=lambda_.Runtime.PYTHON_3_13, handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return event\n"),
        timeout=Duration.seconds(10),
    )


def states(stack: Stack) -> dict[str, dict]:
    """Every state of every state machine of the stack (Map children included), by name."""
    found: dict[str, dict] = {}
    for asl in state_machine_definitions(Template.from_stack(stack).to_json(), REGION).values():
        found.update(all_states(asl))
    return found


@pytest.fixture(scope="module")
def workflows():
    stack = Stack(App(), "Contract")
    fn = user_function(stack, "Work")
    ParallelFanOut(stack, "Parallel", tasks=[FanOutTask("ChargePayment", fn)])
    DistributedMapFanOut(stack, "Map", worker=FanOutTask("ProcessItem", fn))
    return stack, states(stack)


def test_a_parallel_task_receives_the_task_event_with_a_0_based_attempt(workflows):
    _, by_name = workflows
    payload = by_name["Run ChargePayment"]["Parameters"]["Payload"]
    assert {k.removesuffix(".$") for k in payload} == set(get_type_hints(TaskEvent))
    assert payload["attempt.$"] == "$$.State.RetryCount"  # 0 on the first try (Step Functions' context object)
    assert payload["task"] == "ChargePayment" and "input.$" in payload  # the execution input's tasks.ChargePayment


def test_a_map_worker_receives_index_item_pairs_with_a_0_based_attempt(workflows):
    _, by_name = workflows
    for fmt in ("JSON", "CSV"):
        payload = by_name[f"Process items ({fmt})"]["Parameters"]["Payload"]
        assert {k.removesuffix(".$") for k in payload} == set(get_type_hints(MapWorkerEvent))
        assert payload["attempt.$"] == "$$.State.RetryCount" and payload["items.$"] == "$.Items"
        # the whole answer: "Item failures?" looks for batchItemFailures (MapWorkerPartialResult)
        assert by_name[f"Process items ({fmt})"]["ResultSelector"] == {"Payload.$": "$.Payload"}
        check = by_name[f"Item failures? ({fmt})"]["Choices"][0]["Not"]["Variable"]
        assert check == "$.result.Payload." + next(k for k in get_type_hints(MapWorkerPartialResult) if k != "processed")
        output = by_name[f"Items processed ({fmt})"]["Parameters"]
        assert {k.removesuffix(".$") for k in output} == set(get_type_hints(MapWorkerResult))
        assert output == {"processed.$": "$.result.Payload.processed"}  # a return without it fails the child
        selector = by_name[f"ProcessItems {fmt}"]["ItemSelector"]
        assert {k.removesuffix(".$") for k in selector} == set(get_type_hints(MapItem))
        assert selector == {"index.$": "$$.Map.Item.Index", "item.$": "$$.Map.Item.Value"}  # 0-based index


def test_the_ledger_processing_function_receives_the_ledger_child_event():
    from fanout_kit.patterns.completion_ledger.runtime import ChildMessage, invoke_processing_function

    sent = []

    class Client:
        def invoke(self, **kw):
            sent.append(json.loads(kw["Payload"]))

            class Body:
                def read(self):
                    return b"{}"

            return {"Payload": Body()}

    message = ChildMessage.parse({"batchId": "b-1", "childId": "c-7", "payload": {"n": 1}})
    invoke_processing_function(Client(), "my-function", message, attempt=2)
    (event,) = sent
    assert set(event) == set(get_type_hints(LedgerChildEvent))
    assert parse_ledger_child_event(event) == {"batchId": "b-1", "childId": "c-7", "payload": {"n": 1}, "attempt": 2}


def test_the_parse_helpers_return_the_event_or_name_the_bad_field():
    task = {"batchId": "b", "task": "T", "input": {"x": 1}, "attempt": 0, "executionArn": "arn:x"}
    assert parse_task_event(task) == task
    worker = {"batchId": "b", "items": [{"index": 0, "item": {"id": 1}}], "attempt": 1, "executionArn": "arn:x"}
    assert parse_map_worker_event(worker) == worker
    cases = [
        (parse_task_event, {**task, "attempt": -1}, r"^task event\.attempt: must be 0 or more \(0-based\)"),
        (parse_task_event, {k: v for k, v in task.items() if k != "batchId"}, r"^task event\.batchId: missing$"),
        (parse_task_event, [], r"^task event: must be a JSON object, got list$"),
        (parse_map_worker_event, {**worker, "items": [{"id": 1}]}, r"^map worker event\.items\[0\]\.item: missing"),
        (parse_map_worker_event, {**worker, "items": [{"index": True, "item": 1}]}, r"^map worker event\.items\[0\]\.index: must be int"),
        (parse_ledger_child_event, {"batchId": "b", "childId": "c", "payload": [], "attempt": 0}, r"^ledger child event\.payload: must be a JSON object"),
    ]
    for parse, event, message in cases:
        with pytest.raises(errors.NonRetryableTaskError, match=message):
            parse(event)


def test_the_runtime_layer_holds_the_package_as_lambda_loads_it(tmp_path):
    """Lambda puts a layer's python/ on sys.path; with only that (no site, no kit), a user's
    function imports the error classes and the event helpers."""
    layer = layer_asset_dir()
    shipped = sorted(p.relative_to(layer).as_posix() for p in layer.rglob("*") if p.is_file())
    assert shipped == sorted(f"python/fanout_runtime/{p.name}" for p in RUNTIME_SOURCE.glob("*.py"))
    assert all((layer / "python" / "fanout_runtime" / p.name).read_bytes() == p.read_bytes()
               for p in RUNTIME_SOURCE.glob("*.py"))
    program = ("import sys; from fanout_runtime import RetryableTaskError, NonRetryableTaskError, parse_map_worker_event;"
               "print(RetryableTaskError.__name__, NonRetryableTaskError.__name__,"
               " sorted(m for m in sys.modules if m.split('.')[0] in ('fanout_kit', 'statemachines', 'fanout_common')))")  # namespace-move: keep
    opt = tmp_path / "opt"  # a copy, as Lambda extracts it (the import writes __pycache__ there)
    shutil.copytree(layer, opt)
    done = subprocess.run([sys.executable, "-S", "-c", program], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={"PYTHONPATH": str(opt / "python"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["RetryableTaskError", "NonRetryableTaskError", "[]"]


def test_the_constructs_attach_the_runtime_layer_to_the_users_functions_once():
    stack = Stack(App(), "Layers")
    shared, mine, imported = user_function(stack, "Shared"), user_function(stack, "Mine"), lambda_.Function.from_function_arn(
        stack, "Imported", f"arn:aws:lambda:{REGION}:123456789012:function:theirs")
    ParallelFanOut(stack, "Parallel", tasks=[FanOutTask("A", shared), FanOutTask("B", imported)])
    DistributedMapFanOut(stack, "Map", worker=FanOutTask("W", shared))
    CompletionLedger(stack, "Ledger", processing_function=mine, runtime_layer=False)
    template = Template.from_stack(stack).to_json()
    (layer_id,) = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::Lambda::LayerVersion"]
    assert layer_id == stack.resolve(stack.get_logical_id(runtime_layer(stack).node.default_child))
    assert template["Resources"][layer_id]["Properties"]["CompatibleRuntimes"] == ["python3.11", "python3.12", "python3.13"]
    def layers(fn):
        return template["Resources"][stack.resolve(stack.get_logical_id(fn.node.default_child))]["Properties"].get("Layers")
    assert layers(shared) == [{"Ref": layer_id}]  # two constructs, one layer entry
    assert layers(mine) is None  # runtime_layer=False


def test_the_error_names_the_workflows_match_are_the_runtime_classes(workflows):
    _, by_name = workflows
    retriers = [r["ErrorEquals"] for r in by_name["Run ChargePayment"]["Retry"]]
    assert [errors.NON_RETRYABLE] in retriers and [errors.RETRYABLE] in retriers
    assert errors.RetryableTaskError.__name__ == "RetryableTaskError"
    assert errors.__name__ == "fanout_runtime.errors" and Path(errors.__file__).parent == RUNTIME_SOURCE
    assert events.__doc__ and "0-based" in events.__doc__

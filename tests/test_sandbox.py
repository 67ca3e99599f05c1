"""fanout_kit/local/sandbox.py: the app's own functions run as strictly as on Lambda (environment,
import path, marshalling, timeout, per-invocation logs), and the kit's in-process functions use
their own template's metrics namespace."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from fanout_kit.local.sandbox import Sandboxes, SandboxError, SandboxSpec, layer_paths

HANDLERS = '''\
import os
import sys
import time


class RetryableTaskError(Exception):
    pass


def env(event, context):
    return {k: os.environ.get(k) for k in event["keys"]}


def paths(event, context):
    return {"path": sys.path, "remaining": context.get_remaining_time_in_millis()}


def not_json(event, context):
    return {"when": time}


def fails(event, context):
    print("about to fail", event["n"])
    raise RetryableTaskError(f"busy {event['n']}")


def talks(event, context):
    print("line of", event["n"])
    return event["n"]


def sleeps(event, context):
    time.sleep(30)
'''


class Context:
    def __init__(self, request_id="req-1"):
        self.aws_request_id = request_id
        self.invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:Fn"


@pytest.fixture
def sandboxes(tmp_path):
    asset = tmp_path / "asset"
    asset.mkdir()
    (asset / "app.py").write_text(HANDLERS)
    (asset / "imports_kit.py").write_text("from fanout_kit.shared.limits import RetryableTaskError\n\ndef handler(e, c):\n    return 1\n")
    boxes = Sandboxes("eu-west-1", "123456789012")
    yield boxes, asset
    boxes.close()


def register(boxes, asset, name, handler, **kw):
    boxes.register(SandboxSpec(name, handler, asset, kw.pop("environment", {"TABLE": "orders"}), **kw))


def test_only_the_template_and_runtime_variables_reach_the_function(sandboxes, monkeypatch):
    boxes, asset = sandboxes
    monkeypatch.setenv("ORDERS_SECRET", "from-my-shell")
    register(boxes, asset, "Env", "app.env")
    keys = ["TABLE", "ORDERS_SECRET", "AWS_LAMBDA_FUNCTION_NAME", "AWS_REGION", "LAMBDA_TASK_ROOT", "_HANDLER",
            "PYTHONPATH", "HOME"]
    payload, error = boxes.invoke("Env", {"keys": keys}, Context())
    assert error is None
    assert json.loads(payload) == {"TABLE": "orders", "ORDERS_SECRET": None, "AWS_LAMBDA_FUNCTION_NAME": "Env",
                                   "AWS_REGION": "eu-west-1", "LAMBDA_TASK_ROOT": str(asset), "_HANDLER": "app.env",
                                   "PYTHONPATH": None, "HOME": None}


def test_the_path_is_the_asset_its_layers_and_the_runtime(sandboxes):
    boxes, asset = sandboxes
    register(boxes, asset, "Paths", "app.paths", timeout_s=7)
    payload, error = boxes.invoke("Paths", {}, Context())
    path = json.loads(payload)["path"]
    assert path[0] == str(asset) and path[1] == str(boxes.runtime_dir)
    assert not any("site-packages" in p or p.endswith("lambdas") for p in path)
    assert 0 < json.loads(payload)["remaining"] <= 7000


def test_a_kit_module_not_in_the_asset_is_an_import_error(sandboxes):
    boxes, asset = sandboxes
    register(boxes, asset, "Kit", "imports_kit.handler")
    payload, error = boxes.invoke("Kit", {}, Context())
    assert payload is None
    assert error["errorType"] == "Runtime.ImportModuleError"
    assert error["errorMessage"] == "Unable to import module 'imports_kit': No module named 'fanout_kit'"


def test_a_result_that_is_not_json_is_a_marshal_error(sandboxes):
    boxes, asset = sandboxes
    register(boxes, asset, "NotJson", "app.not_json")
    _, error = boxes.invoke("NotJson", {}, Context())
    assert error["errorType"] == "Runtime.MarshalError"
    assert error["errorMessage"].startswith("Unable to marshal response: Object of type module is not JSON serializable")


def test_an_exception_is_reported_by_its_name_and_logged_in_its_own_invocation(sandboxes):
    boxes, asset = sandboxes
    register(boxes, asset, "Fails", "app.fails")
    register(boxes, asset, "Talks", "app.talks")
    _, error = boxes.invoke("Fails", {"n": 1}, Context("r-1"))
    assert (error["errorType"], error["errorMessage"]) == ("RetryableTaskError", "busy 1")
    assert boxes.invoke("Talks", {"n": 2}, Context("r-2")) == ("2", None)
    assert boxes.invoke("Talks", {"n": 3}, Context("r-3")) == ("3", None)
    first, second, third = boxes.logs
    assert first.text.startswith("START RequestId: r-1 Version: $LATEST\nabout to fail 1\n")
    assert "Traceback" not in first.text and "END RequestId: r-1\nREPORT RequestId: r-1\tDuration:" in first.text
    assert "line of 2" in second.text and "line of 3" not in second.text and "about to fail" not in second.text
    assert "line of 3" in third.text and "line of 2" not in third.text
    assert boxes.started == 2  # Talks' environment was reused while warm


def test_a_function_past_its_timeout_is_stopped(sandboxes):
    boxes, asset = sandboxes
    register(boxes, asset, "Sleeps", "app.sleeps", timeout_s=0.5)
    _, error = boxes.invoke("Sleeps", {}, Context("r-9"))
    assert error == {"errorType": "Sandbox.Timedout",
                     "errorMessage": "RequestId: r-9 Error: Task timed out after 0.50 seconds"}


def test_layers_of_the_apps_assets_are_on_the_path_and_an_unknown_arn_is_refused(tmp_path):
    template = {"Resources": {"Shared": {"Type": "AWS::Lambda::LayerVersion",
                                         "Properties": {"Content": {"S3Key": "abc.zip"}}}}}
    (tmp_path / "asset.abc" / "python").mkdir(parents=True)
    paths = layer_paths([{"Ref": "Shared"}], template, tmp_path, lambda v: v, tmp_path / "pt", "Fn")
    assert paths[0] == tmp_path / "asset.abc" / "python"
    powertools = "arn:aws:lambda:eu-west-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-x86_64:27"
    assert layer_paths([powertools], template, tmp_path, lambda v: v, tmp_path / "pt", "Fn") == [tmp_path / "pt"]
    with pytest.raises(SandboxError, match="layer arn:aws:lambda:eu-west-1:111122223333:layer:other:1 is not available locally"):
        layer_paths(["arn:aws:lambda:eu-west-1:111122223333:layer:other:1"], template, tmp_path, lambda v: v,
                    tmp_path / "pt", "Fn")


def test_a_kit_function_without_a_metrics_namespace_is_a_stack_defect(dev_app):
    from fanout_kit.local.engine import LocalEngine, StackDefect

    templates = copy.deepcopy(dev_app.templates)
    stack = dev_app.workflow_stacks["parallel"]
    (lid, function), *_ = [(k, r) for k, r in templates[stack]["Resources"].items()
                           if r["Type"] == "AWS::Lambda::Function" and r["Properties"]["Handler"] == "validate_input.handler"]
    del function["Properties"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"]
    broken = dataclasses.replace(dev_app, templates=templates)
    with pytest.raises(StackDefect, match=rf"function {lid} \(validate_input.handler\) .* has no POWERTOOLS_METRICS_NAMESPACE"):
        with LocalEngine(broken, workflows=("parallel",)):
            pass


def test_the_ledger_never_reruns_work_for_a_namespace_read_before_the_stack_set_it(dev_app, monkeypatch):
    """The issue's Python-API run: the kit's metrics were created before the engine set the stack's
    variables (no namespace) and metrics are on; each consumer invocation uses its function's own
    namespace, so no batch fails on the flush and no child is redelivered."""
    from fanout_kit.local.ledger_run import run_ledger_batch
    from fanout_kit.shared import observability

    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setattr(observability.ledger_metrics, "namespace", None)
    errors = []
    facts = run_ledger_batch(dev_app, children=8, fail=[], concurrency=2, duplicate=False,
                            visibility_timeout=60,  # no redelivery of a slow batch on a loaded machine
                            on_engine=lambda engine: errors.extend(r.error_type for r in engine.router.invocations if r.error_type))
    assert facts["ledger_status"] == "COMPLETED"
    assert errors == []
    assert facts["update_final_status_invocations"] == 1


def test_an_item_fault_of_a_sandboxed_map_worker_fails_that_item_only(tmp_path):
    """``fanout run --app --fail-item 2=transient`` on an app whose Map worker is its own (sandboxed)
    function: the worker runs the other items, RetryFailedItems gets the child's whole batch (the
    fault is the worker's, not injected into RetryFailedItems' own event) and retries item 2 alone,
    so the batch succeeds. Before the fix RetryFailedItems got items [0, 1, 3, 4] and dead-lettered
    the batch: InvalidBatchItemFailures (2 is not an index of this batch)."""
    from aws_cdk import App, Duration, Stack
    from aws_cdk import aws_lambda as lambda_

    from fanout_kit import DistributedMapFanOut, FanOutTask
    from fanout_kit.local.app_source import load_app
    from fanout_kit.local.engine import LocalEngine
    from fanout_kit.local.moto_lambda import InjectedFault

    functions = tmp_path / "functions"
    functions.mkdir()
    (functions / "items.py").write_text(
        'def handler(event, context):\n    return {"processed": [entry["index"] for entry in event["items"]]}\n'
    )
    app = App(outdir=str(tmp_path / "cdk.out"))
    stack = Stack(app, "Items")
    worker = lambda_.Function(stack, "ItemWorker", runtime=lambda_.Runtime.PYTHON_3_13, handler="items.handler",
                              code=lambda_.Code.from_asset(str(functions)), timeout=Duration.seconds(10))
    DistributedMapFanOut(stack, "Map", worker=FanOutTask("Item", worker))
    app.synth()
    synthesized, _ = load_app(tmp_path / "cdk.out", kind="map")
    items = [{"n": n} for n in range(5)]
    with LocalEngine(synthesized, workflows=("map",), sleep_retries=False) as engine:
        functions = engine.router.functions.values()
        (worker_id,) = [f.name for f in functions if f.sandboxed]
        (retry_id,) = [f.name for f in functions if f.handler == "retry_failed_items.handler"]
        engine.router.item_faults[2] = InjectedFault("transient")
        result = engine.run("map", {"batchId": "one-transient", "items": items})
        retry_events = [r.event for r in engine.router.invocations if r.function == retry_id]
        worker_items = [[e["index"] for e in r.event["items"]] for r in engine.router.invocations if r.function == worker_id]
    assert [[e["index"] for e in event["items"]] for event in retry_events] == [[0, 1, 2, 3, 4]]
    assert worker_items == [[0, 1, 2, 3, 4], [2]]  # as invoked: the whole batch, then item 2 retried alone
    assert result.status == "SUCCEEDED", result.history[-1]

"""A task names the exceptions it retries and the ones it never retries (issue 18, item 4):
``FanOutTask(retry_on=[...], never_retry=[...])`` and cdk.json's per-task ``retryOn``/``neverRetry``,
checked with one-line ConfigErrors, and the synthesized Retry rules reflect them (snapshots)."""

from __future__ import annotations

import copy
import json

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from syrupy.extensions.json import JSONSnapshotExtension

from fanout_kit.local.template import state_machine_definitions
from fanout_kit.shared.asl_graph import all_states
from fanout_kit import ConfigError, DistributedMapFanOut, FanOutTask, ParallelFanOut
from fanout_runtime.errors import KIT_ERROR_NAMES
from stacks.config import CDK_JSON, load_environment
from fanout_kit.patterns.distributed_map.definition import DEAD_LETTER_SEND_FAILED
from fanout_kit.shared.retry_policy import RESERVED_ERROR_NAMES

REGION = "eu-west-1"


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def fn(stack: Stack, name: str = "Work") -> lambda_.Function:
    return lambda_.Function(stack, name, runtime=lambda_.Runtime.PYTHON_3_13, handler="index.handler",
                            code=lambda_.Code.from_inline("x"), timeout=Duration.seconds(10))


def states_of(stack: Stack) -> dict[str, dict]:
    """Every state of every state machine of the stack (Map children included), by name."""
    found: dict[str, dict] = {}
    for asl in state_machine_definitions(Template.from_stack(stack).to_json(), REGION).values():
        found.update(all_states(asl))
    return found


def test_a_parallel_task_retries_and_never_retries_the_names_it_gives(snapshot_json):
    stack = Stack(App(), "Names")
    ParallelFanOut(stack, "Orders", tasks=[
        FanOutTask("Charge", fn(stack), retry_on=["ThrottlingException", "com.example.Busy"], never_retry=["CardDeclined"]),
        FanOutTask("Ship", fn(stack, "Ship")),
    ])
    states = states_of(stack)
    charge, ship = states["Run Charge"], states["Run Ship"]
    assert charge["Retry"][0] == {"ErrorEquals": ["NonRetryableTaskError", "CardDeclined"], "MaxAttempts": 0}
    assert charge["Retry"][-1]["ErrorEquals"] == ["RetryableTaskError", "ThrottlingException", "com.example.Busy"]
    assert charge["Retry"][-1]["MaxAttempts"] == 4  # the retryable policy
    assert [ship["Retry"][0]["ErrorEquals"], ship["Retry"][-1]["ErrorEquals"]] == [["NonRetryableTaskError"], ["RetryableTaskError"]]
    assert charge["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "DeadLetter Charge"}]  # the rest: DLQ
    assert {"Retry": charge["Retry"], "Catch": charge["Catch"]} == snapshot_json(name="parallel-task")


def test_a_map_worker_retries_the_names_it_gives(snapshot_json):
    stack = Stack(App(), "MapNames")
    DistributedMapFanOut(stack, "Items", worker=FanOutTask("ProcessItem", fn(stack), retry_on=["ThrottlingException"],
                                                           never_retry=["ValidationError"]))
    states = states_of(stack)
    for fmt in ("JSON", "CSV"):
        process = states[f"Process items ({fmt})"]
        assert process["Retry"][0]["ErrorEquals"] == ["NonRetryableTaskError", "ValidationError"]
        assert process["Retry"][-1]["ErrorEquals"] == ["RetryableTaskError", "ThrottlingException"]
    assert {"Retry": states["Process items (JSON)"]["Retry"]} == snapshot_json(name="map-worker")


@pytest.mark.parametrize(("task", "message"), [
    (dict(retry_on="ThrottlingException"),
     r"^tasks\[0\]\.retry_on: must be a list of error names \(exception class names\), got 'ThrottlingException'$"),
    (dict(retry_on=["Throttling Exception"]), r"^tasks\[0\]\.retry_on: 'Throttling Exception' is not an error name; "),
    (dict(never_retry=["States.ALL"]), r"^tasks\[0\]\.never_retry: States\.ALL is the kit's or Step Functions' own error name"),
    (dict(retry_on=["Lambda.ServiceException"]), r"^tasks\[0\]\.retry_on: Lambda\.ServiceException is the kit's"),
    (dict(retry_on=["RetryableTaskError"]), r"^tasks\[0\]\.retry_on: RetryableTaskError is the kit's"),
    (dict(never_retry=["A", "A"]), r"^tasks\[0\]\.never_retry: A is listed twice$"),
    (dict(retry_on=["A", "B"], never_retry=["B"]), r"^tasks\[0\]: B in both retry_on and never_retry; keep each name in one list$"),
])
def test_bad_error_names_are_refused_in_one_line_naming_the_prop(task, message):
    stack = Stack(App(), "Bad")
    with pytest.raises(ConfigError, match=message):
        ParallelFanOut(stack, "Orders", tasks=[FanOutTask("Charge", fn(stack), **task)])


def test_the_reserved_names_are_the_kits_own():
    assert set(KIT_ERROR_NAMES) <= set(RESERVED_ERROR_NAMES) and DEAD_LETTER_SEND_FAILED in RESERVED_ERROR_NAMES


def cdk_json_context() -> dict:
    return json.loads(CDK_JSON.read_text())["context"]


def test_cdk_json_tasks_name_their_error_names():
    context = cdk_json_context()
    context["fanout:tasks"][1] |= {"retryOn": ["ThrottlingException"], "neverRetry": ["CardDeclined"]}
    context["fanout:mapWorker"] = {**context["fanout:mapWorker"], "retryOn": ["SlowDown"]}
    cfg = load_environment(context, "dev")
    charge = cfg.tasks[1]
    assert (charge.name, charge.retry_on, charge.never_retry) == ("ChargePayment", ("ThrottlingException",), ("CardDeclined",))
    assert cfg.map_worker.retry_on == ("SlowDown",) and cfg.tasks[0].retry_on == ()


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c["fanout:tasks"][1].update(retryOn=["ok", "Not ok"]),
     r"^context\.fanout:tasks\[1\]\.retryOn: 'Not ok' is not an error name"),
    (lambda c: c["fanout:tasks"][1].update(retryOn=["X"], neverRetry=["X"]),
     r"^context\.fanout:tasks\[1\]: X in both retryOn and neverRetry"),
    (lambda c: c["fanout:tasks"][0].update(retry_on=["X"]),
     r"^context\.fanout:tasks\[0\]: unknown setting\(s\) retry_on; known: description, handler, name, neverRetry, retry, retryOn$"),
    (lambda c: c["fanout:mapWorker"].update(neverRetry=["States.Timeout"]),
     r"^context\.fanout:mapWorker\.neverRetry: States\.Timeout is the kit's"),
])
def test_bad_cdk_json_error_names_are_refused_naming_the_setting(edit, message):
    context = copy.deepcopy(cdk_json_context())
    edit(context)
    with pytest.raises(ConfigError, match=message):
        load_environment(context, "dev")

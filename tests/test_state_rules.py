"""Rules every state of both workflows must follow, checked on the synthesized templates of every
environment, walking the whole ASL (Parallel branches and Map ItemProcessors included)."""

from __future__ import annotations

import re

import pytest

from fanout_kit.local.template import state_machine_definitions
from fanout_kit.shared import asl_graph
from fanout_kit.shared.states import TASK_TIMEOUT_MARGIN_SECONDS
from tests.conftest import ENVIRONMENTS

WORKFLOWS = ("parallel", "map")
# Lambda's init phase may take up to 10 s on demand and is not counted in the function's timeout.
LAMBDA_INIT_SECONDS = 10


def lambda_tasks(asl):
    for scope, name, state in asl_graph.iter_states(asl):
        if state.get("Type") == "Task" and state.get("Resource", "").startswith("arn:aws:states:::lambda:invoke"):
            yield f"{scope}{name}", state


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_every_lambda_task_waits_longer_than_its_function_may_run(synthesized, env_name, workflow):
    app = synthesized(env_name)
    template = app.template(workflow)
    (asl,) = state_machine_definitions(template, app.region).values()
    checked = 0
    for path, state in lambda_tasks(asl):
        function_lid = state["Parameters"]["FunctionName"].rsplit(":", 1)[-1]
        function_timeout = template["Resources"][function_lid]["Properties"].get("Timeout", 3)
        assert "TimeoutSeconds" in state, f"{path}: no TimeoutSeconds"
        margin = state["TimeoutSeconds"] - function_timeout
        assert margin > LAMBDA_INIT_SECONDS, (
            f"{path}: TimeoutSeconds {state['TimeoutSeconds']} vs function {function_lid} timeout "
            f"{function_timeout}: the state could time out a run that is still finishing"
        )
        assert margin == TASK_TIMEOUT_MARGIN_SECONDS, path  # derived, not hand-set
        checked += 1
    assert checked >= (5 if workflow == "parallel" else 4)


# AWS lists the intrinsic functions a Fail state's CausePath / ErrorPath may use
# (https://docs.aws.amazon.com/step-functions/latest/dg/state-fail.html).
FAIL_PATH_INTRINSICS = {
    "States.Format", "States.JsonToString", "States.ArrayGetItem", "States.Base64Encode",
    "States.Base64Decode", "States.Hash", "States.UUID",
}
INTRINSIC = re.compile(r"\b(States\.[A-Za-z0-9]+)\s*\(")


def intrinsics_in(path: str) -> set[str]:
    """Every intrinsic function a path expression calls, nested ones included (string literals
    in single quotes are skipped)."""
    outside_literals = re.sub(r"'(?:\\.|[^'\\])*'", "''", path)
    return set(INTRINSIC.findall(outside_literals))


def test_intrinsics_in_finds_nested_calls():
    old = "States.Format('{} of 3 failed: {}', States.ArrayLength($.f), States.JsonToString($.f))"
    assert intrinsics_in(old) == {"States.Format", "States.ArrayLength", "States.JsonToString"}
    assert intrinsics_in("States.Format('States.ArrayLength() {}', $.x)") == {"States.Format"}


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_fail_states_use_only_the_intrinsics_aws_allows_there(synthesized, env_name, workflow):
    app = synthesized(env_name)
    (asl,) = state_machine_definitions(app.template(workflow), app.region).values()
    fails = [(f"{scope}{name}", s) for scope, name, s in asl_graph.iter_states(asl) if s["Type"] == "Fail"]
    assert fails
    for path, state in fails:
        for field in ("CausePath", "ErrorPath"):
            if field in state:
                assert intrinsics_in(state[field]) <= FAIL_PATH_INTRINSICS, f"{path}.{field}: {state[field]}"


KIT_LAMBDA_STEPS = {"ValidateInput", "PrepareBatch", "UpdateFinalStatus", "ForwardFailedItems"}
# Kit steps without a Retry: RetryFailedItems invokes the worker itself (a retry would run the
# worker's items again, and its time is what the Express child has left); its failure fails the
# batch closed (the parent forwards the whole batch).
NO_RETRY_STEPS = {"Retry failed items (JSON)", "Retry failed items (CSV)"}


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("workflow", WORKFLOWS)
def test_an_ambiguous_lambda_outcome_is_never_retried_as_a_transient_error(synthesized, env_name, workflow):
    """AWS reports a function timeout, an out-of-memory error and a crashed runtime as Lambda.Unknown
    (Step Functions guide, "Handle Lambda service exceptions"; the runtime's names: Sandbox.Timedout,
    Runtime.OutOfMemory, Runtime.ExitError): the work may be done. A user task retries them only by
    its own ``ambiguous`` Retrier (0 by default, at most MAX_AMBIGUOUS_ATTEMPTS), which comes before
    the transient one; the kit's own idempotent steps retry them with their status-write policy."""
    from fanout_kit.shared.retry_policy import AMBIGUOUS_ERRORS, LAMBDA_TRANSIENT_ERRORS, MAX_AMBIGUOUS_ATTEMPTS

    app = synthesized(env_name)
    (asl,) = state_machine_definitions(app.template(workflow), app.region).values()
    user_tasks = 0
    for path, state in lambda_tasks(asl):
        if path.split("/")[-1] in NO_RETRY_STEPS:
            assert "Retry" not in state and state["Catch"][0]["ErrorEquals"] == ["States.ALL"], path
            continue
        retriers = state["Retry"]
        matched = [r for r in retriers if set(r["ErrorEquals"]) & set(AMBIGUOUS_ERRORS)]
        assert len(matched) == 1, f"{path}: ambiguous errors in {len(matched)} Retriers"
        assert set(matched[0]["ErrorEquals"]) >= set(AMBIGUOUS_ERRORS), path
        if path.split("/")[-1] in KIT_LAMBDA_STEPS:
            assert set(matched[0]["ErrorEquals"]) == set(AMBIGUOUS_ERRORS) | set(LAMBDA_TRANSIENT_ERRORS), path
            continue
        user_tasks += 1
        assert matched[0]["ErrorEquals"] == list(AMBIGUOUS_ERRORS), path  # its own Retrier
        assert matched[0]["MaxAttempts"] == 0, f"{path}: cdk.json retries ambiguous outcomes by default"
        assert matched[0]["MaxAttempts"] <= MAX_AMBIGUOUS_ATTEMPTS
        assert retriers.index(matched[0]) < min(
            i for i, r in enumerate(retriers) if set(r["ErrorEquals"]) & set(LAMBDA_TRANSIENT_ERRORS)
        ), path
    assert user_tasks == (3 if workflow == "parallel" else 2)

"""Lambda errors as AWS reports them (issue 19 §2): a task that timed out, ran out of memory or
whose runtime crashed may have done its work (charged the card), so it is not retried unless the
``ambiguous`` retry setting says so; the Lambda service's own transient errors are retried as before.

AWS's Step Functions guide ("Handle Lambda service exceptions"): "Unhandled errors in Lambda are
reported as Lambda.Unknown in the error output. These include out-of-memory errors and function
timeouts." The Lambda runtime's own names are Sandbox.Timedout, Runtime.OutOfMemory and
Runtime.ExitError. The engine reports either (``LocalEngine(unhandled_errors=...)``)."""

import copy
import json

import pytest

from fanout_kit.local.engine import LocalEngine
from fanout_kit.local.history import task_attempts, task_errors
from fanout_kit.local.template import synthesize
from stacks.config import read_cdk_context
from tests.e2e.conftest import assert_no_denied_calls

RUNTIME_NAME = {"timeout": "Sandbox.Timedout", "oom": "Runtime.OutOfMemory", "crash": "Runtime.ExitError"}


@pytest.mark.parametrize("mode", sorted(RUNTIME_NAME))
def test_a_task_stopped_by_lambda_is_dead_lettered_after_one_attempt(engine, batch, mode):
    result = engine.run("parallel", batch(f"stopped-{mode}", ChargePayment={"mode": mode}))
    assert task_attempts(result.history)["Run ChargePayment"] == 1
    assert task_errors(result.history)["Run ChargePayment"] == [RUNTIME_NAME[mode]]
    (message,) = engine.dlq_messages()
    assert (message["task"], message["error"]) == ("ChargePayment", RUNTIME_NAME[mode])
    assert message["retryPolicy"]["ambiguousMaxAttempts"] == 0
    assert result.status == "FAILED" and result.error == "BatchFailed"
    assert engine.retry_clock.waits == []


def test_lambda_unknown_as_the_step_functions_guide_names_it_is_not_retried(dev_app, batch):
    """The old code retried Lambda.Unknown as a transient error (4 attempts in dev, 7 in prod)."""
    with LambdaUnknownEngine(dev_app) as engine:
        result = engine.run("parallel", batch("unknown-timeout", ChargePayment={"mode": "timeout"}))
        assert task_attempts(result.history)["Run ChargePayment"] == 1
        assert task_errors(result.history)["Run ChargePayment"] == ["Lambda.Unknown"]
        (message,) = engine.dlq_messages()
        assert message["error"] == "Lambda.Unknown" and "Task timed out after" in message["cause"]
        assert result.status == "FAILED"
        assert_no_denied_calls(engine)


def LambdaUnknownEngine(app):  # noqa: N802 - reads as the engine it makes
    return LocalEngine(app, sleep_retries=False, unhandled_errors="Lambda.Unknown")


def test_the_ambiguous_setting_retries_a_timed_out_task_that_many_times(tmp_path, batch):
    """cdk.json retry.ambiguous.maxAttempts 2: a task that times out every time runs 3 times, then is
    dead-lettered, whichever name AWS reports. (The Map child keeps 0: its EXPRESS budget, 300 s,
    has no room for two more 50 s attempts, and the synth says so.)"""
    context = copy.deepcopy(read_cdk_context())
    context["fanout:environments"]["dev"]["retry"]["ambiguous"]["maxAttempts"] = 2
    context["fanout:environments"]["dev"]["map"]["retry"]["ambiguous"] = {"maxAttempts": 0}
    app = synthesize("dev", tmp_path, context=context)
    with LambdaUnknownEngine(app) as engine:
        result = engine.run("parallel", batch("retried-timeout", NotifyCustomer={"mode": "timeout"}))
        assert task_attempts(result.history)["Run NotifyCustomer"] == 3
        assert task_errors(result.history)["Run NotifyCustomer"] == ["Lambda.Unknown"] * 3
        (message,) = engine.dlq_messages()
        assert message["task"] == "NotifyCustomer" and message["retryPolicy"]["ambiguousMaxAttempts"] == 2
        assert len(engine.retry_clock.waits) == 2
        assert result.status == "FAILED"
        assert_no_denied_calls(engine)
    with LocalEngine(app, sleep_retries=False) as engine:
        result = engine.run("parallel", batch("retried-oom", ReserveInventory={"mode": "oom"}))
        assert task_errors(result.history)["Run ReserveInventory"] == ["Runtime.OutOfMemory"] * 3


def test_the_kit_s_own_idempotent_steps_retry_an_ambiguous_outcome(engine, batch):
    """UpdateFinalStatus is a conditional write: a timeout (its response lost) is retried and the
    batch finalizes once."""
    from fanout_kit.local.moto_lambda import FunctionTimedOut

    lid = engine.function_id("UpdateFinalStatus")
    calls = []
    real = engine.router._handler

    def flaky(fn):
        handler = real(fn)
        if fn.name != lid:
            return handler

        def once_timed_out(event, context):
            calls.append(event)
            result = handler(event, context)
            if len(calls) == 1:
                raise FunctionTimedOut(30)  # it wrote SUCCEEDED, then Lambda stopped it
            return result

        return once_timed_out

    engine.router._handler = flaky
    result = engine.run("parallel", batch("finalize-timeout"))
    assert result.status == "SUCCEEDED"
    assert task_errors(result.history)["UpdateFinalStatus"] == ["Sandbox.Timedout"]
    assert result.output["finalStatus"]["outcome"] == "ALREADY_FINALIZED"
    assert engine.status_record("finalize-timeout")["finalizedBy"] == result.arn


@pytest.mark.parametrize(
    "override, message",
    [
        ({"maxAttempts": 4}, "retry.ambiguous.maxAttempts: at most 3"),
        ({"maxAttempts": -1}, "retry.ambiguous.maxAttempts: must be a whole number"),
        ({"maxAttempts": "2"}, "retry.ambiguous.maxAttempts: must be a whole number"),
    ],
)
def test_a_wrong_ambiguous_setting_is_one_line_naming_it(override, message):
    from stacks.config import load_environment
    from fanout_kit.shared.checks import ConfigError

    context = copy.deepcopy(read_cdk_context())
    context["fanout:environments"]["prod"]["retry"]["ambiguous"].update(override)
    with pytest.raises(ConfigError) as raised:
        load_environment(context, "prod")
    text = str(raised.value)
    assert message in text and "\n" not in text
    assert text.startswith("context.fanout:environments.prod.retry.ambiguous.")
    # per task and per Map worker too
    context = copy.deepcopy(read_cdk_context())
    context["fanout:tasks"][1]["retry"]["ambiguous"] = {"maxAttempts": 9}
    with pytest.raises(ConfigError, match=r"fanout:tasks\[1\]\.retry\.ambiguous\.maxAttempts: at most 3"):
        load_environment(context, "prod")
    context = copy.deepcopy(read_cdk_context())
    context["fanout:environments"]["dev"]["map"]["retry"]["ambiguous"] = {"maxAttempts": 9}
    with pytest.raises(ConfigError, match=r"map\.retry\.ambiguous\.maxAttempts: at most 3"):
        load_environment(context, "dev")


def test_the_construct_props_check_ambiguous_too():
    from fanout_kit.shared.settings import WorkflowRetries
    from fanout_kit.shared.checks import ConfigError
    from fanout_kit.shared.retry_policy import RetrySettings

    assert WorkflowRetries().ambiguous.max_attempts == 0
    with pytest.raises(ConfigError, match=r"^retries\.ambiguous\.maxAttempts: at most 3"):
        WorkflowRetries(ambiguous=RetrySettings(1, 5, 2.0, 10))
    assert json.dumps(RetrySettings(1, 3, 2.0, 10)._to_asl(["Lambda.Unknown"]))  # 3 is allowed

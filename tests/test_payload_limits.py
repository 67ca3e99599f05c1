"""The local engine holds every state to AWS's payload limit as AWS does (fanout_kit/local/payload_limits.py):
262,144 bytes of UTF-8 JSON pass, one more fails with the terminal States.DataLimitExceeded, which
``States.ALL`` neither retries nor catches ("Handling errors in Step Functions workflows")."""

import json

import pytest

from fanout_kit.local.engine import LocalEngine
from fanout_kit.local.history import states_entered
from fanout_kit.shared.limits import STATE_PAYLOAD_LIMIT_BYTES, payload_size


@pytest.fixture(scope="module")
def engine(dev_app):
    with LocalEngine(dev_app, sleep_retries=False, record_calls=False) as local:
        yield local


def run(engine, name: str, definition: dict, execution_input: dict):
    arn = engine.sfn.create_state_machine(
        name=name, definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/payload-test"
    )["stateMachineArn"]
    engine.payload_violations.clear()
    return engine.wait(engine.sfn.start_execution(stateMachineArn=arn, input=json.dumps(execution_input))["executionArn"])


def doubling(pad: int) -> dict:
    """A Pass whose Parameters double the input's string ``s`` and add ``pad`` bytes."""
    return {"Type": "Pass", "Parameters": {"a.$": "$.s", "b.$": "$.s", "p": "p" * pad}}


SIDE = 100_000


def pad_for(total: int) -> int:
    """The pad that makes doubling()'s output exactly ``total`` bytes."""
    return total - payload_size({"a": "s" * SIDE, "b": "s" * SIDE, "p": ""})


@pytest.mark.parametrize("extra, status", [(0, "SUCCEEDED"), (1, "FAILED")])
def test_the_limit_is_262144_bytes_inclusive(engine, extra, status):
    definition = {"StartAt": "Double", "States": {"Double": {**doubling(pad_for(STATE_PAYLOAD_LIMIT_BYTES + extra)), "End": True}}}
    result = run(engine, f"Boundary{extra}", definition, {"s": "s" * SIDE})
    assert result.status == status
    if status == "FAILED":
        assert result.error == "States.DataLimitExceeded"
        (violation,) = engine.payload_violations
        assert (violation.state, violation.size) == ("Double", STATE_PAYLOAD_LIMIT_BYTES + 1)
    else:
        assert payload_size(result.output) == STATE_PAYLOAD_LIMIT_BYTES


def test_states_all_neither_retries_nor_catches_it(engine):
    too_big = pad_for(STATE_PAYLOAD_LIMIT_BYTES + 1)
    definition = {
        "StartAt": "Guarded",
        "States": {
            "Guarded": {
                "Type": "Parallel",
                "Branches": [{"StartAt": "Double", "States": {"Double": {**doubling(too_big), "End": True}}}],
                "Retry": [{"ErrorEquals": ["States.ALL"], "MaxAttempts": 2, "IntervalSeconds": 1}],
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Succeed"},
        },
    }
    result = run(engine, "NotCaught", definition, {"s": "s" * SIDE})
    # the branch's error keeps its name through the Parallel state; no retry, no Catch
    assert (result.status, result.error) == ("FAILED", "States.DataLimitExceeded")
    assert [v.state for v in engine.payload_violations] == ["Double"]
    assert "Caught" not in states_entered(result.history)
    assert sum(e["type"] == "ParallelStateStarted" for e in result.history) == 1


def test_the_input_after_parameters_is_checked_too(engine):
    """A Task whose Parameters are over the limit fails before anything is called."""
    definition = {
        "StartAt": "Send",
        "States": {
            "Send": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage",
                "Parameters": {"QueueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/nowhere",
                               "MessageBody": {"a.$": "$.s", "b.$": "$.s", "c.$": "$.s"}},
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
                "End": True,
            },
            "Caught": {"Type": "Succeed"},
        },
    }
    result = run(engine, "BigParameters", definition, {"s": "s" * SIDE})
    assert (result.status, result.error) == ("FAILED", "States.DataLimitExceeded")
    (violation,) = engine.payload_violations
    assert (violation.state, violation.what) == ("Send", "input after Parameters")

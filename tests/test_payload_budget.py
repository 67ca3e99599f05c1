"""The payload budget (fanout_kit/shared/payload_budget.py): JSONPath's data rules, and every state of
the synthesized workflows within AWS's 262,144 bytes in the worst case (`python -m fanout_kit.cli.budget`)."""

import pytest

from fanout_kit.cli.budget import largest_cap, workflow_budget
from fanout_kit.shared.limits import (
    CAUSE_MAX_BYTES,
    MAP_INPUT_MAX_BYTES,
    PARALLEL_INPUT_MAX_BYTES,
    STATE_PAYLOAD_LIMIT_BYTES,
)
from fanout_kit.shared.payload_budget import (
    Budget,
    Leaf,
    Obj,
    PayloadBudgetError,
    kit_function_outputs,
    payload_budget,
    size,
)
from tests.conftest import ENVIRONMENTS


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("workflow", ["parallel", "map"])
def test_every_state_of_the_synthesized_workflows_fits_in_the_worst_case(synthesized, env_name, workflow):
    budget = workflow_budget(synthesized(env_name), workflow)  # raises if one can be over
    worst = budget.largest(1)[0]
    assert worst.worst <= STATE_PAYLOAD_LIMIT_BYTES
    if workflow == "parallel":
        # a failed task's DLQ send: its own payload and a full-size Cause, never the other payloads
        assert worst.state.startswith("DeadLetter ")
        assert worst.worst < PARALLEL_INPUT_MAX_BYTES + CAUSE_MAX_BYTES + 8192


def test_the_parallel_cap_is_below_the_largest_that_fits(dev_app):
    assert PARALLEL_INPUT_MAX_BYTES <= largest_cap(dev_app, "parallel") < PARALLEL_INPUT_MAX_BYTES + 16_384
    assert MAP_INPUT_MAX_BYTES <= largest_cap(dev_app, "map")


def run(states: dict, input_bytes: int = 1000) -> Budget:
    budget = Budget(Leaf(input_bytes), kit_function_outputs(input_cap=input_bytes))
    return payload_budget({"StartAt": next(iter(states)), "States": states}, budget)


def sizes(budget: Budget) -> dict:
    return {s.state: s for s in budget.sizes}


def test_a_catch_merges_the_error_into_the_raw_input_at_its_result_path():
    send = {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "Parameters": {"MessageBody.$": "$.small"},
            "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "After"}], "End": True}
    budget = run({"Send": send, "After": {"Type": "Succeed"}}, input_bytes=100_000)
    after = sizes(budget)["After"]
    assert 100_000 + CAUSE_MAX_BYTES < after.input < 100_000 + CAUSE_MAX_BYTES + 2_000
    assert sizes(budget)["Send"].effective_input <= 100_000 + 20  # Parameters: the part it names


def test_result_path_null_keeps_only_the_input_and_dollar_keeps_only_the_result():
    catch = lambda path: [{"ErrorEquals": ["States.ALL"], "ResultPath": path, "Next": "After"}]  # noqa: E731
    base = {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "Parameters": {}, "End": True}
    discard = run({"Send": {**base, "Catch": catch(None)}, "After": {"Type": "Succeed"}}, 100_000)
    assert sizes(discard)["After"].input == 100_000
    replace = run({"Send": {**base, "Catch": catch("$")}, "After": {"Type": "Succeed"}}, 100_000)
    assert sizes(replace)["After"].input < CAUSE_MAX_BYTES + 2_000


def test_result_selector_and_output_path_bound_what_a_lambda_returns():
    invoke = {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke", "Parameters": {"x.$": "$"},
              "ResultSelector": {"ok": True}, "ResultPath": "$.r", "End": True}
    state = sizes(run({"Run T": invoke}))["Run T"]
    assert state.result > 64 * 1024  # the connector output: the task's output cap and the envelope
    assert state.output == size(Obj({"r": Obj({"ok": Leaf(4)})}, rest=1000))


def test_paths_are_kept_apart_so_two_catches_never_add_up():
    states = {
        "A": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "Parameters": {},
              "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.a", "Next": "B"}], "Next": "B"},
        "B": {"Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage", "Parameters": {},
              "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.b", "Next": "End"}], "Next": "End"},
        "End": {"Type": "Succeed"},
    }
    budget = run(states, 10_000)
    # A's error and B's error can both be in the state (A failed, then B failed): two causes
    assert sizes(budget)["End"].input > 10_000 + 2 * CAUSE_MAX_BYTES


def test_a_state_over_the_limit_is_named():
    states = {"Twice": {"Type": "Pass", "Parameters": {"a.$": "$", "b.$": "$"}, "End": True}}
    with pytest.raises(PayloadBudgetError, match="state 'Twice' can reach 300,0"):
        run(states, 150_000)

"""A failed task near the payload limit, end to end on the local engine, which holds every state to
AWS's 262,144 bytes (fanout_kit/local/payload_limits.py).

The Catch of a task merges its error, a Cause of up to 32,768 characters, into the branch's
state. When that state was the whole execution input (the kit accepted up to 256 KiB), an input
near the limit overflowed at the merge: ``States.DataLimitExceeded``, which no Catch catches, the
siblings cancelled and no DLQ message. Each branch now keeps only the ids and its own payload
(``Input T``) before its task runs.
"""

import json

from fanout_kit.local.history import states_entered, task_attempts
from fanout_kit.shared.limits import STATE_PAYLOAD_LIMIT_BYTES, payload_size

FAILING, SIBLINGS = "ChargePayment", ("ReserveInventory", "NotifyCustomer")
NEAR_THE_OLD_LIMIT = 250_000  # the kit accepted inputs up to 262,144 bytes before the cap


def near_the_limit(batch, batch_id: str) -> dict:
    """An input of NEAR_THE_OLD_LIMIT bytes, most of it a sibling's payload, where ChargePayment
    fails (not retryable) with a Cause of about 30,000 characters."""
    data = batch(batch_id)
    # an unknown simulateFailure mode: the task fails NonRetryableTaskError quoting the spec
    data["tasks"][FAILING]["simulateFailure"] = {"mode": "explode", "why": "c" * 30_000}
    data["tasks"]["NotifyCustomer"]["note"] = ""
    data["tasks"]["NotifyCustomer"]["note"] = "n" * (NEAR_THE_OLD_LIMIT - payload_size(data))
    assert payload_size(data) == NEAR_THE_OLD_LIMIT
    return data


def allow_inputs_as_large_as_before(monkeypatch):
    """The input cap (fanout_kit.shared.limits) would refuse this input at ValidateInput; lifted here
    to AWS's own limit, to show what the branch shape alone does with it."""
    monkeypatch.setattr("fanout_kit.patterns.parallel.validation.PARALLEL_INPUT_MAX_BYTES", STATE_PAYLOAD_LIMIT_BYTES, raising=False)


def dead_lettered_tasks(engine):
    return [m.get("task") for m in engine.dlq_messages() if isinstance(m, dict) and m.get("kind") != "execution"]


def test_a_failed_task_near_the_old_limit_is_dead_lettered_and_its_siblings_complete(engine, batch, monkeypatch):
    allow_inputs_as_large_as_before(monkeypatch)
    data = near_the_limit(batch, "near-limit")
    result = engine.run("parallel", data)
    assert (result.status, result.error) == ("FAILED", "BatchFailed"), result.cause
    assert engine.payload_violations == []
    (message,) = engine.dlq_messages()
    assert message["task"] == FAILING and message["input"] == data["tasks"][FAILING]
    assert len(message["cause"]) > 30_000  # the whole Cause, next to the task's own payload
    for sibling in SIBLINGS:
        assert task_attempts(result.history)[f"Run {sibling}"] == 1
    exited = [e["stateExitedEventDetails"]["name"] for e in result.history if "stateExitedEventDetails" in e]
    assert {f"Run {s}" for s in SIBLINGS} <= set(exited)
    assert engine.status_record("near-limit")["failedTasks"] == [FAILING]


def old_branch_shape(definition: dict) -> dict:
    """The definition as it was before ``Input T``: each branch runs its task on the whole state."""
    old = json.loads(json.dumps(definition))
    (parallel,) = [s for s in old["States"].values() if s["Type"] == "Parallel"]
    for branch in parallel["Branches"]:
        states = branch["States"]
        (own_input,) = [n for n in states if n.startswith("Input ")]
        task = own_input.removeprefix("Input ")
        run = states.pop(own_input)["Next"]
        for choice in states[f"Run {task}?"]["Choices"]:
            choice["Next"] = run
        states[run]["Parameters"]["Payload"]["input.$"] = f"$.tasks.{task}"
        states[f"DeadLetter {task}"]["Parameters"]["MessageBody"]["input.$"] = f"$.tasks.{task}"
    return old


def test_the_old_branch_shape_overflows_at_the_catch_and_dead_letters_nothing(engine, batch, monkeypatch):
    allow_inputs_as_large_as_before(monkeypatch)
    deployed = engine.sfn.describe_state_machine(stateMachineArn=engine.state_machine_arn())
    old = engine.sfn.create_state_machine(
        name="OldBranchShape", definition=json.dumps(old_branch_shape(json.loads(deployed["definition"]))),
        roleArn=deployed["roleArn"],
    )["stateMachineArn"]
    arn = engine.sfn.start_execution(stateMachineArn=old, input=json.dumps(near_the_limit(batch, "old-shape")))[
        "executionArn"
    ]
    result = engine.wait(arn)
    assert (result.status, result.error) == ("FAILED", "States.DataLimitExceeded")
    # the Catch's merge of the Cause into the whole input: the state the limit stopped
    (violation,) = engine.payload_violations
    assert violation.state == f"Run {FAILING}" and violation.size > STATE_PAYLOAD_LIMIT_BYTES
    assert FAILING not in dead_lettered_tasks(engine)  # the task's context reached no DLQ
    assert f"DeadLetter {FAILING}" not in states_entered(result.history)
    assert "RecordBatchFailure" not in states_entered(result.history)

"""End to end, on the synthesized dev definition with the real handlers (moto's interpreter).

Every assertion reads the execution history (GetExecutionHistory) or the emulated SQS /
DynamoDB state, never log text.
"""

import json

import pytest

from fanout_kit.local.history import state_transitions, states_entered, task_attempts, task_errors
from stacks.config import load_environment, read_cdk_context
from fanout_kit.shared.asl_graph import happy_path_transitions
from tests.templates import only_definition

CFG = load_environment(read_cdk_context(), "dev")
TASKS = {t.name: t for t in CFG.tasks}


def run_tasks_entered(history):
    return [s for s in states_entered(history) if s.startswith("Run ") and not s.endswith("?")]


def test_all_tasks_succeed_then_final_status_once(engine, batch):
    result = engine.run("parallel", batch("happy"))
    assert result.status == "SUCCEEDED"
    attempts = task_attempts(result.history)
    assert attempts["UpdateFinalStatus"] == 1
    assert all(attempts[f"Run {name}"] == 1 for name in TASKS)
    record = engine.status_record("happy")
    assert record["status"] == "SUCCEEDED" and record["finalizedBy"] == result.arn
    assert record["ranTasks"] == sorted(TASKS)
    assert engine.dlq_messages() == []
    assert result.output["finalStatus"] == {"outcome": "FINALIZED", "finalizedBy": result.arn}


def test_happy_path_transitions_match_the_asl_count(engine, batch, dev_app):
    result = engine.run("parallel", batch())
    expected = happy_path_transitions(only_definition(dev_app.template("parallel")))
    assert state_transitions(result.history) == expected == 7 + 3 * len(TASKS)


def test_transient_failure_twice_then_success(engine, batch):
    result = engine.run("parallel", batch("flaky", ChargePayment={"mode": "transient", "times": 2}))
    assert result.status == "SUCCEEDED"
    assert task_attempts(result.history)["Run ChargePayment"] == 3
    assert task_errors(result.history)["Run ChargePayment"] == ["RetryableTaskError"] * 2
    assert engine.status_record("flaky")["status"] == "SUCCEEDED"
    assert engine.dlq_messages() == []
    # two retries: two recorded waits, each within its full-jitter ceiling
    ceilings = TASKS["ChargePayment"].retryable.backoff_ceilings()
    assert len(engine.retry_clock.waits) == 2
    assert all(0 <= w <= c for w, c in zip(engine.retry_clock.waits, ceilings))
    # one retry costs one extra transition per retry
    assert state_transitions(result.history) == 7 + 3 * len(TASKS) + 2


def test_permanent_failure_goes_to_the_dlq_and_blocks_the_final_status(engine, batch):
    data = batch("doomed", NotifyCustomer={"mode": "permanent"})
    result = engine.run("parallel", data)
    history = result.history
    policy = TASKS["NotifyCustomer"].retryable
    assert task_attempts(history)["Run NotifyCustomer"] == policy.max_attempts + 1
    # the siblings still ran to success
    for name in ("ReserveInventory", "ChargePayment"):
        assert task_attempts(history)[f"Run {name}"] == 1
        assert f"Run {name}" in states_entered(history)
    assert "UpdateFinalStatus" not in states_entered(history)
    assert result.status == "FAILED" and result.error == "BatchFailed"
    assert '["NotifyCustomer"]' in result.cause and result.cause.startswith("1 of 3 tasks failed")
    (message,) = engine.dlq_messages()
    assert message["batchId"] == "doomed" and message["task"] == "NotifyCustomer"
    assert message["input"] == data["tasks"]["NotifyCustomer"]
    assert message["error"] == "RetryableTaskError"
    cause = json.loads(message["cause"])
    assert cause["errorType"] == "RetryableTaskError"
    assert f"(attempt {policy.max_attempts + 1})" in cause["errorMessage"]
    assert message["executionArn"] == result.arn
    record = engine.status_record("doomed")
    assert record["status"] == "FAILED" and record["failedTasks"] == ["NotifyCustomer"]
    assert record["executionArn"] == result.arn


def test_non_retryable_error_is_tried_once_then_dead_lettered(engine, batch):
    result = engine.run("parallel", batch("fatal", ChargePayment={"mode": "fatal"}))
    assert task_attempts(result.history)["Run ChargePayment"] == 1
    assert task_errors(result.history)["Run ChargePayment"] == ["NonRetryableTaskError"]
    (message,) = engine.dlq_messages()
    assert (message["task"], message["error"]) == ("ChargePayment", "NonRetryableTaskError")
    assert result.status == "FAILED" and engine.retry_clock.waits == []


def test_bad_task_input_is_non_retryable_too(engine, batch):
    data = batch("bad-amount")
    data["tasks"]["ChargePayment"]["amountCents"] = -5
    result = engine.run("parallel", data)
    assert task_attempts(result.history)["Run ChargePayment"] == 1
    (message,) = engine.dlq_messages()
    assert "amountCents must be a positive integer" in json.loads(message["cause"])["errorMessage"]


@pytest.mark.parametrize(
    "execution_input, field",
    [
        ({"batchId": "x", "tasks": {"ReserveInventory": {}}}, "tasks.ChargePayment: missing"),
        ({"tasks": "all"}, "tasks: must be an object"),
        ({"batchId": "bad id!", "tasks": {}}, "batchId: must be 1-80 characters"),
    ],
)
def test_invalid_input_fails_at_once_and_runs_nothing(engine, execution_input, field):
    result = engine.run("parallel", execution_input)
    assert result.status == "FAILED" and result.error == "InvalidInput"
    assert field in json.loads(result.cause)["errorMessage"]
    assert run_tasks_entered(result.history) == []
    assert engine.dlq_messages() == []
    scanned = engine.dynamodb.scan(TableName=engine.table_name())["Items"]
    assert scanned == []


def test_update_final_status_failing_transiently_is_retried_and_writes_once(engine, batch):
    # First attempt: the Lambda service rejects the invoke. Second: the handler writes the status,
    # then its response is lost. Third: succeeds, and finds the status already written.
    engine.inject_lambda_service_faults("UpdateFinalStatus", ["ServiceException"])
    engine.inject_lambda_service_faults("UpdateFinalStatus", ["TooManyRequestsException"], after_handler=True)
    result = engine.run("parallel", batch("finalize-retry"))
    assert result.status == "SUCCEEDED"
    assert task_attempts(result.history)["UpdateFinalStatus"] == 3
    assert task_errors(result.history)["UpdateFinalStatus"] == [
        "Lambda.ServiceException",
        "Lambda.TooManyRequestsException",
    ]
    lid = engine.function_id("UpdateFinalStatus")
    assert engine.router.count(lid) == 3
    assert result.output["finalStatus"]["outcome"] == "ALREADY_FINALIZED"  # third call wrote nothing
    record = engine.status_record("finalize-retry")
    assert record["status"] == "SUCCEEDED" and record["finalizedBy"] == result.arn


def test_lambda_service_errors_of_a_task_are_retried(engine, batch):
    engine.inject_lambda_service_faults("ReserveInventory", ["ServiceException", "TooManyRequestsException"])
    result = engine.run("parallel", batch())
    assert result.status == "SUCCEEDED"
    assert task_attempts(result.history)["Run ReserveInventory"] == 3


def test_dlq_send_failing_transiently_is_retried_and_not_lost(engine, batch):
    (queue_id,) = engine.stacks["parallel"].queues
    engine.inject_sqs_send_failures(queue_id, 2)
    result = engine.run("parallel", batch("dlq-flaky", ReserveInventory={"mode": "fatal"}))
    assert task_attempts(result.history)["DeadLetter ReserveInventory"] == 3
    assert task_errors(result.history)["DeadLetter ReserveInventory"] == ["SQS.SdkClientException"] * 2
    (message,) = engine.dlq_messages()
    assert message["task"] == "ReserveInventory" and message["batchId"] == "dlq-flaky"
    assert result.status == "FAILED"


def test_dlq_send_exhausted_still_fails_the_batch_with_context_in_history(engine, batch):
    (queue_id,) = engine.stacks["parallel"].queues
    engine.inject_sqs_send_failures(queue_id, CFG.dlq_send_retry.max_attempts + 1)
    result = engine.run("parallel", batch("dlq-down", ReserveInventory={"mode": "fatal"}))
    assert "ReserveInventory failed, DLQ send failed" in states_entered(result.history)
    assert engine.dlq_messages() == []
    assert result.status == "FAILED" and "ReserveInventory" in result.cause
    assert engine.status_record("dlq-down")["failedTasks"] == ["ReserveInventory"]


def lambda_invocations(history):
    """Lambda invocations of an execution, counted from its history (LambdaFunctionScheduled)."""
    return sum(1 for e in history if e["type"] == "LambdaFunctionScheduled") or sum(
        1 for e in history if e["type"] == "TaskScheduled" and e["taskScheduledEventDetails"]["resourceType"] == "lambda"
    )


def test_a_duplicate_start_of_a_succeeded_batch_runs_no_task(engine, batch):
    first = engine.run("parallel", batch("twice"))
    invoked_before = len(engine.router.invocations)
    second = engine.run("parallel", batch("twice"))
    assert (first.status, second.status) == ("SUCCEEDED", "SUCCEEDED")
    assert second.output["finalStatus"] == {"outcome": "ALREADY_FINALIZED", "finalizedBy": first.arn}
    assert engine.status_record("twice")["finalizedBy"] == first.arn
    # From the history: only ValidateInput was invoked; no task, no UpdateFinalStatus.
    assert run_tasks_entered(second.history) == []
    assert lambda_invocations(second.history) == 1
    assert "AlreadyFinalized" in states_entered(second.history)
    assert [r.function for r in engine.router.invocations[invoked_before:]] == [engine.function_id("ValidateInput")]


def test_a_failed_batch_started_again_without_redrive_runs_no_task(engine, batch):
    failed = engine.run("parallel", batch("rerun", ChargePayment={"mode": "fatal"}))
    rerun = engine.run("parallel", batch("rerun"))
    assert rerun.status == "FAILED" and rerun.error == "FinalStatusConflict"
    assert failed.arn in rerun.cause and "redriveOf" in rerun.cause
    # The recovery that works after BatchFailed: a new execution (`fanout dlq redrive`), not the
    # console's Redrive, which would only re-run the BatchFailed Fail state.
    assert failed.error == "BatchFailed"
    assert "run `fanout dlq redrive --batch rerun`" in rerun.cause
    assert "or Redrive in the console" not in rerun.cause
    assert run_tasks_entered(rerun.history) == []
    assert lambda_invocations(rerun.history) == 1  # ValidateInput only
    assert engine.status_record("rerun")["status"] == "FAILED"
    assert engine.status_record("rerun")["executionArn"] == failed.arn  # the guard left it alone


def test_exhausted_finalization_leaves_a_record_and_a_named_error(engine, batch):
    """Every task succeeded, UpdateFinalStatus's retries run out: the execution fails AT that step
    (so the console's Redrive would resume there), and the failure guard, delivered the Execution
    Status Change event, records the batch FAILED and dead-letters the context."""
    attempts = CFG.status_write_retry.max_attempts + 1
    engine.inject_lambda_service_faults("UpdateFinalStatus", ["ServiceException"] * attempts)
    result = engine.run("parallel", batch("finalize-down"))
    assert result.status == "FAILED" and result.error == "Lambda.ServiceException"
    assert task_attempts(result.history)["UpdateFinalStatus"] == attempts
    assert states_entered(result.history)[-1] == "UpdateFinalStatus"  # no Catch, no Fail state after it
    (delivery,) = engine.deliveries
    assert delivery["function"] == engine.function_id("RecordExecutionFailure") and delivery["error"] is None
    record = engine.status_record("finalize-down")
    assert record["status"] == "FAILED" and record["executionArn"] == result.arn
    assert record["failedExecutionError"] == "Lambda.ServiceException"
    assert "failedTasks" not in record  # no task failed
    (message,) = engine.dlq_messages()
    assert message["kind"] == "execution" and message["batchId"] == "finalize-down"
    assert (message["executionArn"], message["error"], message["statusRecorded"]) == (result.arn, "Lambda.ServiceException", True)
    assert "Redrive" in message["recovery"]


def test_the_redrive_of_an_exhausted_finalization_finalizes_over_the_guard_record(engine, batch):
    """moto cannot RedriveExecution; what a redrive runs is the failed step with the same input and
    the same execution ARN (AWS RedriveExecution docs), so that step's call is made here directly."""
    engine.inject_lambda_service_faults("UpdateFinalStatus", ["ServiceException"] * (CFG.status_write_retry.max_attempts + 1))
    failed = engine.run("parallel", batch("finalize-redrive"))
    update_input = next(
        json.loads(e["stateEnteredEventDetails"]["input"])
        for e in failed.history
        if e["type"] == "TaskStateEntered" and e["stateEnteredEventDetails"]["name"] == "UpdateFinalStatus"
    )
    from fanout_kit.shared.final_status import record_success

    result = record_success(
        engine.dynamodb, engine.table_name(), batch_id="finalize-redrive", execution_arn=failed.arn,
        ran_tasks=list(update_input["outcome"]["byTask"]), now="2026-01-01T00:00:00Z",
        redrive_of=update_input["redriveOf"],
    )
    assert result.outcome == "FINALIZED"
    assert engine.status_record("finalize-redrive")["status"] == "SUCCEEDED"
    # ...but another execution cannot finalize over that FAILED record.
    other = engine.run("parallel", batch("finalize-redrive"))
    assert other.status == "SUCCEEDED" and other.output["finalStatus"]["outcome"] == "ALREADY_FINALIZED"


def test_failures_the_workflow_reports_itself_get_no_second_record_or_message(engine, batch):
    result = engine.run("parallel", batch("self-reported", NotifyCustomer={"mode": "fatal"}))
    assert result.error == "BatchFailed"
    (delivery,) = engine.deliveries
    assert delivery["result"] == {"action": "none", "reason": "BatchFailed"}
    assert [m["task"] for m in engine.dlq_messages()] == ["NotifyCustomer"]


def test_redrive_of_the_failed_tasks_finalizes_exactly_once(engine, batch):
    failed = engine.run("parallel", batch("redrive", ChargePayment={"mode": "fatal"}))
    (message,) = engine.dlq_messages()
    redrive_input = {"batchId": "redrive", "tasks": {"ChargePayment": {"amountCents": 4598}}, "redriveOf": failed.arn}
    redrive = engine.run("parallel", redrive_input)
    assert redrive.status == "SUCCEEDED"
    entered = states_entered(redrive.history)
    assert run_tasks_entered(redrive.history) == ["Run ChargePayment"]
    assert {"Skip ReserveInventory", "Skip NotifyCustomer"} <= set(entered)
    record = engine.status_record("redrive")
    assert (record["status"], record["finalizedBy"], record["redriveOf"]) == ("SUCCEEDED", redrive.arn, failed.arn)
    again = engine.run("parallel", redrive_input)
    assert again.output["finalStatus"]["outcome"] == "ALREADY_FINALIZED"

"""This app's workflow on the local engine, with the kit's pytest plugin: ``pytest`` here.

``fanout_app`` is this app (its cdk.json), synthesized once per session; ``run(input, faults=...)``
runs one execution to its end (retry waits recorded, not slept) on a fresh local engine, with
functions/signup.py in a sandbox as strict as Lambda."""

EMAIL = {"email": "ada@example.com"}


def batch(batch_id, **tasks):
    return {"batchId": batch_id, "tasks": {"VerifyEmail": EMAIL, "CreateProfile": EMAIL, "SendWelcome": EMAIL, **tasks}}


def test_a_busy_service_is_retried_and_the_batch_succeeds(fanout_app):
    result = fanout_app.run(batch("signup-1", CreateProfile={**EMAIL, "busyUntilAttempt": 1}))
    assert result.status == "SUCCEEDED"
    assert result.attempts == {"VerifyEmail": 1, "CreateProfile": 2, "SendWelcome": 1, "ValidateInput": 1,
                               "ReadBatchStatus": 1, "UpdateFinalStatus": 1}
    assert result.status_record["status"] == "SUCCEEDED"
    assert result.dlq_messages == []


def test_a_bad_address_is_dead_lettered_with_its_input(fanout_app):
    result = fanout_app.run(batch("signup-2", SendWelcome={"email": "nobody"}))
    assert (result.status, result.error) == ("FAILED", "BatchFailed")
    (message,) = result.dlq_messages
    assert message["task"] == "SendWelcome" and message["error"] == "NonRetryableTaskError"
    assert message["input"] == {"email": "nobody"}
    assert result.status_record["status"] == "FAILED"


def test_faults_are_injected_without_touching_the_code(fanout_app):
    result = fanout_app.run(batch("signup-3"), faults={"VerifyEmail": "transient:2", "SendWelcome": "fatal"})
    assert result.status == "FAILED"
    assert result.attempts["VerifyEmail"] == 3
    (message,) = result.dlq_messages
    assert message["task"] == "SendWelcome" and "injected non-retryable failure" in message["cause"]


def test_each_invocation_has_its_own_log(fanout_app):
    result = fanout_app.run(batch("signup-4"))
    signup_logs = [entry for entry in result.logs if entry.function.startswith("SignupStep")]
    assert len(signup_logs) == 3
    assert all(entry.text.startswith("START RequestId:") and "REPORT RequestId:" in entry.text for entry in signup_logs)

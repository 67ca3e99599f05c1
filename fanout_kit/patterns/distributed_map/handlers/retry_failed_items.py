"""RetryFailedItems: the Map child's step after a worker answered with ``batchItemFailures``.
Checks the answer, retries only the failed retryable items (the worker invoked again with only
them, with its retryable policy, within the child's time), dead-letters the items that still fail
with their own error and cause, and returns the child's verdict (fanout_kit.patterns.distributed_map.item_failures).
Runs only when a worker reports failed items: no cost on the happy path."""

import functools
import json
import os
import time
from typing import Any

import boto3
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.patterns.distributed_map.item_failures import LAMBDA_TRANSIENT_CODES, Policy, dead_letter_bodies, run_rounds
from fanout_kit.shared.observability import logger, tracer

PROCESSED_MAX_BYTES = 1024  # fanout_kit.shared.payload_budget: RetryFailedItems' output
SAFETY_SECONDS = 3.0  # stop starting rounds this long before the function's own timeout


@functools.cache
def _clients():
    return boto3.client("lambda"), boto3.client("sqs")


def backoff_sleep(seconds: float) -> None:
    """The wait before a retry round (the local engine replaces it with its retry clock)."""
    time.sleep(seconds)


def _invoker(lambda_client, event: dict[str, Any]):
    def invoke(entries: list[dict[str, Any]], attempt: int) -> tuple[Any, str | None, str]:
        payload = {"batchId": event["batchId"], "items": entries, "attempt": attempt, "executionArn": event["childExecutionArn"]}
        try:
            answer = lambda_client.invoke(FunctionName=os.environ["WORKER_FUNCTION"], Payload=json.dumps(payload).encode())
        except lambda_client.exceptions.ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "ServiceException")
            name = "RetryableTaskError" if code in LAMBDA_TRANSIENT_CODES else f"Lambda.{code}"
            return None, name, f"Lambda Invoke failed: {code}: {exc}"
        body = answer["Payload"].read()
        try:
            result = json.loads(body) if body else None
        except ValueError:
            return None, "Runtime.MarshalError", f"the worker's answer is not JSON: {body[:200]!r}"
        if answer.get("FunctionError"):
            error = result.get("errorType") if isinstance(result, dict) else None
            message = result.get("errorMessage") if isinstance(result, dict) else body[:500]
            return None, error or "Lambda.Unknown", str(message)
        return result, None, ""

    return invoke


def _processed(response: Any) -> Any:
    """The worker's ``processed`` (its first answer's): the child's output when all items succeed
    in the end; null if over PROCESSED_MAX_BYTES of JSON (the payload budget counts on it)."""
    processed = response.get("processed") if isinstance(response, dict) else None
    return processed if len(json.dumps(processed)) <= PROCESSED_MAX_BYTES else None


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    logger.append_keys(batch_id=event.get("batchId"))
    lambda_client, sqs = _clients()
    policy = Policy.from_json(json.loads(os.environ["RETRY_POLICY"]))
    deadline = time.monotonic() + context.get_remaining_time_in_millis() / 1000 - SAFETY_SECONDS
    outcome = run_rounds(
        event["items"],
        event.get("response"),
        policy,
        invoke=_invoker(lambda_client, event),
        seconds_left=lambda: deadline - time.monotonic(),
        sleep=lambda seconds: backoff_sleep(seconds),
    )
    bodies = dead_letter_bodies(
        outcome,
        batch_id=event["batchId"],
        task=os.environ["TASK_NAME"],
        execution_arn=event["executionArn"],
        child_execution_arn=event["childExecutionArn"],
        failed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    for body in bodies:  # raises if SQS refuses: the child then fails and the parent forwards its batch
        sqs.send_message(QueueUrl=os.environ["DLQ_URL"], MessageBody=json.dumps(body, separators=(",", ":")))
    verdict = {**outcome.verdict(), "processed": _processed(event.get("response"))}
    logger.info(
        "batch item failures handled",
        extra={"items": outcome.items, "failed": verdict["failed"], "rounds": outcome.rounds, "error": verdict["error"]},
    )
    return verdict

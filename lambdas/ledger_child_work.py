"""Example completion-ledger child work: the CompletionLedger's ``processing_function`` of this
app, invoked synchronously by the ledger's consumers once per child attempt. Replace ``work``
with yours; keep it idempotent (SQS delivers at least once, and a failed attempt is retried).

Written as a function of your own would be: ``fanout_runtime`` (the fault switch) and Powertools,
nothing else of the kit.

Event: ``{"batchId", "childId", "payload", "attempt"}``. An exception fails the attempt: the
message is retried, and after the queue's maxReceiveCount it is dead-lettered and counted failed.
``payload.simulateFailure`` fails it on purpose, as in the example tasks (``fanout_runtime.faults``):
``{"mode": "transient", "times": N}`` fails the first N attempts, ``"permanent"`` and ``"fatal"``
every attempt.
"""

from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_runtime import faults

logger = Logger()


def work(payload: dict[str, Any]) -> dict[str, Any]:
    """The example work: nothing but a receipt."""
    return {"processed": True}


@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    payload = event.get("payload") or {}
    faults.raise_simulated_failure(payload, event["childId"], int(event.get("attempt", 0)))
    return {"childId": event["childId"], **work(payload)}

"""RecordItemFailures: after a Map child's batch exhausted its retries and went to the DLQ, count
each of its items as failed in the completion ledger (once; an item that had already succeeded in
an earlier attempt keeps its success)."""

from aws_lambda_powertools import Logger, Tracer

from fanout_common.ledger_runtime import ledger_from_env

logger = Logger()
tracer = Tracer()


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event, context):
    batch_id = event["batchId"]
    logger.append_keys(batch_id=batch_id)
    ledger = ledger_from_env()
    outcomes = [
        ledger.record_failure(
            batch_id,
            str(e["index"]),
            reason=event.get("error") or "failed",
            decide=False,
        ).outcome.value
        for e in event["items"]
    ]
    logger.warning(
        "items dead-lettered",
        extra={"count": len(outcomes), "error": event.get("error")},
    )
    return {"recorded": len(outcomes)}

"""DecideBatch: after the Distributed Map, the ledger (not the Map's results, which may be millions)
gives the verdict: COMPLETED only if every item was counted and none failed."""

from aws_lambda_powertools import Logger, Tracer

from fanout_common.ledger_runtime import ledger_from_env

logger = Logger()
tracer = Tracer()


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event, context):
    batch_id = event["batchId"]
    logger.append_keys(batch_id=batch_id)
    verdict = ledger_from_env().decide(batch_id, by=event.get("executionArn") or "map-workflow")
    logger.info("verdict", extra=verdict)
    return verdict

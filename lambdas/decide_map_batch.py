"""DecideBatch: after the Distributed Map, the ledger (not the Map's results, which may be millions)
gives the verdict: COMPLETED only if every item was counted and none failed."""

import functools
import os

import boto3
from aws_lambda_powertools import Logger, Tracer

from fanout_common.ledger import Ledger

logger = Logger()
tracer = Tracer()


@functools.cache
def _ledger() -> Ledger:
    return Ledger(boto3.client("dynamodb"), os.environ["LEDGER_TABLE_NAME"])


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event, context):
    batch_id = event["batchId"]
    logger.append_keys(batch_id=batch_id)
    verdict = _ledger().decide(batch_id, by=event.get("executionArn") or "map-workflow")
    logger.info("verdict", extra=verdict)
    return verdict

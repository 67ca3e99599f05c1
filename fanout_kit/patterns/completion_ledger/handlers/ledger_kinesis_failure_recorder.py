"""Consumer of the Kinesis consumer's on-failure SQS queue.

A Kinesis event source mapping does not send failed *records* to its on-failure destination, only
the metadata of the failed range::

    {"requestContext": {"condition": "RetryAttemptsExhausted", ...},
     "KinesisBatchInfo": {"shardId": "shardId-000000000000", "startSequenceNumber": "...",
                          "endSequenceNumber": "...", "streamArn": "arn:aws:kinesis:...",
                          "batchSize": 3, ...}}

So this function reads the range back from the stream (GetShardIterator AT_SEQUENCE_NUMBER +
GetRecords up to endSequenceNumber) and settles every child in it by its work record
(fanout_kit.patterns.completion_ledger.work_record), as the SQS DLQ recorder does: a child whose work succeeded is counted
SUCCEEDED (its recording lost the race for a contended counter), the others FAILED. That is
exact, not an over-count: records of the range that were counted already have a child mark, so
recording them again is a no-op.

Limits, stated honestly: the records must still be in the stream (its retention, 24 h by default);
if the range was trimmed, or a record is not a child message, the children cannot be attributed:
the message is reported as failed so it stays in the queue (its age alarm fires) and the batch
fails at its deadline through the sweeper instead.
"""

import functools
import json
from typing import Any

import boto3
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.patterns.completion_ledger.ledger import LedgerError
from fanout_kit.patterns.completion_ledger.runtime import ChildMessage, finish, ledger_from_env, process_dead_letter, work_records_from_env
from fanout_kit.shared.observability import ledger_metrics, logger

SOURCE = "kinesis-failed"
MAX_GET_RECORDS_CALLS = 100
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


class FailedRangeUnreadable(LedgerError):
    """The failed range can no longer be read completely from the stream."""


@functools.cache
def kinesis_client():
    return boto3.client("kinesis")


def read_failed_range(client, stream_arn: str, shard_id: str, start: str, end: str) -> list[dict]:
    """The records of one shard from sequence number ``start`` to ``end`` (inclusive)."""
    iterator = client.get_shard_iterator(
        StreamARN=stream_arn,
        ShardId=shard_id,
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        StartingSequenceNumber=start,
    )["ShardIterator"]
    records: list[dict] = []
    for _ in range(MAX_GET_RECORDS_CALLS):
        page = client.get_records(ShardIterator=iterator, Limit=1000, StreamARN=stream_arn)
        for record in page["Records"]:
            sequence = int(record["SequenceNumber"])
            if not records and sequence != int(start):
                raise FailedRangeUnreadable(
                    f"{shard_id}: the failed range starts at {start} but the stream now starts at "
                    f"{sequence} (trimmed by retention)"
                )
            if sequence > int(end):
                return records
            records.append(record)
            if sequence == int(end):
                return records
        iterator = page.get("NextShardIterator")
        if not iterator or (not page["Records"] and not page.get("MillisBehindLatest")):
            break
    raise FailedRangeUnreadable(f"{shard_id}: could not read the failed range {start}..{end} completely")


def record_handler(record: SQSRecord) -> dict[str, Any]:
    info = record.json_body.get("KinesisBatchInfo") or {}
    shard, start, end, stream = (
        info.get(k) for k in ("shardId", "startSequenceNumber", "endSequenceNumber", "streamArn")
    )
    if not all((shard, start, end, stream)):
        logger.error("not a Kinesis on-failure record; left in the queue", extra={"body": record.body[:2000]})
        raise FailedRangeUnreadable("message has no KinesisBatchInfo with shardId/sequence numbers/streamArn")
    with logger.append_context_keys(shard_id=shard, start_sequence=start, end_sequence=end):
        kinesis_records = read_failed_range(kinesis_client(), stream, shard, start, end)
        ledger, work = ledger_from_env(), work_records_from_env()
        outcomes, unattributable = [], []
        for kinesis_record in kinesis_records:
            try:
                message = ChildMessage.parse(_json(kinesis_record["Data"]))
            except (ValueError, LedgerError):
                unattributable.append(kinesis_record["SequenceNumber"])
                continue
            with logger.append_context_keys(batch_id=message.batch_id, child_id=message.child_id):
                result = process_dead_letter(
                    ledger, work, message, f"Kinesis retries exhausted ({shard} {kinesis_record['SequenceNumber']})"
                )
                outcomes.append(finish(ledger, result, f"ledger:{SOURCE}:{message.child_id}").to_dict())
        if unattributable:
            logger.error("records that are not child messages", extra={"sequenceNumbers": unattributable})
            raise FailedRangeUnreadable(f"{len(unattributable)} record(s) of the range are not child messages")
        return {"recorded": outcomes}


def _json(data) -> dict:
    return json.loads(data if isinstance(data, (bytes, str)) else bytes(data))


@ledger_metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )

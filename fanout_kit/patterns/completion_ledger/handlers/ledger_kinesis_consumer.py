"""Kinesis consumer of child records: the records of one batch may be spread over shards and
invocations; the ledger does not care (it counts per child, atomically).

Partial batch responses (ReportBatchItemFailures) + BisectBatchOnFunctionError: Lambda retries from
the first failed sequence number and splits failing batches; when a record's retries are exhausted,
the event source mapping sends the *metadata* of the failed range (shard id, first/last sequence
number, stream ARN; not the records) to the on-failure SQS queue, and ``ledger_kinesis_failure_recorder``
reads that range back from the stream and records each child in it as FAILED, once. Records of the
range that had succeeded already are no-ops there (their child mark exists).

There is no attempt counter on a Kinesis record, so a simulated "transient" failure fails every
attempt here (attempt is always 0 to the child work).
"""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.kinesis_stream_event import KinesisStreamRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.patterns.completion_ledger.runtime import ChildMessage, work_then_record
from fanout_kit.shared.observability import ledger_metrics, logger

SOURCE = "kinesis"
processor = BatchProcessor(event_type=EventType.KinesisDataStreams, raise_on_entire_batch_failure=False)


def record_handler(record: KinesisStreamRecord, lambda_context: LambdaContext | None = None) -> dict[str, Any]:
    message = ChildMessage.parse(record.kinesis.data_as_json())
    with logger.append_context_keys(
        batch_id=message.batch_id, child_id=message.child_id, sequence_number=record.kinesis.sequence_number
    ):
        return work_then_record(message, 0, SOURCE, lambda_context)


@ledger_metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )

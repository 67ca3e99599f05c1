"""Consumer of a source queue's dead-letter queue: each message there is a child whose retries are
exhausted. Its work record (fanout_kit.patterns.completion_ledger.work_record) decides what it was: a child whose work
succeeded (its message only lost the race for the contended counter) is counted SUCCEEDED; any
other is counted FAILED, for good; while a delivery still holds the work's claim, the message is
retried (ChildWorkInProgress). Either way the child is counted once (the ledger's child mark makes
a redelivered DLQ message a no-op). The winner of RUNNING -> FAILED emits the LedgerBatchFailed
metric (the alarm) and logs an error; the winner of RUNNING -> COMPLETED finalizes the batch.

A message that is not a child message cannot be attributed to a batch: it is reported as a batch
item failure so it stays in the DLQ (the DLQ-age alarm fires) for an operator to inspect.
"""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.patterns.completion_ledger.runtime import ChildMessage, record_dead_letter
from fanout_kit.shared.observability import ledger_metrics, logger

SOURCE = "sqs-dlq"
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> dict[str, Any]:
    try:
        message = ChildMessage.parse(record.json_body)
    except Exception:
        logger.error("dead-lettered message is not a child message; left in the DLQ",
                     extra={"messageId": record.message_id, "body": record.body[:2000]})
        raise
    with logger.append_context_keys(batch_id=message.batch_id, child_id=message.child_id):
        return record_dead_letter(message, SOURCE, f"dead-lettered (message {record.message_id})")


@ledger_metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )

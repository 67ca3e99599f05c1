"""SQS consumer of child messages: does the child's work, then records it in the completion ledger;
the caller that records the last child finalizes the batch (UpdateFinalStatus), exactly once.

Partial batch responses (ReportBatchItemFailures): a failed child's message alone is retried; after
the queue's maxReceiveCount it moves to the dead-letter queue, where ``ledger_dlq_recorder`` counts
it exactly once. A failure is therefore never counted per retry, and a child whose retry succeeds
is counted as succeeded. Each delivery claims the child's work record first
(fanout_kit.patterns.completion_ledger.work_record): a redelivery of a child whose work succeeded (its recording lost the
race for a contended counter) only records it, and a duplicate delivered while another runs the
work is retried later. The work must still be idempotent: a delivery that crashes between doing
the work and storing its outcome runs it again once its claim expires.
"""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.patterns.completion_ledger.runtime import ChildMessage, work_then_record
from fanout_kit.shared.observability import ledger_metrics, logger

SOURCE = "sqs"
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> dict[str, Any]:
    message = ChildMessage.parse(record.json_body)
    with logger.append_context_keys(batch_id=message.batch_id, child_id=message.child_id):
        attempt = int(record.attributes.approximate_receive_count or 1) - 1
        return work_then_record(message, attempt, SOURCE, lambda_context)


@ledger_metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )

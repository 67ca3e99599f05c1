"""ForwardFailedItems: after a map run that counted unsuccessful items, send the items of every
child that never reached its own DLQ step (stopped by a timeout or an abort, or whose DLQ send
failed) from the map run's ResultWriter files to the dead-letter queue, with their context.
The result files are streamed one child entry at a time: memory holds one entry and at most ten
pending messages, whatever the number of failed items.
Children that dead-lettered their own items are only counted. At-least-once: a retry of this step
may send a message twice; the redrive merges items by index.

It also returns the batch's tally item by item: a child that reported per-item failures ends
``ItemsPartiallyFailed`` and the map run counts all of its items failed; only the items its cause
lists failed (``map_results.item_outcome``), so the others move from failed to succeeded. The
correction is bounded by the map run's own failed count and comes only from FAILED results: a
child whose cause cannot be read stays all failed (fail closed)."""

import functools
import json
import os
from collections.abc import Iterator
from typing import Any

import boto3
from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.patterns.distributed_map.json_stream import READ_CHUNK_BYTES
from fanout_kit.patterns.distributed_map.result_files import (
    already_dead_lettered,
    dead_letter_messages,
    failed_indexes_of,
    item_outcome,
    unsuccessful_entries,
)
from fanout_kit.shared.observability import logger, tracer

MAX_BATCH_BYTES = 200 * 1024  # SendMessageBatch: stay well under the request size limit


@functools.cache
def _clients():
    return boto3.client("s3"), boto3.client("sqs")


def _send(sqs, queue_url: str, bodies: list[str]) -> None:
    entries = [{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)]
    answer = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
    if answer.get("Failed"):
        # Raise: the state's Retry sends the whole step again (at-least-once).
        raise RuntimeError(f"SQS refused {len(answer['Failed'])} of {len(entries)} message(s): {answer['Failed'][0]}")


@tracer.capture_lambda_handler
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    batch_id = event["batchId"]
    logger.append_keys(batch_id=batch_id)
    details = event["resultWriterDetails"]
    s3, sqs = _clients()

    def read_json(key: str) -> Any:  # the run's manifest.json: a short list of result files
        return json.loads(s3.get_object(Bucket=details["Bucket"], Key=key)["Body"].read())

    def read_chunks(key: str) -> Iterator[bytes]:  # a result file: streamed, never read whole
        return s3.get_object(Bucket=details["Bucket"], Key=key)["Body"].iter_chunks(chunk_size=READ_CHUNK_BYTES)

    forwarded = counted = moved = 0
    pending: list[str] = []
    size = 0
    for entry in unsuccessful_entries(read_json, read_chunks, details["Key"]):
        failed, succeeded = item_outcome(entry)
        if failed_indexes_of(entry) is not None:
            moved += succeeded
        if already_dead_lettered(entry):
            counted += failed
            continue
        for message in dead_letter_messages(
            [entry], batch_id=batch_id, task=os.environ["TASK_NAME"], execution_arn=event["executionArn"]
        ):
            body = json.dumps(message, separators=(",", ":"))
            if pending and (len(pending) == 10 or size + len(body) > MAX_BATCH_BYTES):
                _send(sqs, os.environ["DLQ_URL"], pending)
                pending, size = [], 0
            pending.append(body)
            size += len(body)
            forwarded += len(message["items"])
    if pending:
        _send(sqs, os.environ["DLQ_URL"], pending)
    out: dict[str, Any] = {"forwarded": forwarded, "alreadyDeadLettered": counted}
    if "tally" in event:  # (the state machine always passes it)
        out["tally"] = item_tally(event["counts"], event["tally"], moved)
    logger.info("failed items forwarded", extra=out)
    return out


def item_tally(counts: dict[str, Any], tally: dict[str, Any], moved: int) -> dict[str, int]:
    """The state machine's tally with ``moved`` items of partly failed children counted succeeded
    instead of failed (never more than the map run counted failed)."""
    failed = int(counts["failed"])
    moved = max(0, min(moved, failed))
    return {
        "unsuccessful": int(tally["unsuccessful"]) - moved,
        "required": int(tally["required"]),
        "succeeded": int(counts["succeeded"]) + moved,
        "failed": failed - moved,
    }

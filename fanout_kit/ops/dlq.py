"""The dead-letter queue of a deployed workflow, read: ``peek`` (receive, then make visible
again), ``release``, ``delete``, ``queue_counts``, and ``list_messages`` (what ``fanout dlq list``
shows). The redrive of a batch is ``fanout_kit.ops.redrive``. No printing here: ``fanout_kit.cli.dlq``
prints the results (and ``fanout_kit.cli.views.describe`` a message's lines).

Messages are only *peeked*: received with a visibility timeout (hidden from other readers for
that long), then made visible again (timeout 0).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fanout_kit.ops.aws import Aws, Deployment, environment, find_deployment

LIST_HOLD_SECONDS = 30  # how long `dlq list` hides the messages at most (it unhides them at once)
REDRIVE_HOLD_SECONDS = 120  # a redrive that dies keeps its batch's messages hidden at most this long


@dataclass
class Message:
    message_id: str
    receipt: str
    raw: str
    body: dict[str, Any] | None  # None: not a JSON object (not written by the workflow)

    @property
    def batch_id(self) -> str | None:
        return self.body.get("batchId") if self.body else None

    @property
    def task(self) -> str | None:
        return self.body.get("task") if self.body else None

    @property
    def execution_arn(self) -> str | None:
        return self.body.get("executionArn") if self.body else None


def _parse(raw: str) -> dict[str, Any] | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


QUEUE_COUNTS = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed")


def queue_counts(sqs: Any, queue_url: str) -> dict[str, int]:
    """The queue's approximate message counts (visible, in flight, delayed), by attribute name."""
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(QUEUE_COUNTS))["Attributes"]
    return {name: int(attrs.get(name, 0)) for name in QUEUE_COUNTS}


def peek(sqs: Any, queue_url: str, hold_seconds: int) -> tuple[list[Message], int]:
    """Receive every visible message (they stay hidden for ``hold_seconds`` unless released);
    also returns how many were already in flight (hidden by another reader)."""
    counts = queue_counts(sqs, queue_url)
    expected = counts["ApproximateNumberOfMessages"]
    in_flight = counts["ApproximateNumberOfMessagesNotVisible"]
    messages: list[Message] = []
    seen: set[str] = set()
    empty_polls = 0
    while len(messages) < expected and empty_polls < 3:
        got = sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=hold_seconds,
            WaitTimeSeconds=1 if empty_polls else 0,  # short polls may miss; then wait a little
        ).get("Messages", [])
        if not got:
            empty_polls += 1
            continue
        for m in got:
            if m["MessageId"] in seen:
                continue
            seen.add(m["MessageId"])
            messages.append(Message(m["MessageId"], m["ReceiptHandle"], m["Body"], _parse(m["Body"])))
    return messages, in_flight


def _batches(messages: Sequence[Message]) -> Iterable[Sequence[Message]]:
    for i in range(0, len(messages), 10):
        yield messages[i : i + 10]


def release(sqs: Any, queue_url: str, messages: Sequence[Message]) -> None:
    """Make peeked messages visible again now (best effort: else they reappear after the hold)."""
    for chunk in _batches(messages):
        try:
            sqs.change_message_visibility_batch(
                QueueUrl=queue_url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m.receipt, "VisibilityTimeout": 0}
                    for n, m in enumerate(chunk)
                ],
            )
        except Exception:  # noqa: BLE001 - they become visible at the end of the hold anyway
            pass


def delete(sqs: Any, queue_url: str, messages: Sequence[Message]) -> list[Message]:
    """Delete the messages; returns those SQS refused to delete."""
    failed: list[Message] = []
    for chunk in _batches(messages):
        answer = sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(n), "ReceiptHandle": m.receipt} for n, m in enumerate(chunk)],
        )
        failed.extend(chunk[int(entry["Id"])] for entry in answer.get("Failed", []))
    return failed



def open_deployment(
    env: str, workflow: str, region: str | None = None, endpoint_url: str | None = None
) -> tuple[Aws, Deployment]:
    """The AWS session (``region``, else the environment's) and the deployed ``workflow`` stack of ``env``."""
    cfg = environment(env)
    aws = Aws(region or cfg.region, endpoint_url)
    return aws, find_deployment(aws, cfg, workflow)


@dataclass
class DlqListing:
    """What ``list_messages`` found."""

    deployment: Deployment
    region: str
    messages: list[Message]  # the visible ones (of the batch, if one was asked for)
    in_flight: int  # hidden by another reader right now: not read


def list_messages(
    env: str, workflow: str, batch_id: str | None = None, *, region: str | None = None,
    endpoint_url: str | None = None,
) -> DlqListing:
    """The dead-letter messages of the deployed ``workflow`` of ``env`` (only ``batch_id``'s if
    given), peeked: they are visible again in the queue when this returns."""
    aws, deployment = open_deployment(env, workflow, region, endpoint_url)
    sqs = aws.client("sqs")
    messages, in_flight = peek(sqs, deployment.queue_url, LIST_HOLD_SECONDS)
    try:
        shown = [m for m in messages if not batch_id or m.batch_id == batch_id]
    finally:
        release(sqs, deployment.queue_url, messages)
    return DlqListing(deployment, aws.region, shown, in_flight)

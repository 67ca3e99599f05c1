"""Producer side of the completion ledger: builds a demo batch (N child messages carrying batchId,
total and index) and sends it to SQS or Kinesis through a boto3 client passed in.

CLI (from lambdas/, with AWS credentials or an endpoint of an emulator)::

    python -m fanout_kit.local.ledger_producer --sqs QUEUE_URL --batch-id demo-1 --children 25
    python -m fanout_kit.local.ledger_producer --kinesis STREAM_ARN --batch-id demo-2 --children 25 \
        --fail 3,7 --no-total --register-table LEDGER_TABLE

``--no-total`` leaves the total out of the messages (the batch must then be registered up front,
``--register-table``); ``--fail`` makes those children fail permanently (simulateFailure).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from typing import Any


def demo_messages(
    batch_id: str,
    children: int,
    *,
    include_total: bool = True,
    fail: Iterable[int] = (),
    payload: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    failing = set(fail)
    messages = []
    for index in range(children):
        body: dict[str, Any] = {"batchId": batch_id, "index": index, "payload": dict(payload or {})}
        if include_total:
            body["total"] = children
        if index in failing:
            body["payload"]["simulateFailure"] = {"mode": "permanent"}
        messages.append(body)
    return messages


def send_to_sqs(client: Any, queue_url: str, messages: Sequence[dict[str, Any]]) -> int:
    """SendMessageBatch in groups of 10; raises if SQS refuses any message."""
    sent = 0
    for start in range(0, len(messages), 10):
        chunk = messages[start : start + 10]
        response = client.send_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "MessageBody": json.dumps(m)} for i, m in enumerate(chunk)],
        )
        if response.get("Failed"):
            raise RuntimeError(f"SQS refused {len(response['Failed'])} message(s): {response['Failed']}")
        sent += len(chunk)
    return sent


def send_to_kinesis(
    client: Any, stream_arn: str, messages: Sequence[dict[str, Any]], *, max_attempts: int = 5
) -> int:
    """PutRecords in groups of 500, partition key batchId#index (spreads a batch over shards);
    records Kinesis reports as failed (throttling) are sent again."""
    sent = 0
    for start in range(0, len(messages), 500):
        pending = [
            {"Data": json.dumps(m).encode(), "PartitionKey": f"{m['batchId']}#{m.get('index', m.get('childId'))}"}
            for m in messages[start : start + 500]
        ]
        for _ in range(max_attempts):
            response = client.put_records(StreamARN=stream_arn, Records=pending)
            failed = [rec for rec, res in zip(pending, response["Records"]) if res.get("ErrorCode")]
            sent += len(pending) - len(failed)
            pending = failed
            if not pending:
                break
        if pending:
            raise RuntimeError(f"Kinesis refused {len(pending)} record(s) after {max_attempts} attempts")
    return sent


def main(argv: Sequence[str] | None = None) -> int:
    import boto3

    from .ledger import Ledger

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--sqs", metavar="QUEUE_URL")
    target.add_argument("--kinesis", metavar="STREAM_ARN")
    parser.add_argument("--batch-id", required=True)
    parser.add_argument("--children", type=int, required=True)
    parser.add_argument("--fail", default="", help="comma-separated indexes that fail permanently")
    parser.add_argument("--no-total", action="store_true")
    parser.add_argument("--register-table", metavar="LEDGER_TABLE")
    parser.add_argument("--endpoint-url")
    args = parser.parse_args(argv)
    fail = [int(i) for i in args.fail.split(",") if i.strip()]
    if args.register_table:
        client = boto3.client("dynamodb", endpoint_url=args.endpoint_url)
        print(Ledger(client, args.register_table).register_batch(args.batch_id, args.children).to_dict())
    messages = demo_messages(args.batch_id, args.children, include_total=not args.no_total, fail=fail)
    if args.sqs:
        sent = send_to_sqs(boto3.client("sqs", endpoint_url=args.endpoint_url), args.sqs, messages)
    else:
        sent = send_to_kinesis(boto3.client("kinesis", endpoint_url=args.endpoint_url), args.kinesis, messages)
    print(json.dumps({"batchId": args.batch_id, "sent": sent}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where a batch's results are read from: a deployed stack (``AwsSource``: read-only calls GetItem,
GetExecutionHistory, GetObject, Query) or what ``fanout run`` / ``fanout ledger`` saved of a local
batch (``LocalSource``: the same objects, pages and items as files, in ``local_state_dir()``;
``save_local_batch`` writes them). The readers (``fanout_kit.ops.result_readers``) run on either."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fanout_kit.shared.errors import CliError
from fanout_kit.shared.final_status import read_status
from fanout_kit.patterns.distributed_map.json_stream import READ_CHUNK_BYTES, iter_json_array
from fanout_kit.patterns.distributed_map.result_files import MAX_ENTRY_BYTES


WORKFLOWS = ("parallel", "map", "ledger")
FORMATS = ("table", "json", "csv")
HISTORY_PAGE = 1000  # GetExecutionHistory's maxResults
MAP_GROUPS = ("SUCCEEDED", "FAILED", "PENDING")  # the ResultWriter manifest's ResultFiles groups
STATE_DIR_ENV = "FANOUT_STATE_DIR"
DLQ_MESSAGE = re.compile(r"\(message ([^)\s]+)\)")  # the ledger DLQ recorder's reason


class ResultsError(CliError):
    """One line naming what is missing and the fix; exit code 2 like the other ops commands'."""


@dataclass(frozen=True)
class Target:
    """Where one workflow keeps a batch's records: its status table, and the Map's batch data
    bucket or the ledger's table (a deployed stack's outputs)."""

    workflow: str
    status_table: str
    batch_bucket: str | None = None
    ledger_table: str | None = None
    where: str = ""  # for messages: "stack X (env, region)"


def target_of(deployment: Any, where: str = "") -> Target:
    """The Target of a ``fanout_kit.ops.aws.Deployment``."""
    workflow = deployment.workflow
    return Target(
        workflow=workflow,
        status_table=deployment.status_table,
        batch_bucket=deployment.batch_bucket if workflow == "map" else None,
        ledger_table=deployment.ledger_table if workflow == "ledger" else None,
        where=where or f"stack {deployment.stack_name} ({deployment.region})",
    )


# --------------------------------------------------------------------------- sources
class AwsSource:
    """Read-only AWS calls: ``client(service)`` gives a boto3 client (``fanout_kit.ops.aws.Aws.client``,
    or a LocalEngine's)."""

    def __init__(self, client: Callable[[str], Any]):
        self._make = client
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = self._make(service)
        return self._clients[service]

    def status_record(self, table: str, batch_id: str) -> dict[str, Any] | None:
        return read_status(self.client("dynamodb"), table, batch_id)

    def history_pages(self, execution_arn: str) -> Iterator[list[dict[str, Any]]]:
        sfn = self.client("stepfunctions")
        kwargs: dict[str, Any] = {"executionArn": execution_arn, "maxResults": HISTORY_PAGE}
        while True:
            page = sfn.get_execution_history(**kwargs)
            yield page["events"]
            if not page.get("nextToken"):
                return
            kwargs["nextToken"] = page["nextToken"]

    def read_json(self, bucket: str, key: str) -> Any:
        return json.loads(self.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read())

    def read_chunks(self, bucket: str, key: str) -> Iterator[bytes]:
        body = self.client("s3").get_object(Bucket=bucket, Key=key)["Body"]
        yield from body.iter_chunks(chunk_size=READ_CHUNK_BYTES)

    def get_item(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        return self.client("dynamodb").get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")

    def query_pages(self, table: str, pk: str, sk_prefix: str) -> Iterator[list[dict[str, Any]]]:
        kwargs: dict[str, Any] = {"TableName": table, "KeyConditionExpression": "pk = :pk",
                                  "ExpressionAttributeValues": {":pk": {"S": pk}}}
        if sk_prefix:  # (DynamoDB refuses an empty begins_with)
            kwargs["KeyConditionExpression"] += " AND begins_with(sk, :prefix)"
            kwargs["ExpressionAttributeValues"][":prefix"] = {"S": sk_prefix}
        dynamodb = self.client("dynamodb")
        while True:
            page = dynamodb.query(**kwargs)
            yield page.get("Items", [])
            if not page.get("LastEvaluatedKey"):
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class LocalSource:
    """What ``save_local_batch`` kept of a local batch, in the shapes the AWS calls return:
    ``record.json`` (the status record and the stack's outputs), ``history/<hash>.json`` (the
    execution's events), ``s3/<bucket>/<key>`` (the ResultWriter files), ``dynamodb/<table>/<hash>.jsonl``
    (a partition's items, one per line, as DynamoDB returns them)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.saved = json.loads((folder / "record.json").read_text())

    def status_record(self, table: str, batch_id: str) -> dict[str, Any] | None:
        if self.saved.get("batchId") != batch_id or self.saved["target"]["status_table"] != table:
            return None
        return self.saved.get("record")

    def history_pages(self, execution_arn: str) -> Iterator[list[dict[str, Any]]]:
        path = self.folder / "history" / f"{_digest(execution_arn)}.json"
        page: list[dict[str, Any]] = []
        for event in iter_json_array(_file_chunks(path), str(path), max_value_bytes=MAX_ENTRY_BYTES):
            page.append(event)
            if len(page) == HISTORY_PAGE:
                yield page
                page = []
        yield page

    def _object(self, bucket: str, key: str) -> Path:
        return self.folder / "s3" / bucket / key

    def read_json(self, bucket: str, key: str) -> Any:
        return json.loads(self._object(bucket, key).read_bytes())

    def read_chunks(self, bucket: str, key: str) -> Iterator[bytes]:
        return _file_chunks(self._object(bucket, key))

    def _partition(self, table: str, pk: str) -> Iterator[dict[str, Any]]:
        path = self.folder / "dynamodb" / table / f"{_digest(pk)}.jsonl"
        if not path.is_file():
            return
        with path.open() as lines:
            for line in lines:
                yield json.loads(line)

    def get_item(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        return next((i for i in self._partition(table, key["pk"]["S"]) if i["sk"] == key["sk"]), None)

    def query_pages(self, table: str, pk: str, sk_prefix: str) -> Iterator[list[dict[str, Any]]]:
        page: list[dict[str, Any]] = []
        for item in self._partition(table, pk):
            if item["sk"]["S"].startswith(sk_prefix):
                page.append(item)
                if len(page) == HISTORY_PAGE:
                    yield page
                    page = []
        yield page


def _file_chunks(path: Path, size: int = READ_CHUNK_BYTES) -> Iterator[bytes]:
    with path.open("rb") as stream:
        while chunk := stream.read(size):
            yield chunk


# --------------------------------------------------------------------------- readers

def local_state_dir() -> Path:
    """Where ``fanout run`` / ``fanout ledger`` keep what ``fanout results --local`` reads:
    $FANOUT_STATE_DIR, else .fanout-cache/batches in the current directory."""
    configured = os.environ.get(STATE_DIR_ENV)
    return Path(configured) if configured else Path.cwd() / ".fanout-cache" / "batches"


def batch_folder(batch_id: str, root: Path | None = None) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", batch_id)[:60]
    return (root or local_state_dir()) / f"{safe}-{_digest(batch_id)[:10]}"

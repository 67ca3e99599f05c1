"""ForwardFailedItems and `fanout dlq redrive --workflow map` read the Distributed Map's result
files streamed, one child entry at a time (fanout_kit.patterns.distributed_map.result_files, fanout_kit.patterns.distributed_map.json_stream):
a FAILED file of 400,000 items is some 200 MB of JSON, more than the function's 256 MB once parsed
whole. benchmarks/forward_failed_benchmark.py measures the full case; here, the same handler on a
smaller file, with its memory measured."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from fanout_kit.local.moto_lambda import LambdaContext, LocalFunction

ITEMS_PER_BATCH = 20
EXEC = "arn:aws:states:eu-west-1:123456789012:execution:sm:run"


def entry(child: int, status: str = "TIMED_OUT", error: str | None = None) -> dict:
    first = child * ITEMS_PER_BATCH
    items = [{"index": i, "item": {"imageId": f"img-{i}", "pad": "x" * 40}} for i in range(first, first + ITEMS_PER_BATCH)]
    return {
        "ExecutionArn": f"{EXEC}-child-{child}", "Status": status, "Error": error,
        "Input": json.dumps({"Items": items, "BatchInput": {"batchId": "b1", "executionArn": EXEC}}),
        "StopDate": "2026-12-04T12:05:00Z",
    }


class StreamOnly:
    """An S3 object body that can only be streamed: reading it whole is the defect."""

    def __init__(self, data: bytes, chunk: int):
        self.data, self.chunk = data, chunk

    def iter_chunks(self, chunk_size: int = 1024):
        for i in range(0, len(self.data), self.chunk):
            yield self.data[i : i + self.chunk]

    def read(self):
        raise AssertionError("a result file was read whole")


class FakeS3:
    def __init__(self, files: dict[str, list[dict]], chunk: int = 64 * 1024):
        self.files = {k: json.dumps(v).encode() for k, v in files.items()}
        self.chunk = chunk

    def get_object(self, Bucket, Key):  # noqa: N803
        if Key.endswith("manifest.json"):
            groups = {"FAILED": [], "PENDING": [], "SUCCEEDED": []}
            for key in self.files:
                groups[key.rsplit("/", 1)[1].split("_")[0]].append({"Key": key})
            return {"Body": _Whole(json.dumps({"ResultFiles": groups}).encode())}
        return {"Body": StreamOnly(self.files[Key], self.chunk)}


class _Whole:
    def __init__(self, data):
        self.data = data

    def read(self):
        return self.data


class CountingSqs:
    """Keeps what was sent, or only counts it (``keep=False``: nothing that grows with N)."""

    def __init__(self, keep: bool = True):
        self.keep, self.bodies, self.messages, self.index_sum = keep, [], 0, 0

    def send_message_batch(self, QueueUrl, Entries):  # noqa: N803
        assert len(Entries) <= 10
        for e in Entries:
            body = json.loads(e["MessageBody"])
            self.messages += 1
            self.index_sum += sum(i["index"] for i in body["items"])
            if self.keep:
                self.bodies.append(body)
        return {"Successful": [{"Id": e["Id"]} for e in Entries]}


@pytest.fixture
def forward(monkeypatch):
    monkeypatch.setenv("DLQ_URL", "https://sqs.local/q")
    monkeypatch.setenv("TASK_NAME", "ProcessItem")
    from fanout_kit.patterns.distributed_map.handlers import forward_failed_items

    context = LambdaContext(LocalFunction("ForwardFailedItems", "forward_failed_items.handler"), "eu-west-1", "123456789012")

    def run(s3, keep=True):
        sqs = CountingSqs(keep)
        monkeypatch.setattr(forward_failed_items, "_clients", lambda: (s3, sqs))
        event = {"batchId": "b1", "executionArn": EXEC, "resultWriterDetails": {"Bucket": "b", "Key": "results/run/manifest.json"}}
        return forward_failed_items.handler(event, context), sqs

    return run


@pytest.mark.parametrize("chunk", [7, 64 * 1024])
def test_forward_failed_items_streams_every_result_file(forward, chunk):
    """Entries split across reads at any byte, two FAILED files and a PENDING one: every child that
    did not reach its own DLQ step is forwarded, the dead-lettered ones only counted."""
    s3 = FakeS3(
        {
            "results/run/FAILED_0.json": [entry(0), entry(1, "FAILED", "ItemsDeadLettered"), entry(2, "FAILED", "DeadLetterSendFailed")],
            "results/run/FAILED_1.json": [entry(3, "ABORTED")],
            "results/run/PENDING_0.json": [entry(4, "PENDING")],
            "results/run/SUCCEEDED_0.json": [entry(5, "SUCCEEDED")],
        },
        chunk,
    )
    out, sqs = forward(s3)
    assert out == {"forwarded": 4 * ITEMS_PER_BATCH, "alreadyDeadLettered": ITEMS_PER_BATCH}
    forwarded = sorted(i["index"] for body in sqs.bodies for i in body["items"])
    assert forwarded == sorted(i for c in (0, 2, 3, 4) for i in range(c * ITEMS_PER_BATCH, (c + 1) * ITEMS_PER_BATCH))


def test_forward_failed_items_memory_holds_an_entry_not_the_file(forward):
    """2,000 timed-out children (40,000 items, ~5 MB of JSON): the Python peak while forwarding
    stays a small fraction of the file (it held the whole parsed file before: several times it)."""
    children = 2_000
    s3 = FakeS3({"results/run/FAILED_0.json": [entry(c) for c in range(children)]})
    size = len(s3.files["results/run/FAILED_0.json"])
    forward(FakeS3({"results/run/FAILED_0.json": [entry(0)]}))  # warm: first-call imports are not the file
    tracemalloc.start()
    try:
        out, sqs = forward(s3, keep=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    n = children * ITEMS_PER_BATCH
    assert out["forwarded"] == n and sqs.messages == children and sqs.index_sum == n * (n - 1) // 2
    assert peak < size / 10, (peak, size)  # measured: ~0.3 MB for a 5 MB file (it was ~25 MB)


def test_the_cli_map_redrive_reads_result_files_streamed():
    from fanout_kit.ops.redrive import _result_items

    s3 = FakeS3({"results/run/FAILED_0.json": [entry(0), entry(1, "SUCCEEDED")], "results/run/PENDING_0.json": [entry(2, "PENDING")]}, 5)
    items = _result_items(s3, "b", "results/run/manifest.json")
    assert [i["index"] for i in items] == [*range(0, 20), *range(40, 60)]

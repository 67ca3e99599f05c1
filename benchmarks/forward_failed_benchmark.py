"""Benchmark: peak memory of ForwardFailedItems on a map run with N failed items (not a test).

    .venv/bin/python benchmarks/forward_failed_benchmark.py                # 400,000 failed items
    .venv/bin/python benchmarks/forward_failed_benchmark.py --items 100000 --json

The map run's ResultWriter output is generated on the fly as the function reads it (a FAILED
result file of N / itemsPerBatch child executions, every child timed out, so every item is
forwarded: the worst case), served by a stand-in S3 client in 64 KiB reads, and sent to a
stand-in SQS client that only counts. So what is measured is the function's own memory:

* ``streamed``: the handler as deployed (result files parsed one child entry at a time);
* ``whole``: the same file read whole and parsed with ``json.loads``, as the handler did before.

Each mode runs in a fresh subprocess and reports its peak RSS (``ru_maxrss``: the interpreter,
boto3 and Powertools included, as the function's memory setting must hold them) and its peak of
Python allocations while the handler runs (``tracemalloc``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ITEMS_PER_BATCH = 20  # prod's itemsPerBatch
FUNCTION_MEMORY_MB = 256  # ForwardFailedItems' memory size (KitFunction)


PAD = 16  # bytes of padding per item (--pad)


def entry(child: int) -> str:
    """One result-file entry: a child execution that timed out with its batch's items."""
    first = child * ITEMS_PER_BATCH
    items = [{"index": i, "item": {"imageId": f"img-{i}", "width": i % 1000, "tag": "x" * PAD}} for i in range(first, first + ITEMS_PER_BATCH)]
    child_input = {"Items": items, "BatchInput": {"batchId": "bench", "executionArn": "arn:aws:states:eu-west-1:123456789012:execution:sm:run"}}
    return json.dumps({
        "ExecutionArn": f"arn:aws:states:eu-west-1:123456789012:express:sm/ProcessItemsJSON:{child:08d}",
        "Input": json.dumps(child_input), "InputDetails": {"Included": True},
        "Name": f"{child:08d}", "Status": "TIMED_OUT", "StartDate": "2026-12-04T12:00:00Z", "StopDate": "2026-12-04T12:05:00Z",
    })


def result_file(children: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    buf = bytearray(b"[")
    for child in range(children):
        buf += (("," if child else "") + entry(child)).encode()
        while len(buf) >= chunk:
            yield bytes(buf[:chunk])
            del buf[:chunk]
    buf += b"]"
    yield bytes(buf)


class Body:
    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks

    def iter_chunks(self, chunk_size: int = 1024) -> Iterator[bytes]:
        return self._chunks

    def read(self) -> bytes:
        return b"".join(self._chunks)


class FakeS3:
    def __init__(self, children: int):
        self.children = children

    def get_object(self, Bucket: str, Key: str) -> dict:  # noqa: N803 - boto3's names
        if Key.endswith("manifest.json"):
            manifest = {"ResultFiles": {"FAILED": [{"Key": "results/run/FAILED_0.json"}], "SUCCEEDED": [], "PENDING": []}}
            return {"Body": Body(iter([json.dumps(manifest).encode()]))}
        return {"Body": Body(result_file(self.children))}


class CountingSqs:
    def __init__(self):
        self.messages = self.requests = 0

    def send_message_batch(self, QueueUrl: str, Entries: list) -> dict:  # noqa: N803
        self.messages += len(Entries)
        self.requests += 1
        return {"Successful": [{"Id": e["Id"]} for e in Entries]}


class Context:
    """The Lambda context attributes Powertools reads (no emulator imported: its memory is not the
    function's)."""

    function_name = "ForwardFailedItems"
    function_version = "$LATEST"
    memory_limit_in_mb = FUNCTION_MEMORY_MB
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:ForwardFailedItems"
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    log_group_name = "/aws/lambda/ForwardFailedItems"
    log_stream_name = "bench"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 300_000


def measure(mode: str, items: int) -> dict:
    """In this process: run the handler (or the old whole-file parse) and report."""
    os.environ.update({"DLQ_URL": "https://sqs.local/q", "TASK_NAME": "ProcessItem", "POWERTOOLS_LOG_LEVEL": "ERROR",
                       "POWERTOOLS_TRACE_DISABLED": "true", "AWS_DEFAULT_REGION": "eu-west-1"})
    sys.path[:0] = [str(ROOT), str(ROOT / "lambdas")]
    from fanout_kit.patterns.distributed_map.handlers import forward_failed_items  # the deployed handler, boto3 and Powertools with it

    children = items // ITEMS_PER_BATCH
    context = Context()
    s3, sqs = FakeS3(children), CountingSqs()
    forward_failed_items._clients = lambda: (s3, sqs)
    baseline_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    started, cpu_started = time.monotonic(), time.process_time()
    if mode == "streamed":
        out = forward_failed_items.handler(
            {"batchId": "bench", "executionArn": "arn:aws:states:eu-west-1:123456789012:execution:sm:run",
             "resultWriterDetails": {"Bucket": "b", "Key": "results/run/manifest.json"}},
            context,
        )
        forwarded = out["forwarded"]
    else:
        entries = json.loads(s3.get_object(Bucket="b", Key="results/run/FAILED_0.json")["Body"].read())
        forwarded = sum(len(json.loads(e["Input"])["Items"]) for e in entries)
    seconds, cpu = time.monotonic() - started, time.process_time() - cpu_started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert forwarded == children * ITEMS_PER_BATCH, forwarded
    return {
        "mode": mode,
        "failed_items": forwarded,
        "children": children,
        "dlq_messages": sqs.messages,
        "send_requests": sqs.requests,
        "python_peak_mib": round(peak / 2**20, 1),
        "rss_before_mib": round(baseline_rss / 1024, 1),
        "rss_peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "function_memory_mb": FUNCTION_MEMORY_MB,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),  # the result file's generation included (~1 s)
    }


def main(argv: list[str] | None = None) -> None:  # noqa: PLW0603 (PAD: one setting of this script)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=400_000, help="failed items (default 400,000)")
    parser.add_argument("--pad", type=int, default=16, help="padding bytes per item (default 16: ~70-byte items)")
    parser.add_argument("--json", action="store_true", help="one JSON object per mode on its own line")
    parser.add_argument("--mode", choices=("streamed", "whole"), help=argparse.SUPPRESS)  # the subprocess
    args = parser.parse_args(argv)
    global PAD
    PAD = args.pad
    if args.mode:
        print(json.dumps(measure(args.mode, args.items)))
        return
    file_bytes = sum(len(c) for c in result_file(args.items // ITEMS_PER_BATCH))
    for mode in ("streamed", "whole"):
        done = subprocess.run([sys.executable, __file__, "--mode", mode, "--items", str(args.items), "--pad", str(args.pad)],
                              capture_output=True, text=True, check=True)
        r = {**json.loads(done.stdout.strip().splitlines()[-1]), "result_file_mib": round(file_bytes / 2**20, 1)}
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            fits = "fits" if r["rss_peak_mib"] < FUNCTION_MEMORY_MB else "does NOT fit"
            print(f"{mode:>8}: {r['failed_items']:,} failed items ({r['children']:,} children, result file "
                  f"{r['result_file_mib']} MiB): peak RSS {r['rss_peak_mib']} MiB (before the handler "
                  f"{r['rss_before_mib']}), Python peak {r['python_peak_mib']} MiB, {r['dlq_messages']:,} DLQ messages in "
                  f"{r['send_requests']:,} requests, {r['seconds']} s ({r['cpu_seconds']} s CPU): {fits} in {FUNCTION_MEMORY_MB} MB")


if __name__ == "__main__":
    main()

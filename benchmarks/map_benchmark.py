"""Benchmark: the Distributed Map workflow on the embedded engine for N items (not a test).

    .venv/bin/python benchmarks/map_benchmark.py                     # N = 1,000, 10,000, 100,000 (prod)
    .venv/bin/python benchmarks/map_benchmark.py --json 1000 10000   # one JSON object per N per line
    .venv/bin/python benchmarks/map_benchmark.py --env dev 500       # another environment's batching
    .venv/bin/python benchmarks/map_benchmark.py --prepare-memory 1000000

For each N (a JSON manifest in S3, nothing fails, Retry waits not slept): wall time, items per
second, DynamoDB write operations per item (counted on the emulator: each item of a
TransactWriteItems counts, as DynamoDB bills it), Lambda invocations per item, parent state
transitions and history events, and transitions per item (parent's share plus the child's happy
path per batch of ``itemsPerBatch`` items). The counts come from the map run (DescribeMapRun).

``--prepare-memory N``: peak Python memory (tracemalloc) of PrepareBatch's manifest check on an
N-item JSON manifest streamed in 64 KiB reads, against reading it whole (json.loads) as before.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

from fanout_kit.shared.jsii_node import use_venv_node  # noqa: E402

use_venv_node()

from moto.dynamodb.models import DynamoDBBackend  # noqa: E402

from fanout_kit.local.engine import LocalEngine  # noqa: E402
from fanout_kit.local.history import state_transitions  # noqa: E402
from fanout_kit.local.template import state_machine_definitions, synthesize  # noqa: E402
from fanout_kit.shared.asl_graph import happy_path_transitions  # noqa: E402


class WriteCounter:
    """Counts DynamoDB requests and billable write operations reaching the emulator."""

    OPS = ("put_item", "update_item", "delete_item", "transact_write_items")

    def __init__(self) -> None:
        self.requests: Counter = Counter()
        self.writes = 0
        self._originals = {}
        self._depth = threading.local()  # moto's TransactWriteItems calls put/update_item itself

    def __enter__(self) -> "WriteCounter":
        for name in self.OPS:
            original = getattr(DynamoDBBackend, name)
            self._originals[name] = original

            def wrapper(backend, *args, _name=name, _original=original, **kwargs):
                depth = getattr(self._depth, "n", 0)
                if depth == 0:
                    self.requests[_name] += 1
                    if _name == "transact_write_items":
                        items = args[0] if args else kwargs["transact_items"]
                        self.writes += sum(1 for i in items if next(iter(i)) != "ConditionCheck")
                    else:
                        self.writes += 1
                self._depth.n = depth + 1
                try:
                    return _original(backend, *args, **kwargs)
                finally:
                    self._depth.n = depth

            setattr(DynamoDBBackend, name, wrapper)
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self._originals.items():
            setattr(DynamoDBBackend, name, original)


def _processor(app) -> dict:
    (asl,) = state_machine_definitions(app.template("map"), app.region).values()
    return asl["States"]["ProcessItems JSON"]


def run(n: int, app) -> dict:
    state = _processor(app)
    per_batch = state["ItemBatcher"]["MaxItemsPerBatch"]
    with LocalEngine(app, workflows=("map",), sleep_retries=False) as engine:
        items = [{"imageId": f"img-{i}", "width": i % 1000} for i in range(n)]
        manifest = engine.upload_manifest(f"manifests/bench-{n}.json", json.dumps(items).encode())
        with WriteCounter() as counter:
            started = time.monotonic()
            result = engine.run("map", {"batchId": f"bench-{n}", "manifest": manifest}, poll_seconds=0.5)
            seconds = time.monotonic() - started
        counts = engine.map_run_counts(result.arn)
        invocations = len(engine.router.invocations)
    if result.status != "SUCCEEDED" or counts["succeeded"] != n:
        raise SystemExit(f"N={n}: {result.status} {result.error} {result.cause} {counts}")
    parent = state_transitions(result.history)
    return {
        "n": n,
        "items_per_batch": per_batch,
        "seconds": round(seconds, 2),
        "items_per_s": round(n / seconds, 1),
        "ddb_writes_per_item": counter.writes / n,
        "ddb_requests_per_item": sum(counter.requests.values()) / n,
        "lambda_invocations_per_item": round(invocations / n, 4),
        "parent_transitions": parent,
        "transitions_per_item": round(parent / n + happy_path_transitions(state["ItemProcessor"]) / per_batch, 4),
        "parent_history_events": len(result.history),
        "map_run_counts": counts,
    }


def prepare_memory(n: int) -> dict:
    """Peak memory of the manifest check, streamed (PrepareBatch) vs read whole (before)."""
    from fanout_kit.patterns.distributed_map.manifest import READ_CHUNK_BYTES, count_items, iter_manifest

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write("[")
        for i in range(n):
            f.write(("," if i else "") + json.dumps({"imageId": f"img-{i}", "width": i % 1000, "tag": "x" * 16}))
        f.write("]")
    size = Path(f.name).stat().st_size

    def chunks():
        with open(f.name, "rb") as stream:
            while piece := stream.read(READ_CHUNK_BYTES):
                yield piece

    tracemalloc.start()
    started = time.monotonic()
    total = count_items(iter_manifest(chunks(), "JSON", "bench", max_item_bytes=8192), max_item_bytes=8192, where="bench")
    streamed_s = time.monotonic() - started
    streamed_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    whole = json.loads(Path(f.name).read_bytes())
    whole_peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    del whole
    os.unlink(f.name)
    assert total == n
    return {
        "prepare_memory_items": n,
        "manifest_bytes": size,
        "streamed_peak_bytes": streamed_peak,
        "streamed_seconds": round(streamed_s, 1),
        "whole_file_peak_bytes": whole_peak,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, help="item counts (default 1000 10000 100000)")
    parser.add_argument("--env", default="prod", help="environment whose batching to use (default prod)")
    parser.add_argument("--json", action="store_true", help="one JSON object per N on its own line")
    parser.add_argument("--prepare-memory", type=int, metavar="N", help="measure PrepareBatch's memory instead")
    args = parser.parse_args(argv)
    if args.prepare_memory:
        r = prepare_memory(args.prepare_memory)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            mib = 1024 * 1024
            print(f"{r['prepare_memory_items']:,} items, manifest {r['manifest_bytes'] / mib:.1f} MiB: streamed peak "
                  f"{r['streamed_peak_bytes'] / mib:.2f} MiB in {r['streamed_seconds']} s; read whole peak "
                  f"{r['whole_file_peak_bytes'] / mib:.0f} MiB")
        return
    app = synthesize(args.env)
    if not args.json:
        print(f"{'N':>8} {'batch':>5} {'wall s':>8} {'items/s':>8} {'DDB writes/item':>16} {'Lambda/item':>12} "
              f"{'parent transitions':>19} {'transitions/item':>17} {'parent history':>15}")
    for n in args.sizes or [1_000, 10_000, 100_000]:
        r = run(n, app)
        if args.json:
            print(json.dumps(r), flush=True)
        else:
            print(f"{r['n']:>8} {r['items_per_batch']:>5} {r['seconds']:>8.1f} {r['items_per_s']:>8.0f} "
                  f"{r['ddb_writes_per_item']:>16.2f} {r['lambda_invocations_per_item']:>12.4f} "
                  f"{r['parent_transitions']:>19} {r['transitions_per_item']:>17.4f} {r['parent_history_events']:>15}",
                  flush=True)


if __name__ == "__main__":
    main()

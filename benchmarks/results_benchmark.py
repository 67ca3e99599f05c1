"""Benchmark: ``fanout results`` on a Map batch of N items, its memory and speed (not a test).

    .venv/bin/python benchmarks/results_benchmark.py                 # 1,000,000 items, batches of 20
    .venv/bin/python benchmarks/results_benchmark.py --items 100000 --poison 3 --json

Writes a synthetic ResultWriter output of a map run (``manifest.json``, ``SUCCEEDED_0.json``,
``FAILED_0.json``, in the shape Step Functions writes: one entry per child execution, its ``Input``
the child's ItemBatcher input ``{"Items": [{"index", "item"}...], "BatchInput"}`` as a JSON string)
into the directory layout ``fanout_kit.ops.results.LocalSource`` reads (the same ``read_json`` /
``read_chunks`` interface as S3's ``AwsSource``: 64 KiB reads), with ``--poison`` children FAILED
(``ItemsDeadLettered``: a poison item fails its whole batch today). Then, each in a fresh
subprocess, reads it with the same reader as ``fanout results``:

* ``failed``: ``outcomes(failed_only=True)`` (``--failed``: the SUCCEEDED file is not opened);
* ``all``: ``outcomes()``, every item;
* ``all-csv``: every item written as CSV to /dev/null (``fanout results --format csv``).

Each reports its items, items/s, its peak RSS (``ru_maxrss``: the interpreter and the kit's
imports included) and, in a second pass, the peak of Python allocations while reading
(``tracemalloc``), which is what would grow with N if anything were collected.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ITEMS_PER_BATCH = 20  # prod's itemsPerBatch
BUCKET = "batch-bucket"
PREFIX = "results/0b7c6c1e-bench"
MODES = ("failed", "all", "all-csv")


def entry(child: int, items_per_batch: int, total: int, failed: bool) -> dict:
    first = child * items_per_batch
    items = [{"index": i, "item": {"imageId": f"img-{i}", "width": i % 1000}} for i in range(first, min(first + items_per_batch, total))]
    child_input = {"Items": items, "BatchInput": {"batchId": "bench", "executionArn": "arn:aws:states:eu-west-1:123456789012:execution:sm:run"}}
    out = {
        "ExecutionArn": f"arn:aws:states:eu-west-1:123456789012:express:sm/ProcessItemsJSON:{child:08d}",
        "Input": json.dumps(child_input), "InputDetails": {"Included": True},
        "Name": f"{child:08d}", "StartDate": "2026-12-04T12:00:00.000Z", "StopDate": "2026-12-04T12:00:01.000Z",
        "StateMachineArn": "arn:aws:states:eu-west-1:123456789012:stateMachine:sm/ProcessItemsJSON",
        "RedriveCount": 0, "RedriveStatus": "NOT_REDRIVABLE",
    }
    if failed:
        out.update(Status="FAILED", Error="ItemsDeadLettered",
                   Cause=json.dumps({"errorMessage": f"poison item in child {child}", "errorType": "RetryableTaskError"}))
    else:
        out.update(Status="SUCCEEDED", Output=json.dumps({"processed": len(items)}), OutputDetails={"Included": True})
    return out


def write_run(folder: Path, total: int, items_per_batch: int, poison: int) -> dict:
    """The map run's ResultWriter output under ``folder`` (LocalSource's layout); returns sizes."""
    children = -(-total // items_per_batch)
    poisoned = {children * (k + 1) // (poison + 1) for k in range(poison)}
    base = folder / "s3" / BUCKET / PREFIX
    base.mkdir(parents=True)
    files: dict[str, list[dict]] = {}
    for group in ("SUCCEEDED", "FAILED"):
        path = base / f"{group}_0.json"
        with path.open("w") as stream:
            stream.write("[")
            first = True
            for child in range(children):
                if (child in poisoned) != (group == "FAILED"):
                    continue
                stream.write(("" if first else ",") + json.dumps(entry(child, items_per_batch, total, child in poisoned)))
                first = False
            stream.write("]")
        files[group] = [{"Key": f"{PREFIX}/{group}_0.json", "Size": path.stat().st_size}]
    manifest = {"DestinationBucket": BUCKET, "MapRunArn": "arn:aws:states:eu-west-1:123456789012:mapRun:sm/ProcessItemsJSON:bench",
                "ResultFiles": {**files, "PENDING": []}}
    (base / "manifest.json").write_text(json.dumps(manifest))
    (folder / "record.json").write_text(json.dumps({
        "batchId": "bench", "record": {"status": "FAILED", "resultsKey": f"{PREFIX}/manifest.json"},
        "target": {"workflow": "map", "status_table": "t", "batch_bucket": BUCKET, "ledger_table": None}}))
    return {"children": children, "poisoned_children": sorted(poisoned),
            "bytes": {g: files[g][0]["Size"] for g in files}}


def read(folder: Path, mode: str) -> dict:
    """One mode, in this (fresh) process."""
    sys.path[:0] = [str(ROOT), str(ROOT / "lambdas")]
    from fanout_kit.ops.results import LocalSource, map_outcomes, write_outcomes

    source = LocalSource(folder)
    key = f"{PREFIX}/manifest.json"
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def run() -> tuple[int, int]:
        outcomes = map_outcomes(source, BUCKET, key, failed_only=mode == "failed")
        if mode == "all-csv":
            with open(os.devnull, "w") as sink:
                return write_outcomes(outcomes, "csv", sink)
        count = failed = 0
        for outcome in outcomes:
            count += 1
            failed += outcome.failed
        return count, failed

    started = time.perf_counter()
    items, failed = run()
    seconds = time.perf_counter() - started
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    run()
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"mode": mode, "items": items, "failed": failed, "seconds": round(seconds, 2),
            "items_per_second": round(items / seconds) if seconds else None,
            "peak_rss_mb": round(rss_after / 1024, 1), "rss_before_reading_mb": round(rss_before / 1024, 1),
            "tracemalloc_peak_kb": round(traced_peak / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--items-per-batch", type=int, default=ITEMS_PER_BATCH)
    parser.add_argument("--poison", type=int, default=3, help="children that failed (default 3)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--read", metavar="DIR", help=argparse.SUPPRESS)  # a mode's subprocess
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        print(json.dumps(read(Path(args.read), args.mode)))
        return
    folder = Path(tempfile.mkdtemp(prefix="results-bench-"))
    try:
        started = time.perf_counter()
        written = write_run(folder, args.items, args.items_per_batch, args.poison)
        written["write_seconds"] = round(time.perf_counter() - started, 1)
        runs = []
        for mode in MODES:
            done = subprocess.run([sys.executable, __file__, "--read", str(folder), "--mode", mode],
                                  capture_output=True, text=True, check=True)
            runs.append(json.loads(done.stdout))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report = {"items": args.items, "items_per_batch": args.items_per_batch, "poison_children": args.poison,
              "written": written, "runs": runs}
    if args.json:
        print(json.dumps(report))
        return
    sizes = ", ".join(f"{g} {b / 1e6:.1f} MB" for g, b in written["bytes"].items())
    print(f"{args.items:,} items in {written['children']:,} children of {args.items_per_batch} "
          f"({args.poison} failed): result files {sizes} (written in {written['write_seconds']} s)")
    for r in runs:
        print(f"  {r['mode']:<8} {r['items']:>9,} items ({r['failed']:,} failed) in {r['seconds']:>6} s = "
              f"{r['items_per_second'] or 0:>8,} items/s; peak RSS {r['peak_rss_mb']} MB "
              f"(after imports {r['rss_before_reading_mb']} MB), Python allocations peak {r['tracemalloc_peak_kb']:,} KiB")


if __name__ == "__main__":
    main()

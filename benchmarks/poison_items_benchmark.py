"""Benchmark: a Map batch with a few poison items, on the embedded engine (not a test).

    .venv/bin/python benchmarks/poison_items_benchmark.py                  # 100,000 items, 3 poison, prod
    .venv/bin/python benchmarks/poison_items_benchmark.py --json           # one JSON object per run
    .venv/bin/python benchmarks/poison_items_benchmark.py --items 10000 --poison 17 5003

Prod's batching (20 items per child), a JSON manifest in S3, the poison items failing every
attempt (``simulateFailure: permanent``, reported per item by the demo worker in
``batchItemFailures``). Run twice: with prod's failure threshold (0: the batch FAILED, naming the
failed items) and with a threshold of as many items as are poisoned (the batch SUCCEEDED). For each:
the verdict, the items counted failed and succeeded (the status record, and ``fanout results``'
item outcomes), the items dead-lettered, the worker invocations per poisoned and per other item,
the RetryFailedItems invocations, the parent's state transitions, wall time (Retry waits recorded,
not slept) and the process's peak resident memory (ru_maxrss).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

from fanout_kit.shared.jsii_node import use_venv_node  # noqa: E402

use_venv_node()

from fanout_kit.local.engine import LocalEngine  # noqa: E402
from fanout_kit.local.history import state_transitions  # noqa: E402
from fanout_kit.local.template import state_machine_definitions, synthesize  # noqa: E402
from fanout_runtime.faults import SIMULATE_KEY  # noqa: E402
from fanout_kit.shared.asl_graph import happy_path_transitions  # noqa: E402

DEFAULT_POISON = (17, 50_003, 99_998)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def app_with_threshold(env: str, threshold: int | None):
    if threshold is None:
        return synthesize(env)
    from stacks.config import read_cdk_context

    context = copy.deepcopy(read_cdk_context())
    context["fanout:environments"][env]["map"]["failureThreshold"] = threshold
    return synthesize(env, Path(tempfile.mkdtemp(prefix="poison-bench-")), context=context)


def run(app, n: int, poison: tuple[int, ...], label: str) -> dict:
    from fanout_kit.ops.results import map_outcomes

    (asl,) = state_machine_definitions(app.template("map"), app.region).values()
    per_batch = asl["States"]["ProcessItems JSON"]["ItemBatcher"]["MaxItemsPerBatch"]
    items = [{"imageId": f"img-{i}", "width": i % 1000} for i in range(n)]
    for index in poison:
        items[index][SIMULATE_KEY] = {"mode": "permanent"}
    batch_id = f"poison-{label}-{n}"
    with LocalEngine(app, workflows=("map",), sleep_retries=False) as engine:
        manifest = engine.upload_manifest(f"manifests/{batch_id}.json", json.dumps(items).encode())
        del items
        started = time.monotonic()
        result = engine.run("map", {"batchId": batch_id, "manifest": manifest}, poll_seconds=0.5)
        seconds = time.monotonic() - started
        record = engine.status_record(batch_id, "map") or {}
        counts = engine.map_run_counts(result.arn)
        dead = sorted(i["index"] for m in engine.dlq_messages("map") for i in m.get("items", []))
        worker = engine.function_id("ProcessItem", "map")
        retrier = engine.function_id("RetryFailedItems", "map")
        per_index = Counter(e["index"] for r in engine.router.invocations if r.function == worker for e in r.event["items"])
        retry_calls = engine.router.count(retrier)
        forward_calls = engine.router.count(engine.function_id("ForwardFailedItems", "map"))
        results_key = record.get("resultsKey") or (result.output or {}).get("mapRun", {}).get("ResultWriterDetails", {}).get("Key")

        class Source:  # fanout_kit.ops.results' reader over the engine's S3
            s3 = engine.client("s3")

            def read_json(self, bucket, key):
                return json.loads(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read())

            def read_chunks(self, bucket, key):
                return self.s3.get_object(Bucket=bucket, Key=key)["Body"].iter_chunks(chunk_size=64 * 1024)

        failed_outcomes = []
        if results_key:
            failed_outcomes = sorted(o.index for o in map_outcomes(Source(), engine.bucket_name(), results_key, failed_only=True))
    others = [count for index, count in per_index.items() if index not in poison]
    return {
        "run": label,
        "items": n,
        "items_per_batch": per_batch,
        "poison": list(poison),
        "status": result.status,
        "error": result.error,
        "cause": result.cause,
        "record_status": record.get("status"),
        "record_failed_items": record.get("failedItems"),
        "record_total_items": record.get("totalItems"),
        "items_succeeded": n - int(record.get("failedItems") or 0) if record.get("status") == "FAILED" else n - len(dead),
        "map_run_counts": counts,
        "dead_lettered_indexes": dead,
        "results_failed_indexes": failed_outcomes,
        "worker_invocations_per_poison_item": [per_index[i] for i in poison],
        "worker_invocations_per_other_item": sorted(set(others)),
        "retry_failed_items_invocations": retry_calls,
        "forward_failed_items_invocations": forward_calls,
        "parent_transitions": state_transitions(result.history),
        "child_happy_path_states": happy_path_transitions(asl["States"]["ProcessItems JSON"]["ItemProcessor"]),
        "seconds": round(seconds, 1),
        "peak_rss_mib": round(peak_rss_mib(), 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--poison", type=int, nargs="+", default=list(DEFAULT_POISON), metavar="INDEX")
    parser.add_argument("--env", default="prod", help="environment whose batching to use (default prod: 20 per child)")
    parser.add_argument("--json", action="store_true", help="one JSON object per run on its own line")
    args = parser.parse_args(argv)
    poison = tuple(sorted(set(args.poison)))
    if any(not 0 <= i < args.items for i in poison):
        raise SystemExit(f"--poison: every index must be in 0..{args.items - 1}")
    for label, threshold in (("threshold-0", None), (f"threshold-{len(poison)}", len(poison))):
        r = run(app_with_threshold(args.env, threshold), args.items, poison, label)
        if args.json:
            print(json.dumps(r), flush=True)
            continue
        print(f"{r['run']}: {r['items']:,} items ({r['items_per_batch']} per child), poison {r['poison']}")
        print(f"  execution {r['status']}{' ' + r['error'] if r['error'] else ''}: {r['cause'] or ''}")
        print(f"  status record {r['record_status']}: failed items {r['record_failed_items']} of {r['record_total_items']}")
        print(f"  map run (children's items): {r['map_run_counts']}")
        print(f"  dead-lettered items {r['dead_lettered_indexes']}; fanout results --failed: {r['results_failed_indexes']}")
        print(f"  worker invocations: poison items {r['worker_invocations_per_poison_item']}, every other item "
              f"{r['worker_invocations_per_other_item']}; RetryFailedItems {r['retry_failed_items_invocations']}, "
              f"ForwardFailedItems {r['forward_failed_items_invocations']}")
        print(f"  parent transitions {r['parent_transitions']}; wall {r['seconds']} s; peak RSS {r['peak_rss_mib']} MiB",
              flush=True)


if __name__ == "__main__":
    main()

"""Benchmark: the estimate (``fanout estimate``) against the measured cost of a local run of the
Map workflow (not a test).

    .venv/bin/python benchmarks/cost_benchmark.py                  # N = 10,000 items, prod settings
    .venv/bin/python benchmarks/cost_benchmark.py --items 2000 --json

Runs N items (a JSON manifest in S3, nothing fails, Retry waits not slept) on the embedded engine,
prices what the engine counted (``fanout_kit.local.metering``) and puts it next to two estimates for
the same N from the same template: with the default assumptions (0.1 s of work per item), and
calibrated (the work per item and per invocation the local run measured). Every figure is also
scaled to one million items. The gap between estimate and measurement is printed per component
with its reason.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")

from fanout_kit.shared.jsii_node import use_venv_node  # noqa: E402

use_venv_node()

from fanout_kit.local.cost_estimate import Assumptions, estimate  # noqa: E402
from fanout_kit.shared.cost import COMPONENTS, price_lines  # noqa: E402
from fanout_kit.local.engine import LocalEngine  # noqa: E402
from fanout_kit.local.template import synthesize  # noqa: E402

MILLION = 1_000_000
REASONS = {
    "transitions": "the parent's success path and one transition per child: the same count when the "
    "ASL walk matches the history",
    "express_requests": "one per child: the same count",
    "express_gb_seconds": "Express time: the estimate assumes the work per item and a per-state overhead; "
    "locally each child runs in-process in milliseconds (no network, no cold start), rounded up to 100 ms",
    "lambda_requests": "the worker once per child plus the parent's functions: the same count",
    "lambda_gb_seconds_x86_64": "Lambda time: assumed work per item and per-invocation overhead vs the "
    "handlers' measured in-process time (AWS adds SDK round trips and cold starts)",
    "lambda_gb_seconds_arm64": "as for x86_64",
    "dynamodb_read_units": "the parent's status read: the same",
    "dynamodb_write_units": "the final status write: the same",
    "s3_put_requests": "the ResultWriter: the estimate counts a manifest and one file per status, the "
    "local engine writes one results file per 1,000 children (AWS splits by size)",
    "s3_get_requests": "the manifest read by PrepareBatch and the ItemReader: the same",
    "log_bytes": "both at assumed event sizes; the local count is the parent's history events plus "
    "7 events per child",
    "xray_traces": "both at the assumed sampling rate",
    "eventbridge_service_events": "free",
    "sqs_requests": "dead-letter sends: none when nothing fails",
}


def run_local(app, n: int):
    with LocalEngine(app, workflows=("map",), sleep_retries=False) as engine:
        items = [{"imageId": f"img-{i}", "width": i % 1000} for i in range(n)]
        manifest = engine.upload_manifest(f"manifests/cost-{n}.json", json.dumps(items).encode())
        started = time.monotonic()
        result = engine.run("map", {"batchId": f"cost-{n}", "manifest": manifest}, poll_seconds=0.5)
        seconds = time.monotonic() - started
        counts = engine.map_run_counts(result.arn)
        measured = engine.measured_cost([result])
        worker = next(lid for lid, fn in engine.router.functions.items() if fn.handler == "map_item_worker.handler")
        worker_runs = [r for r in engine.router.invocations if r.function == worker]
    if result.status != "SUCCEEDED" or counts["succeeded"] != n:
        raise SystemExit(f"N={n}: {result.status} {result.error} {result.cause} {counts}")
    return measured, seconds, worker_runs


def by_component(usage) -> dict[str, float]:
    return {line.component: line.usd for line in price_lines(usage)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000, help="items in the local run (default 10,000)")
    parser.add_argument("--env", default="prod", help="environment whose settings to use (default prod)")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    n = args.items
    app = synthesize(args.env)
    measured, seconds, worker_runs = run_local(app, n)
    per_item_work = sum(r.seconds for r in worker_runs) / n
    default = estimate(app.template("map"), "map", n, app.region)
    calibrated = estimate(app.template("map"), "map", n, app.region,
                          Assumptions(work_seconds=per_item_work, invoke_overhead_seconds=0.0,
                                      state_overhead_seconds=0.0))
    scale = MILLION / n
    rows = []
    est, cal, mea = by_component(default.usage), by_component(calibrated.usage), by_component(measured.usage)
    for name, _key, label, _factor in COMPONENTS:
        if name in est or name in mea:
            rows.append({
                "component": name, "label": label,
                "estimate_usd_per_million": round(est.get(name, 0.0) * scale, 4),
                "calibrated_usd_per_million": round(cal.get(name, 0.0) * scale, 4),
                "measured_usd_per_million": round(mea.get(name, 0.0) * scale, 4),
                "why": REASONS.get(name, ""),
            })
    out = {
        "env": args.env, "items": n, "local_wall_seconds": round(seconds, 1),
        "measured_worker_seconds_per_item": per_item_work,
        "estimate_total_usd_per_million": round(default.total_usd * scale, 4),
        "calibrated_total_usd_per_million": round(calibrated.total_usd * scale, 4),
        "measured_total_usd_per_million": round(measured.total_usd * scale, 4),
        "measured_counts": measured.counts, "components": rows,
    }
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"Map workflow, {args.env} settings, N = {n:,} items run locally in {seconds:.1f} s; "
          f"worker time measured: {per_item_work * 1000:.3f} ms per item")
    print(f"{'per 1,000,000 items':<44} {'estimate':>10} {'calibrated':>11} {'measured':>10}")
    for r in rows:
        print(f"{r['label']:<44} {r['estimate_usd_per_million']:>10.4f} {r['calibrated_usd_per_million']:>11.4f} "
              f"{r['measured_usd_per_million']:>10.4f}")
    print(f"{'total':<44} {out['estimate_total_usd_per_million']:>10.4f} "
          f"{out['calibrated_total_usd_per_million']:>11.4f} {out['measured_total_usd_per_million']:>10.4f}")
    print("gaps:")
    for r in rows:
        if abs(r["estimate_usd_per_million"] - r["measured_usd_per_million"]) > 0.0001:
            print(f"  {r['label']}: {r['why']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: the Distributed Map workflow on the embedded engine for N items (not a test).

    .venv/bin/python benchmarks/map_benchmark.py            # N = 100, 1,000, 10,000
    .venv/bin/python benchmarks/map_benchmark.py 100 500    # other sizes

For each N: wall time of the execution, items per second, DynamoDB write operations per item
(counted on the emulator: each item of a TransactWriteItems is one write, as DynamoDB bills it,
and a transaction is billed double on real DynamoDB: 2 writes = 4 WCU for 1 KB items),
DynamoDB requests per item, parent state transitions and their share per item, child state
transitions per item (from the ASL: the item processor's happy path, per batch of items) and the
parent execution's history length. Retry waits are not slept; nothing fails.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "lambdas")]
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "ERROR")
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")

from stacks.runtime_node import use_venv_node  # noqa: E402

use_venv_node()

from moto.dynamodb.models import DynamoDBBackend  # noqa: E402

from fanout.local.engine import LocalEngine  # noqa: E402
from fanout.local.history import state_transitions  # noqa: E402
from fanout.local.template import state_machine_definitions, synthesize  # noqa: E402
from statemachines.asl_graph import happy_path_transitions  # noqa: E402


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


def child_transitions_per_batch(app) -> int:
    (asl,) = state_machine_definitions(app.template("map"), app.region).values()
    processor = asl["States"]["ProcessItems JSON"]["ItemProcessor"]
    return happy_path_transitions(processor)


def run(n: int, app) -> dict:
    with LocalEngine(app, workflows=("map",), sleep_retries=False) as engine:
        items = [{"imageId": f"img-{i}", "width": i % 1000} for i in range(n)]
        manifest = engine.upload_manifest(f"manifests/bench-{n}.json", json.dumps(items).encode())
        with WriteCounter() as counter:
            started = time.monotonic()
            result = engine.run("map", {"batchId": f"bench-{n}", "manifest": manifest}, poll_seconds=0.5)
            seconds = time.monotonic() - started
        ledger = engine.ledger_counts(f"bench-{n}")
    assert result.status == "SUCCEEDED", (result.error, result.cause)
    assert ledger["succeeded"] == n
    parent = state_transitions(result.history)
    child = child_transitions_per_batch(app)
    return {
        "n": n,
        "seconds": seconds,
        "items_per_s": n / seconds,
        "writes_per_item": counter.writes / n,
        "requests_per_item": sum(counter.requests.values()) / n,
        "parent_transitions": parent,
        "transitions_per_item": parent / n + child,  # batch size 1 locally
        "history": len(result.history),
        "requests": dict(counter.requests),
    }


def main(sizes: list[int]) -> None:
    app = synthesize("dev")
    print(f"{'N':>7} {'wall s':>8} {'items/s':>8} {'DDB writes/item':>16} {'DDB requests/item':>18} "
          f"{'parent transitions':>19} {'transitions/item':>17} {'parent history':>15}")
    for n in sizes:
        r = run(n, app)
        print(f"{r['n']:>7} {r['seconds']:>8.1f} {r['items_per_s']:>8.0f} {r['writes_per_item']:>16.2f} "
              f"{r['requests_per_item']:>18.2f} {r['parent_transitions']:>19} {r['transitions_per_item']:>17.3f} "
              f"{r['history']:>15}", flush=True)
        print(f"          requests by operation: {r['requests']}", flush=True)


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100, 1_000, 10_000])

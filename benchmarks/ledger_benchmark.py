"""Completion-ledger benchmark (not a test): children recorded per second, DynamoDB requests per child
and transaction conflicts, against moto's DynamoDB over HTTP on loopback, with 1 and 10 concurrent
writers, the DynamoDB contention model off and on, and the counter unsharded (K=1) or sharded
(K=4, 16): the real ``Ledger`` class in every variant.

    .venv/bin/python benchmarks/ledger_benchmark.py [--children 300] [--json] [--window-ms 3]
    .venv/bin/python benchmarks/ledger_benchmark.py --stress [--json] [--legacy]

``--json`` prints one JSON object per variant per line; otherwise a table.

``--stress`` (benchmarks/ledger_stress.py): 500 concurrent invocations drain one batch of 1,000
children, each delivered once, immediate redelivery, maxReceiveCount 3, a 15 ms in-flight window,
with 1 and 8 counter shards; per shard count it prints ``finalized`` (must be exactly 1),
``false_failures`` (children counted FAILED although their work succeeded: must be 0),
``work_reruns``, ``requests_per_child`` and ``wall_s``, and exits 1 if either rule is broken.
``--legacy`` runs the consumers' path before the work record (the old code's figures).

What the figures mean:

* ``requests_per_child``: every DynamoDB API call the ledger made (a botocore hook counts them),
  retries after a conflict included, divided by the children. Exact, and what a consumer would send
  to DynamoDB under the same contention.
* ``transaction_conflicts``: TransactWriteItems cancelled with TransactionConflict plus UpdateItems
  refused with TransactionConflictException, as the client saw them. moto has none: they exist only
  with the contention model on (fanout_kit/local/dynamodb_contention.py: a transaction holds its items
  ``--window-ms`` while in flight).
* ``redelivered``: recordings whose contention outlasted the ledger's own retries
  (LedgerContention): their consumer reports a batch item failure and the queue delivers them
  again (the benchmark does so at once); counted once all the same.
* ``children_per_s``: of the emulator on this machine (Python, one process), to compare variants
  with each other; it says nothing about DynamoDB's latency.
* ``modelled_ceiling_children_per_s``: what one batch can record per second on DynamoDB before a
  partition key is throttled, from the documented per-partition limits (1,000 WCU/s, 3,000 RCU/s),
  the layout's writes per child per partition key (a transactional write costs 2 WCU per item: the
  mark and the counter, 4 WCU per child on one key) and its strongly consistent reads per child
  (1 RCU per item: the decision check). ``hot_key_wcu_per_child`` is the measured figure with the
  model on (its capacity accounting), for the hottest partition key.
* ``finalized``: callers that won RUNNING -> COMPLETED. Must be 1.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
for key, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "eu-west-1"}.items():
    os.environ.setdefault(key, value)

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from moto import mock_aws  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

from fanout_kit.local.dynamodb_contention import (  # noqa: E402
    PARTITION_WCU_PER_SECOND,
    TRANSACTIONAL_WCU,
    dynamodb_contention,
    modelled_batch_ceiling,
)
from benchmarks.ledger_stress import RequestCounter, create_ledger_table, stress  # noqa: E402
from fanout_kit.local.moto_fixes import serialized_dynamodb_writes  # noqa: E402
from fanout_kit.patterns.completion_ledger.ledger import Ledger, LedgerContention, Outcome  # noqa: E402

PARTITION_RCU_PER_SECOND = 3000


def create_table(client: Any) -> str:
    return create_ledger_table(client, f"bench-{uuid.uuid4().hex[:8]}")


def layout_ceiling(shards: int) -> tuple[float, dict[str, float]]:
    """Children/s one batch sustains on DynamoDB, from the layout: (ceiling, WCU per child per key)."""
    per_child_wcu = 2 * TRANSACTIONAL_WCU  # the mark and the counter, transactional, one partition key
    if shards == 1:
        writes = {"BATCH#<id>": per_child_wcu}  # + one transition per batch: negligible
        reads = {"BATCH#<id>": 1.0}  # the decision check's GetItem
    else:
        writes = {f"BATCH#<id>#S{k}": per_child_wcu / shards for k in range(shards)}
        # the decision check reads the batch item and every shard once per child
        reads = {"BATCH#<id>": 1.0, **{f"BATCH#<id>#S{k}": 1.0 for k in range(shards)}}
    ceiling = modelled_batch_ceiling(writes, wcu_per_partition=PARTITION_WCU_PER_SECOND,
                                     rcu_per_partition=PARTITION_RCU_PER_SECOND, reads_per_child=reads)
    return ceiling, writes


def run(client: Any, counter: RequestCounter, *, writers: int, children: int, shards: int,
        window_ms: float | None) -> dict[str, Any]:
    table = create_table(client)
    batch_id = f"b-{uuid.uuid4().hex[:6]}"
    ledger = Ledger(client, table, counter_shards=shards)
    redelivered = Counter()

    def record(i: int) -> Outcome:
        while True:
            try:
                result = ledger.record_success(batch_id, f"c{i}", total=children, index=i)
            except LedgerContention:
                redelivered["n"] += 1  # the queue would deliver it again
                continue
            # A redelivery of the winner before it acknowledged gets COMPLETED again (resumed).
            return Outcome.DUPLICATE if result.resumed else result.outcome

    with ExitStack() as stack:
        model = stack.enter_context(dynamodb_contention(window_seconds=window_ms / 1000)) if window_ms else None
        counter.take()
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=writers) as pool:
            outcomes = Counter(pool.map(record, range(children)))
        elapsed = time.perf_counter() - started
        requests = counter.take()
        hot_wcu = max(model.wcu_by_key.values()) / children if model and model.wcu_by_key else None
    conflicts = requests.pop("#conflicts", 0)
    ceiling, _ = layout_ceiling(shards)
    batch = ledger.read_batch(batch_id) or {}
    return {
        "variant": f"{writers} writer(s), K={shards}, contention model {'on' if window_ms else 'off'}",
        "writers": writers,
        "shards": shards,
        "contention_model": bool(window_ms),
        "window_ms": window_ms or 0,
        "children": children,
        "children_per_s": round(children / elapsed, 1),
        "requests_per_child": round(sum(requests.values()) / children, 3),
        "transaction_conflicts": conflicts,
        "redelivered": redelivered["n"],
        "finalized": outcomes[Outcome.COMPLETED],
        "counted": batch.get("done"),
        "modelled_ceiling_children_per_s": round(ceiling),
        "hot_key_wcu_per_child": round(hot_wcu, 3) if hot_wcu is not None else None,
        "by_op": dict(sorted(requests.items())),
        "wall_s": round(elapsed, 3),
    }


STRESS_FIELDS = ("code", "shards", "invocations", "children", "max_receive_count", "window_ms", "finalized",
                 "false_failures", "status", "succeeded", "failed", "work_runs", "work_reruns", "deliveries",
                 "redelivered", "dead_lettered", "dlq_deliveries", "stuck", "other_errors",
                 "transaction_conflicts", "requests_per_child", "wall_s", "by_op")


def run_stress(args: argparse.Namespace) -> int:
    """The --stress variant (see the module docstring); exit 1 unless every run finalized exactly
    once with no false failure."""
    from fanout_kit.shared.observability import logger

    logger.setLevel("ERROR")  # no log line per child
    invocations = args.invocations
    rows = []
    # In-process moto (mock_aws), not the server: 500 concurrent keep-alive connections overflow
    # the emulator server's accept backlog (connection resets that DynamoDB would not produce).
    with mock_aws(), serialized_dynamodb_writes():
        client = boto3.client("dynamodb", region_name="eu-west-1",
                              config=Config(max_pool_connections=invocations + 16, retries={"mode": "standard"}))
        counter = RequestCounter(client)
        for shards in (1, 8):
            result = stress(client, invocations=invocations, children=args.stress_children, shards=shards,
                            window=args.stress_window_ms / 1000, max_receive_count=args.max_receive_count,
                            legacy=args.legacy, counter=counter)
            row = {k: result.to_dict()[k] for k in STRESS_FIELDS}
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
    if not args.json:
        print(f"\nstress ({'legacy: before the work record' if args.legacy else 'work record'}): {invocations} "
              f"invocations, {args.stress_children} children, maxReceiveCount {args.max_receive_count}, "
              f"{args.stress_window_ms:g} ms in flight, moto in process, {os.cpu_count()} CPU(s)\n")
        header = (f"{'K':>3}{'finalized':>11}{'false_fail':>12}{'status':>11}{'reruns':>8}{'redeliv.':>10}"
                  f"{'DLQ':>6}{'conflicts':>11}{'req/child':>11}{'wall s':>9}")
        print(header)
        print("-" * len(header))
        for r in rows:
            print(f"{r['shards']:>3}{r['finalized']:>11}{r['false_failures']:>12}{str(r['status']):>11}"
                  f"{r['work_reruns']:>8}{r['redelivered']:>10}{r['dead_lettered']:>6}"
                  f"{r['transaction_conflicts']:>11}{r['requests_per_child']:>11.2f}{r['wall_s']:>9.1f}")
    return 0 if all(r["finalized"] == 1 and r["false_failures"] == 0 for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="completion-ledger benchmark (moto over HTTP)")
    parser.add_argument("--children", type=int, default=300)
    parser.add_argument("--window-ms", type=float, default=3.0,
                        help="contention model: how long a transaction holds its items (default 3)")
    parser.add_argument("--json", action="store_true", help="one JSON object per variant per line")
    stress_group = parser.add_argument_group("--stress")
    stress_group.add_argument("--stress", action="store_true",
                              help="500 invocations, 1,000 children, immediate redelivery, maxReceiveCount 3")
    stress_group.add_argument("--legacy", action="store_true", help="--stress with the path before the work record")
    stress_group.add_argument("--invocations", type=int, default=500)
    stress_group.add_argument("--stress-children", type=int, default=1000)
    stress_group.add_argument("--stress-window-ms", type=float, default=15.0)
    stress_group.add_argument("--max-receive-count", type=int, default=3)
    args = parser.parse_args(argv)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log line per request
    if args.legacy and not args.stress:
        parser.error("--legacy: only with --stress")
    if args.stress:
        return run_stress(args)
    with serialized_dynamodb_writes():  # atomic writes in the emulator; requests stay concurrent
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        client = boto3.client("dynamodb", endpoint_url=f"http://{host}:{port}", region_name="eu-west-1",
                              config=Config(max_pool_connections=32, retries={"mode": "standard"}))
        counter = RequestCounter(client)
        rows = []
        try:
            run(client, counter, writers=2, children=20, shards=1, window_ms=None)  # warm-up
            for window in (None, args.window_ms):
                for writers in (1, 10):
                    for shards in (1, 4, 16):
                        row = run(client, counter, writers=writers, children=args.children, shards=shards,
                                  window_ms=window)
                        rows.append(row)
                        if args.json:
                            print(json.dumps(row), flush=True)
        finally:
            server.stop()
    if not args.json:
        print(f"\n{args.children} children per batch, moto {host}:{port} over HTTP, {os.cpu_count()} CPU(s), "
              f"contention window {args.window_ms:g} ms when on\n")
        header = (f"{'writers':>7}{'K':>4}{'model':>7}{'children/s':>12}{'req/child':>11}{'conflicts':>11}"
                  f"{'redeliv.':>10}{'finalized':>11}{'ceiling/s':>11}")
        print(header)
        print("-" * len(header))
        for r in rows:
            print(f"{r['writers']:>7}{r['shards']:>4}{'on' if r['contention_model'] else 'off':>7}"
                  f"{r['children_per_s']:>12.0f}{r['requests_per_child']:>11.2f}{r['transaction_conflicts']:>11}"
                  f"{r['redelivered']:>10}{r['finalized']:>11}{r['modelled_ceiling_children_per_s']:>11}")
    return 0 if all(r["finalized"] == 1 and r["counted"] == r["children"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

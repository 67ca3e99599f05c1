"""Ledger stress model: many concurrent consumer invocations drain one batch's queue while the
DynamoDB contention model (fanout_kit/local/dynamodb_contention.py) makes their transactions cancel
each other, to show whether contention ever turns a successful child into a counted failure.

What it models (``stress(...)``):

* A queue holding ``children`` child messages, each sent once, drained by ``invocations``
  concurrent consumer invocations (threads; batch size 1). A message whose processing raised
  goes back to the queue at once (immediate redelivery: a visibility timeout of 0, the harshest
  case) with its receive count raised; one that fails on its ``max_receive_count``-th receive is
  moved to the dead-letter queue, as SQS's redrive policy does. The dead-letter queue's recorder
  is invoked by the same invocations; a DLQ message whose recording raised goes back to the DLQ.
* The child's work always succeeds (every FAILED count is therefore a false failure) and is
  counted each time it runs.
* DynamoDB: moto over HTTP (the caller's client), writes serialized by the emulator fix, and the
  contention model on: a TransactWriteItems holds its items ``window`` seconds (a pair: drawn
  per transaction) and any transaction or plain write touching a held item meanwhile gets
  TransactionConflict, as DynamoDB documents.
* The code under test is the real one: ``Ledger`` and, unless ``legacy``, the consumers' path
  ``ledger_runtime.process_child`` / ``process_dead_letter`` with the work record. ``legacy=True``
  replays the path before the work record (run the work, then record the success; the DLQ
  recorder records FAILED): the figures the issue reported.

``StressResult`` holds the figures: ``finalized`` (winners of RUNNING -> COMPLETED: must be 1),
``false_failures`` (children counted FAILED, or refused because a false failure had closed the
batch: must be 0), ``work_reruns`` (runs of a child's work after its first), requests per child,
wall time, and what the queues did.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from fanout_kit.local.dynamodb_contention import dynamodb_contention
from fanout_kit.patterns.completion_ledger.ledger import Ledger, LedgerError, LedgerResult, Outcome, shard_key
from fanout_kit.patterns.completion_ledger.runtime import ChildMessage, process_child, process_dead_letter
from fanout_kit.patterns.completion_ledger.work_record import WorkRecords

DLQ_GIVE_UP = 200  # a DLQ message whose recording failed this often is reported as stuck


class RequestCounter:
    """DynamoDB API calls by operation, and the conflicts DynamoDB answered (botocore hooks)."""

    def __init__(self, client: Any) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()
        client.meta.events.register("before-call.dynamodb", self.before)
        client.meta.events.register("after-call.dynamodb", self.after)

    def before(self, model: Any, **_: Any) -> None:
        with self.lock:
            self.counts[model.name] += 1

    def after(self, http_response: Any, parsed: dict, model: Any, **_: Any) -> None:
        code = parsed.get("Error", {}).get("Code", "")
        reasons = {r.get("Code") for r in parsed.get("CancellationReasons") or []}
        if code == "TransactionConflictException" or (
            code == "TransactionCanceledException" and "TransactionConflict" in reasons
        ):
            with self.lock:
                self.counts["#conflicts"] += 1

    def take(self) -> Counter[str]:
        with self.lock:
            counts, self.counts = self.counts, Counter()
        return counts


def create_ledger_table(client: Any, name: str) -> str:
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


@dataclass
class StressResult:
    code: str  # "work-record" (the ledger as it is) or "legacy" (before the work record)
    shards: int
    invocations: int
    children: int
    max_receive_count: int
    window_ms: list[float]
    finalized: int = 0
    false_failures: int = 0
    status: str | None = None
    succeeded: int = 0
    failed: int = 0
    work_runs: int = 0
    work_reruns: int = 0
    deliveries: int = 0
    redelivered: int = 0
    dead_lettered: int = 0
    dlq_deliveries: int = 0
    stuck: int = 0
    other_errors: int = 0  # errors other than the ledger's (an emulator connection reset, ...)
    transaction_conflicts: int = 0
    requests_per_child: float = 0.0
    wall_s: float = 0.0
    by_op: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Queues:
    """The source queue and its DLQ, with SQS's receive counts and redrive (immediate redelivery)."""

    def __init__(self, children: int) -> None:
        self.source: deque[tuple[int, int]] = deque((i, 0) for i in range(children))  # (index, receives)
        self.dlq: deque[tuple[int, int]] = deque()
        self.outstanding = children
        self.cond = threading.Condition()

    def take(self) -> tuple[str, int, int] | None:
        with self.cond:
            while True:
                if self.dlq:
                    index, receives = self.dlq.popleft()
                    return "dlq", index, receives + 1
                if self.source:
                    index, receives = self.source.popleft()
                    return "source", index, receives + 1
                if self.outstanding == 0:
                    return None
                self.cond.wait(0.05)

    def done(self) -> None:
        with self.cond:
            self.outstanding -= 1
            self.cond.notify_all()

    def back(self, queue: str, index: int, receives: int) -> None:
        with self.cond:
            (self.dlq if queue == "dlq" else self.source).append((index, receives))
            self.cond.notify()

    def to_dlq(self, index: int) -> None:
        with self.cond:
            self.dlq.append((index, 0))
            self.cond.notify()


def stress(
    client: Any,
    *,
    invocations: int = 500,
    children: int = 1000,
    shards: int = 1,
    window: float | tuple[float, float] = 0.015,
    max_receive_count: int = 3,
    legacy: bool = False,
    max_conflict_attempts: int | None = None,
    counter: RequestCounter | None = None,
    sleep: Callable[[float], None] | None = None,
) -> StressResult:
    """One batch of ``children`` drained by ``invocations`` concurrent invocations under the
    contention model (see the module docstring). Enter it inside ``serialized_dynamodb_writes()``
    with ``client`` a DynamoDB client of a moto server (``max_pool_connections`` >= invocations)."""
    table = create_ledger_table(client, f"stress-{uuid.uuid4().hex[:8]}")
    batch_id = f"stress-{uuid.uuid4().hex[:6]}"
    options: dict[str, Any] = {"counter_shards": shards}
    if max_conflict_attempts is not None:
        options["max_conflict_attempts"] = max_conflict_attempts
    if sleep is not None:
        options["sleep"] = sleep
    ledger = Ledger(client, table, **options)
    work = WorkRecords(client, table)
    low, high = window if isinstance(window, tuple) else (window, window)
    result = StressResult("legacy" if legacy else "work-record", shards, invocations, children,
                          max_receive_count, [low * 1000, high * 1000])
    queues = _Queues(children)
    lock = threading.Lock()
    runs: Counter[int] = Counter()
    refused: set[str] = set()
    stats: Counter[str] = Counter()

    def message(index: int) -> ChildMessage:
        return ChildMessage(batch_id, f"c{index:04d}", children, index, {})

    def follow_up(res: LedgerResult) -> None:
        if res.must_finalize:  # the winner's follow-up (UpdateFinalStatus is idempotent), then ack
            if not res.resumed:
                with lock:
                    result.finalized += 1
            ledger.acknowledge_finish(batch_id, res.child_id or "", "stress")
        elif res.must_alarm:
            ledger.acknowledge_finish(batch_id, res.child_id or "", "stress")

    def run_work(index: int) -> None:
        with lock:
            runs[index] += 1

    def deliver(index: int) -> None:
        msg = message(index)
        if legacy:
            run_work(index)
            res = ledger.record_success(batch_id, msg.child_id, total=children, index=index)
        else:
            res = process_child(ledger, work, msg, lambda: run_work(index))
        follow_up(res)

    def dead_letter(index: int) -> None:
        msg = message(index)
        if legacy:
            res = ledger.record_failure(batch_id, msg.child_id, total=children, index=index, reason="dead-lettered")
            if res.outcome is Outcome.BATCH_CLOSED:  # refused only because a false failure closed it
                with lock:
                    refused.add(msg.child_id)
        else:
            res = process_dead_letter(ledger, work, msg, "dead-lettered")
        follow_up(res)

    def invocation() -> None:
        while (taken := queues.take()) is not None:
            queue, index, receives = taken
            with lock:
                stats["dlq_deliveries" if queue == "dlq" else "deliveries"] += 1
            try:
                (dead_letter if queue == "dlq" else deliver)(index)
            except Exception as exc:  # as Lambda: any error returns the message (LedgerContention,
                # ChildWorkInProgress, and whatever else the invocation raised)
                if not isinstance(exc, LedgerError):
                    with lock:
                        stats["other_errors"] += 1
                if queue == "source" and receives >= max_receive_count:
                    with lock:
                        stats["dead_lettered"] += 1
                    queues.to_dlq(index)  # SQS's redrive policy
                elif queue == "dlq" and receives >= DLQ_GIVE_UP:
                    with lock:
                        stats["stuck"] += 1
                    queues.done()
                else:
                    with lock:
                        stats["redelivered"] += 1
                    queues.back(queue, index, receives)  # immediate redelivery
                continue
            queues.done()

    counter = counter or RequestCounter(client)
    with dynamodb_contention(window_seconds=window):
        counter.take()
        started = time.perf_counter()
        threads = [threading.Thread(target=invocation, name=f"invocation-{n}", daemon=True) for n in range(invocations)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        result.wall_s = round(time.perf_counter() - started, 2)
        requests = counter.take()
    result.transaction_conflicts = requests.pop("#conflicts", 0)
    result.by_op = dict(sorted(requests.items()))
    result.requests_per_child = round(sum(requests.values()) / children, 2)
    result.work_runs = sum(runs.values())
    result.work_reruns = result.work_runs - len(runs)
    # The work always succeeds: every child the ledger marked FAILED is a false failure, and so is
    # a legacy failure recording refused because the batch was already (falsely) FAILED. (With the
    # work record a failure is recorded only when the work did not succeed: never here.)
    result.false_failures = len(failed_marks(client, table) | refused)
    for key in ("deliveries", "redelivered", "dead_lettered", "dlq_deliveries", "stuck", "other_errors"):
        setattr(result, key, stats[key])
    batch = ledger.read_batch(batch_id) or {}
    result.status = batch.get("status")
    if shards > 1:  # the counts of every shard (the verdict keeps the counts it was decided on)
        items = [plain_item(client, table, shard_key(batch_id, k)) for k in range(shards)]
        result.succeeded = sum(i.get("succeeded", 0) for i in items)
        result.failed = sum(i.get("failed", 0) for i in items)
    else:
        result.succeeded, result.failed = batch.get("succeeded", 0), batch.get("failed", 0)
    return result


def failed_marks(client: Any, table: str) -> set[str]:
    """Child ids whose ledger mark says FAILED (a Scan: the stress table holds one batch)."""
    kwargs: dict[str, Any] = dict(
        TableName=table,
        FilterExpression="begins_with(sk, :child) AND outcome = :failed",
        ExpressionAttributeValues={":child": {"S": "CHILD#"}, ":failed": {"S": "FAILED"}},
    )
    found: set[str] = set()
    while True:
        page = client.scan(**kwargs)
        found |= {item["sk"]["S"][len("CHILD#"):] for item in page.get("Items", [])}
        if "LastEvaluatedKey" not in page:
            return found
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def plain_item(client: Any, table: str, key: dict[str, Any]) -> dict[str, Any]:
    from fanout_kit.patterns.completion_ledger.ledger import plain

    return plain(client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item"))


__all__ = ["RequestCounter", "StressResult", "stress"]

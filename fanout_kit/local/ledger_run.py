"""A completion-ledger batch (SQS or Kinesis) on the embedded engine, the run itself:
``run_ledger_batch`` returns its outcome (the facts) and prints nothing; ``fanout ledger``
(``fanout_kit.cli.run_ledger``) parses the flags, shows the progress and prints the outcome.

Deploys the synthesized ledger stack locally (``LocalEngine(app, workflows=("ledger",))``: its SQS
queues, DynamoDB tables and Lambda functions, handlers in-process), sends a demo batch of child
messages to the source queue, runs the SQS consumer and the dead-letter-queue recorder the way
Lambda's SQS event source mappings would, reports the ledger's counts to a progress view and
returns the outcome: the ledger counts and status, whether UpdateFinalStatus ran (and how often),
the status record, what is left in the queues and the wall time.

The event source mappings (SQS and Kinesis pollers, Lambda's batch / partial-response / bisect /
retry / on-failure behaviour, the queue attributes they depend on, per-thread batch processors) are
emulated by ``fanout_kit/local/event_sources.py``; what that adapts is listed in the outcome. The
run reads the deployed stack as the ops CLI does: its outputs (``engine.deployment("ledger")``:
the producer sends to ChildQueueUrl / ChildStreamArn), the dead-letter queue with the ops peek.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from fanout_kit.local.event_sources import (
    EventSourcePollers,
    KinesisEventSource,
    KinesisMapping,
    SqsEventSource,
    SqsMapping,
    apply_queue_attributes,
    drained,
    handler_module,
    kinesis_mapping,
    per_thread_processors,
    sqs_mappings,
)
from fanout_kit.ops.dlq import queue_counts
from fanout_kit.ops.results import save_local_batch

WORKFLOW = "ledger"
SOURCE_SERVICE = "LedgerSqsConsumer"  # POWERTOOLS_SERVICE_NAME of the source queue's consumer
DEFAULT_VISIBILITY_TIMEOUT = 1  # seconds; the template's are minutes
DEFAULT_TIMEOUT_SECONDS = 120.0
# progress(batch_id, children) -> a context manager around the run, yielding a function that is
# shown the ledger's counts (its batch item: status, done, failed, ...) each time they are read
ProgressView = Callable[[str, int], AbstractContextManager[Callable[[Mapping[str, Any]], None]]]


# --------------------------------------------------------------------------- the template's wiring


@dataclass(frozen=True)
class LedgerWiring:
    source: SqsMapping  # ChildQueue -> LedgerSqsConsumer
    dlq: SqsMapping  # ChildDeadLetterQueue -> LedgerDlqRecorder
    max_receive_count: int
    finalizer_id: str  # UpdateFinalStatus
    kinesis: KinesisMapping | None = None  # ChildStream -> LedgerKinesisConsumer
    kinesis_failures: SqsMapping | None = None  # KinesisFailureQueue -> LedgerKinesisFailureRecorder


def ledger_wiring(engine: Any) -> LedgerWiring:
    """Which queue feeds which function, read from the synthesized template."""
    template = engine.app.template(WORKFLOW)
    mappings = sqs_mappings(template, engine.region)
    consumer_id = engine.function_id(SOURCE_SERVICE, WORKFLOW)
    (source,) = [m for m in mappings.values() if m.function_id == consumer_id]
    redrive = template["Resources"][source.queue_id]["Properties"].get("RedrivePolicy")
    if not redrive:
        raise RuntimeError(f"queue {source.queue_id} has no RedrivePolicy in the template")
    dlq_id = redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]
    if dlq_id not in mappings:
        raise RuntimeError(f"no event source mapping reads the dead-letter queue {dlq_id}")
    has_stream = any(r["Type"] == "AWS::Kinesis::Stream" for r in template["Resources"].values())
    kinesis = kinesis_mapping(template, engine.region) if has_stream else None  # kinesis_intake=False: none
    if kinesis is not None and kinesis.on_failure_queue_id not in mappings:
        raise RuntimeError(f"no event source mapping reads the on-failure queue {kinesis.on_failure_queue_id}")
    return LedgerWiring(
        source=source,
        dlq=mappings[dlq_id],
        max_receive_count=int(redrive["maxReceiveCount"]),
        finalizer_id=engine.stacks[WORKFLOW].setting("FINALIZER_FUNCTION_NAME"),
        kinesis=kinesis,
        kinesis_failures=mappings[kinesis.on_failure_queue_id] if kinesis is not None else None,
    )


# --------------------------------------------------------------------------- the run

SOURCES = ("sqs", "kinesis")
DEFAULT_CONTENTION_WINDOW_MS = 3.0


def ledger_of(engine: Any) -> Any:
    """The ledger as the deployed consumers see it (table, counter layout from their environment)."""
    from fanout_kit.patterns.completion_ledger.ledger import Ledger

    shards = int(engine.stacks[WORKFLOW].environment.get("LEDGER_COUNTER_SHARDS", "1"))
    return Ledger(engine.dynamodb, engine.ledger_table_name(WORKFLOW), counter_shards=shards)


def child_index(body: str | bytes) -> Any:
    """The record key the demo counts deliveries by: the child message's index (childId)."""
    try:
        parsed = json.loads(body)
        return parsed.get("index", parsed.get("childId"))
    except (ValueError, AttributeError):
        return None


def run_ledger_batch(
    app: Any,
    *,
    children: int,
    fail: list[int],
    concurrency: int,
    duplicate: bool,
    source: str = "sqs",
    progress: ProgressView | None = None,
    batch_id: str | None = None,
    visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    contention_window_ms: float = DEFAULT_CONTENTION_WINDOW_MS,
    on_engine: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Run one demo batch through the ledger's SQS (or Kinesis) path on moto; return the outcome
    (the facts; ``fanout_kit.cli.run_ledger.print_outcome`` prints them). ``progress``: shown the
    ledger's counts while the event sources run (default: nothing shown).
    ``contention_window_ms`` > 0 turns the DynamoDB contention model on (each transaction holds its
    items that long; fanout_kit/local/dynamodb_contention.py), 0 turns it off.

    ``on_engine(engine)`` is called after the run, before the engine is closed (tests read the
    emulated tables and queues there)."""
    from fanout_kit.local.dynamodb_contention import ContentionModel
    from fanout_kit.local.engine import LocalEngine

    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if children < 1:
        raise ValueError(f"children must be >= 1, got {children}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if contention_window_ms < 0:
        raise ValueError(f"contention window must be >= 0 ms, got {contention_window_ms}")
    bad = [i for i in fail if not 0 <= i < children]
    if bad:
        raise ValueError(f"fail: child indexes must be in [0, {children}), got {bad}")
    batch_id = batch_id or f"ledger-demo-{uuid.uuid4().hex[:8]}"
    contention = ContentionModel(window_seconds=contention_window_ms / 1000) if contention_window_ms else None
    started = time.monotonic()
    with LocalEngine(app, workflows=(WORKFLOW,), sleep_retries=False, dynamodb_contention=contention) as engine:
        wiring = ledger_wiring(engine)
        if source == "kinesis" and wiring.kinesis is None:
            raise ValueError("--source kinesis: this CompletionLedger has no Kinesis intake (kinesis_intake=False)")
        processing = engine.stacks[WORKFLOW].environment.get("CHILD_FUNCTION_NAME")
        if processing and processing in engine.router.functions:
            # the app's own processing function: the failing children are injected by the engine
            from fanout_kit.local.moto_lambda import InjectedFault

            engine.router.item_faults.update({index: InjectedFault("permanent") for index in fail})
        notes = apply_queue_attributes(engine, WORKFLOW, visibility_timeout)
        if contention is not None:
            notes.append(f"DynamoDB contention model on: a transaction holds its items {contention_window_ms:g} ms; "
                         "overlapping writes are cancelled with TransactionConflict as DynamoDB does "
                         "(moto has no contention; --contention-window 0 turns the model off)")
        lock, stop = threading.Lock(), threading.Event()
        run = _SqsRun(engine, wiring, concurrency, lock, stop) if source == "sqs" else _KinesisRun(
            engine, wiring, lock, stop)
        notes.append(run.note())
        sent = run.send(batch_id, children, fail, duplicate)
        modules = [handler_module(engine, fid) for fid in run.function_ids().values() if fid != wiring.finalizer_id]
        with per_thread_processors(modules):
            timed_out = _drive(progress or no_progress, engine, batch_id, children, run.sources, stop, timeout_seconds)
        for event_source in run.sources:
            if event_source.errors:
                raise RuntimeError(f"the local event source mapping {event_source.name} failed") from event_source.errors[0]

        ledger = ledger_of(engine).read_batch(batch_id) or {}
        facts = {
            "batch_id": batch_id,
            "source": source,
            "children": children,
            "fail": sorted(set(fail)),
            "duplicate": duplicate,
            "sent": sent,
            "ledger": {k: ledger.get(k) for k in ("status", "total", "succeeded", "failed", "done")},
            "ledger_status": ledger.get("status"),
            "finished_by": ledger.get("finishedBy"),
            "counter_shards": ledger_of(engine).counter_shards,
            "update_final_status_invocations": engine.router.count(wiring.finalizer_id),
            "status_record": engine.status_record(batch_id, WORKFLOW),
            "timed_out": timed_out,
            "notes": notes,
            "function_ids": {**run.function_ids(), "update_final_status": wiring.finalizer_id},
            "contention": dict(contention.stats) if contention is not None else None,
            "contention_window_ms": contention_window_ms,
            **run.facts(visibility_timeout),
        }
        facts["consumer_invocations"] = engine.router.count(facts["function_ids"]["consumer"])
        facts["recorder_invocations"] = engine.router.count(facts["function_ids"]["recorder"])
        facts["processing_function"] = processing
        facts["processing_invocations"] = engine.router.count(processing) if processing else None
        # for `fanout results BATCH_ID --local`, once this engine (and its state) is gone
        saved = save_local_batch(engine.client, engine.deployment(WORKFLOW), batch_id) if facts["status_record"] else None
        facts["saved"] = str(saved) if saved else None
        # what the run used, priced as fanout estimate prices it (fanout_kit.local.metering): the
        # consumers' and recorders' invocations, the pollers' and the producer's SQS requests, the
        # ledger's DynamoDB request units; no Step Functions execution
        measured = engine.measured_cost([])
        facts["measured_cost"] = measured.to_json()
        facts["measured_cost_line"] = measured.line()
        if on_engine:
            on_engine(engine)
    facts["wall_seconds"] = round(time.monotonic() - started, 2)
    return facts


def _messages(batch_id: str, children: int, fail: list[int], duplicate: bool) -> list[dict[str, Any]]:
    """The demo batch's child messages; with ``duplicate`` every child twice (at-least-once
    delivery, or a producer's retry)."""
    from fanout_kit.local.ledger_producer import demo_messages

    messages = demo_messages(batch_id, children, fail=fail)
    return messages + messages if duplicate else messages


class _SqsRun:
    """The SQS path: ChildQueue -> consumer (pollers), ChildDeadLetterQueue -> DLQ recorder."""

    def __init__(self, engine: Any, wiring: LedgerWiring, concurrency: int, lock: threading.Lock,
                 stop: threading.Event) -> None:
        self.engine, self.wiring, self.concurrency = engine, wiring, concurrency
        self.source = SqsEventSource(engine, wiring.source, pollers=concurrency, sqs_lock=lock, stop=stop,
                                     key=child_index)
        self.dlq = SqsEventSource(engine, wiring.dlq, pollers=_dlq_pollers(wiring.dlq), sqs_lock=lock, stop=stop,
                                  key=child_index,
                                  keeps_rejected=True)
        self.sources = [self.source, self.dlq]  # upstream first (see drained)

    def note(self) -> str:
        w = self.wiring
        return ("event source mappings: local pollers stand in for Lambda's (moto does not run them in-process): "
                f"{w.source.queue_id} -> {w.source.function_id} ({self.concurrency} poller(s), "
                f"BatchSize {w.source.batch_size}, template MaximumConcurrency {w.source.max_concurrency}); "
                f"{w.dlq.queue_id} -> {w.dlq.function_id} ({_dlq_pollers(w.dlq)} poller(s), BatchSize {w.dlq.batch_size})")

    def send(self, batch_id: str, children: int, fail: list[int], duplicate: bool) -> int:
        from fanout_kit.local.ledger_producer import send_to_sqs

        queue_url = self.engine.deployment(WORKFLOW).output("ChildQueueUrl")  # what a producer is given
        return send_to_sqs(self.engine.sqs, queue_url, _messages(batch_id, children, fail, duplicate))

    def function_ids(self) -> dict[str, str]:
        return {"consumer": self.wiring.source.function_id, "recorder": self.wiring.dlq.function_id,
                "dlq_recorder": self.wiring.dlq.function_id}

    def facts(self, visibility_timeout: int) -> dict[str, Any]:
        w, source, dlq = self.wiring, self.source, self.dlq
        slowest = max(source.stats.slowest_batch_seconds, dlq.stats.slowest_batch_seconds)
        return {
            "deliveries": dict(source.stats.deliveries),
            "receive_counts": dict(source.stats.receive_counts),
            "dead_lettered": sorted(dlq.stats.deliveries, key=str),
            "dlq_messages_left": self.engine.dlq_messages(queue_url=w.dlq.queue_url),
            "source_messages_left": sum(queue_counts(self.engine.sqs, w.source.queue_url).values()),
            "max_receive_count": w.max_receive_count,
            "batch_size": w.source.batch_size,
            "visibility_timeout": visibility_timeout,
            "concurrency": self.concurrency,
            "slowest_batch_seconds": round(slowest, 3),
            "delete_failures": source.stats.delete_failures + dlq.stats.delete_failures,
            "returned_to_queue": source.stats.left_for_retry,
            "queue_urls": {"source": w.source.queue_url, "dlq": w.dlq.queue_url},
            "extra_notes": _slow_batch_notes([source, dlq], visibility_timeout),
        }


class _KinesisRun:
    """The Kinesis path: ChildStream -> consumer (one poller per shard), retries exhausted ->
    KinesisFailureQueue (range metadata) -> failure recorder."""

    def __init__(self, engine: Any, wiring: LedgerWiring, lock: threading.Lock, stop: threading.Event) -> None:
        self.engine, self.wiring = engine, wiring
        failures = wiring.kinesis_failures
        self.stream = KinesisEventSource(engine, wiring.kinesis, failure_queue_url=failures.queue_url, key=child_index,
                                         sqs_lock=lock, stop=stop)
        self.failures = SqsEventSource(engine, failures, pollers=_dlq_pollers(failures), sqs_lock=lock, stop=stop,
                                       key=child_index,
                                       keeps_rejected=True)
        self.sources = [self.stream, self.failures]  # upstream first (see drained)

    def note(self) -> str:
        k, f = self.wiring.kinesis, self.wiring.kinesis_failures
        return ("event source mappings: local pollers stand in for Lambda's (moto does not run them in-process): "
                f"{k.stream_id} -> {k.function_id} (one poller per shard: {len(self.stream.shards)}, BatchSize "
                f"{k.batch_size}, BisectBatchOnFunctionError {k.bisect_on_error}, MaximumRetryAttempts "
                f"{k.max_retry_attempts}, on failure -> {k.on_failure_queue_id}); "
                f"{f.queue_id} -> {f.function_id} ({_dlq_pollers(f)} poller(s), BatchSize {f.batch_size})")

    def send(self, batch_id: str, children: int, fail: list[int], duplicate: bool) -> int:
        from fanout_kit.local.ledger_producer import send_to_kinesis

        messages = _messages(batch_id, children, fail, duplicate)
        stream_arn = self.engine.deployment(WORKFLOW).output("ChildStreamArn")  # what a producer is given
        return send_to_kinesis(self.engine.client("kinesis"), stream_arn, messages)

    def function_ids(self) -> dict[str, str]:
        return {"consumer": self.wiring.kinesis.function_id, "recorder": self.wiring.kinesis_failures.function_id}

    def facts(self, visibility_timeout: int) -> dict[str, Any]:
        k, stats = self.wiring.kinesis, self.stream.stats
        return {
            "deliveries": dict(stats.deliveries),
            "shards": len(self.stream.shards),
            "batch_size": k.batch_size,
            "max_retry_attempts": k.max_retry_attempts,
            "bisect_on_error": k.bisect_on_error,
            "kinesis_invocations": stats.invocations,
            "partial_failures": stats.partial_failures,
            "bisections": stats.bisections,
            "retries": stats.retries,
            "function_errors": stats.function_errors,
            "discarded_ranges": [{**{k: v for k, v in r.items() if k != "keys"}, "children": r["keys"]}
                                 for r in stats.discarded],
            "dead_lettered": sorted({c for r in stats.discarded for c in r["keys"]}, key=str),
            "failure_queue_messages_left": self.engine.dlq_messages(queue_url=self.wiring.kinesis_failures.queue_url),
            "extra_notes": _slow_batch_notes([self.failures], visibility_timeout),
        }


def _slow_batch_notes(sources: Sequence[SqsEventSource], visibility_timeout: int) -> list[str]:
    slowest = max(s.stats.slowest_batch_seconds for s in sources)
    if slowest <= visibility_timeout:
        return []
    return [f"a batch took {slowest:.2f}s, more than the {visibility_timeout}s visibility timeout: its messages "
            "may have been redelivered while in flight (the ledger counts once)"]


def _dlq_pollers(mapping: SqsMapping) -> int:
    return max(1, min(mapping.max_concurrency or 2, 2))


def _drive(
    progress: ProgressView,
    engine: Any,
    batch_id: str,
    children: int,
    sources: Sequence[EventSourcePollers],
    stop: threading.Event,
    timeout_seconds: float,
) -> bool:
    """Run the event sources until all are idle (or the timeout); ``progress`` shows the
    ledger's counts meanwhile. Returns True on timeout."""
    deadline = time.monotonic() + timeout_seconds
    timed_out = False
    ledger = ledger_of(engine)
    with progress(batch_id, children) as show:

        def refresh() -> None:
            show(ledger.read_batch(batch_id) or {})

        for event_source in sources:
            event_source.start()
        try:
            while not stop.is_set():
                refresh()
                if drained(sources):
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                time.sleep(0.1)
        finally:
            stop.set()
            for event_source in sources:
                event_source.join()
            refresh()
    return timed_out


@contextmanager
def no_progress(batch_id: str, children: int) -> Iterator[Callable[[Mapping[str, Any]], None]]:
    """The progress view that shows nothing (the Python API's default)."""
    yield lambda counts: None

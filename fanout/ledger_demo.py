"""The completion-ledger (SQS) path on the embedded engine: ``python -m fanout.ledger_demo``.

Deploys the synthesized ledger stack locally (``LocalEngine(app, workflows=("ledger",))``: its SQS
queues, DynamoDB tables and Lambda functions, handlers in-process), sends a demo batch of child
messages to the source queue, runs the SQS consumer and the dead-letter-queue recorder the way
Lambda's SQS event source mappings would, shows the ledger's progress live and prints the outcome:
the ledger counts and status, whether UpdateFinalStatus ran (and how often), the status record,
what is left in the queues and the wall time.

What the local run adapts, all here and all visible (also listed in the outcome):

* The engine creates each queue with its name only. The queue attributes the demo depends on are
  applied from the synthesized template: each queue's ``RedrivePolicy`` (``deadLetterTargetArn``
  + ``maxReceiveCount``), and a short ``VisibilityTimeout`` (1 s by default instead of the
  template's minutes) so that a message whose child failed is redelivered quickly.
* moto does not run event source mappings in-process, so ``SqsEventSource`` below stands in for
  them: pollers that receive, invoke the function with the event Lambda builds, and apply the
  partial batch response (``ReportBatchItemFailures``).
* moto's SQS backend is not thread-safe (ReceiveMessage checks visibility, then marks the message
  received, and moves messages to the DLQ, without a lock); the pollers' SQS calls take one lock,
  which is what SQS guarantees (a visible message goes to one receiver). Handler invocations run
  concurrently, outside that lock.
* The consumers keep a module-level Powertools ``BatchProcessor``: per execution environment in
  Lambda, but shared by every thread in-process (its records and results would mix). While the
  demo runs, each poller thread gets its own processor (``per_thread_processors``): N threads are
  N execution environments.
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from fanout.errors import CliError
from fanout.local.template import local_names, make_resolver, resources_of_type

WORKFLOW = "ledger"
SOURCE_SERVICE = "LedgerSqsConsumer"  # POWERTOOLS_SERVICE_NAME of the source queue's consumer
DEFAULT_VISIBILITY_TIMEOUT = 1  # seconds; the template's are minutes
DEFAULT_TIMEOUT_SECONDS = 120.0
POLL_INTERVAL_SECONDS = 0.02  # an empty receive waits this long before the next one
QUIET_ENV = {
    "POWERTOOLS_LOG_LEVEL": "WARNING",  # keep handler logs out of the view
    "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon locally
    "POWERTOOLS_METRICS_DISABLED": "true",  # no EMF lines in the view
}


# --------------------------------------------------------------------------- the template's wiring


@dataclass(frozen=True)
class SqsMapping:
    """One SQS event source mapping of the template, resolved to local names."""

    logical_id: str
    queue_id: str  # logical id of the queue
    queue_url: str
    queue_arn: str
    function_id: str  # logical id of the function
    batch_size: int
    max_concurrency: int | None
    report_batch_item_failures: bool


@dataclass(frozen=True)
class LedgerWiring:
    source: SqsMapping  # ChildQueue -> LedgerSqsConsumer
    dlq: SqsMapping  # ChildDeadLetterQueue -> LedgerDlqRecorder
    max_receive_count: int
    finalizer_id: str  # UpdateFinalStatus


def sqs_mappings(template: Mapping[str, Any], region: str) -> dict[str, SqsMapping]:
    """The template's SQS event source mappings, by queue logical id."""
    refs, attrs = local_names(template, region)
    queues = resources_of_type(template, "AWS::SQS::Queue")
    out: dict[str, SqsMapping] = {}
    for lid, res in resources_of_type(template, "AWS::Lambda::EventSourceMapping").items():
        props = res["Properties"]
        source = props.get("EventSourceArn", {})
        queue_id = source.get("Fn::GetAtt", [None])[0] if isinstance(source, dict) else None
        if queue_id not in queues:
            continue  # the Kinesis mapping
        function = props["FunctionName"]
        function_id = function["Ref"] if isinstance(function, dict) else function
        out[queue_id] = SqsMapping(
            logical_id=lid,
            queue_id=queue_id,
            queue_url=refs[queue_id],
            queue_arn=attrs[(queue_id, "Arn")],
            function_id=function_id,
            batch_size=int(props.get("BatchSize", 10)),
            max_concurrency=(props.get("ScalingConfig") or {}).get("MaximumConcurrency"),
            report_batch_item_failures="ReportBatchItemFailures" in props.get("FunctionResponseTypes", []),
        )
    return out


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
    return LedgerWiring(
        source=source,
        dlq=mappings[dlq_id],
        max_receive_count=int(redrive["maxReceiveCount"]),
        finalizer_id=engine.stacks[WORKFLOW].setting("FINALIZER_FUNCTION_NAME"),
    )


def apply_queue_attributes(engine: Any, visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT) -> list[str]:
    """Give the engine's queues (created by name only) the template's RedrivePolicy and a short
    VisibilityTimeout. Returns one note per queue, for the outcome."""
    template = engine.app.template(WORKFLOW)
    resolve = make_resolver(*local_names(template, engine.region), engine.region)
    notes = []
    for lid, res in resources_of_type(template, "AWS::SQS::Queue").items():
        props = res["Properties"]
        attributes = {"VisibilityTimeout": str(visibility_timeout)}
        note = (f"queue {lid}: VisibilityTimeout {visibility_timeout}s instead of the template's "
                f"{props.get('VisibilityTimeout')}s, for a fast local redelivery")
        if "RedrivePolicy" in props:
            policy = resolve(props["RedrivePolicy"])
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": policy["deadLetterTargetArn"], "maxReceiveCount": int(policy["maxReceiveCount"])}
            )
            note += (f", RedrivePolicy maxReceiveCount={policy['maxReceiveCount']} -> "
                     f"{policy['deadLetterTargetArn'].rsplit(':', 1)[-1]}")
        engine.sqs.set_queue_attributes(QueueUrl=engine.stacks[WORKFLOW].queues[lid], Attributes=attributes)
        notes.append(note)
    return notes


# --------------------------------------------------------------------------- per-thread processors


class _PerThreadProcessor:
    """Stands in for a handler module's ``processor``: one real BatchProcessor per thread."""

    def __init__(self, original: Any) -> None:
        self._original = original
        self._local = threading.local()

    def _mine(self) -> Any:
        mine = getattr(self._local, "processor", None)
        if mine is None:
            o = self._original
            mine = self._local.processor = type(o)(
                event_type=o.event_type,
                model=o.model,
                raise_on_entire_batch_failure=o.raise_on_entire_batch_failure,
                logger=o.logger,
            )
        return mine

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._mine()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mine(), name)


@contextmanager
def per_thread_processors(modules: Sequence[Any]) -> Iterator[None]:
    """While active, each module's module-level ``processor`` is per thread (see the docstring)."""
    from aws_lambda_powertools.utilities.batch.base import BasePartialBatchProcessor

    swapped = []
    for module in modules:
        original = getattr(module, "processor", None)
        if isinstance(original, BasePartialBatchProcessor):
            module.processor = _PerThreadProcessor(original)
            swapped.append((module, original))
    try:
        yield
    finally:
        for module, original in swapped:
            module.processor = original


def handler_module(engine: Any, function_id: str) -> Any:
    """The module of a function's handler, imported the way the router imports it."""
    from fanout.local.moto_lambda import LAMBDAS_DIR

    if str(LAMBDAS_DIR) not in sys.path:
        sys.path.insert(0, str(LAMBDAS_DIR))
    return importlib.import_module(engine.router.functions[function_id].handler.rpartition(".")[0])


# --------------------------------------------------------------------------- the ESM stand-in


def lambda_sqs_record(message: Mapping[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """A ReceiveMessage message -> the record of Lambda's SQS event (same field names and types)."""
    attributes = {k: str(v) for k, v in (message.get("Attributes") or {}).items()}
    message_attributes = {}
    for name, value in (message.get("MessageAttributes") or {}).items():
        binary = value.get("BinaryValue")
        message_attributes[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": base64.b64encode(binary).decode() if isinstance(binary, bytes) else binary,
            "stringListValues": list(value.get("StringListValues") or []),
            "binaryListValues": list(value.get("BinaryListValues") or []),
            "dataType": value.get("DataType"),
        }
        message_attributes[name] = {k: v for k, v in message_attributes[name].items() if v is not None}
    record = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody"),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    return record


@dataclass
class SourceStats:
    receives: int = 0  # non-empty ReceiveMessage calls (= invocations)
    deleted: int = 0
    left_for_retry: int = 0  # batchItemFailures (or whole failed batches), left to reappear
    function_errors: int = 0  # invocations that raised (the whole batch stays)
    deliveries: Counter = field(default_factory=Counter)  # child index -> deliveries to the function
    receive_counts: dict = field(default_factory=dict)  # child index -> highest ApproximateReceiveCount
    rejected: set = field(default_factory=set)  # messageIds currently failing (for the stop rule)
    delete_failures: int = 0
    slowest_batch_seconds: float = 0.0  # receive -> settled; above the visibility timeout the
    # batch's messages could reappear while still in flight (harmless: counted once, but noted)


class SqsEventSource:
    """The local substitute for Lambda's SQS event source mapping, which moto does not run
    in-process: ``pollers`` threads each loop ReceiveMessage (up to the mapping's BatchSize, all
    system attributes), build the SQS event exactly as Lambda does (``Records`` with messageId,
    receiptHandle, body, attributes.ApproximateReceiveCount, ..., eventSource, eventSourceARN,
    awsRegion), invoke the function through the engine's Lambda router, and apply the answer:

    * ReportBatchItemFailures: the messages named in ``batchItemFailures`` stay in the queue (they
      reappear after the visibility timeout, with ApproximateReceiveCount + 1), the others are
      deleted. A response naming an unknown/empty itemIdentifier fails the whole batch (Lambda's
      rule), as does a function error; nothing is deleted then.
    * Without ReportBatchItemFailures: any function error leaves the whole batch; success deletes it.

    Redrive is SQS's own: moto moves a message whose receive count reached maxReceiveCount to the
    dead-letter queue on the next ReceiveMessage, as SQS does.
    """

    def __init__(
        self,
        engine: Any,
        mapping: SqsMapping,
        *,
        pollers: int,
        sqs_lock: threading.Lock,
        stop: threading.Event,
    ) -> None:
        self.engine = engine
        self.mapping = mapping
        self.pollers = pollers
        self.lock = sqs_lock
        self.stop = stop
        self.in_flight = 0  # batches received and not yet settled (guarded by sqs_lock)
        self.stats = SourceStats()
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._loop, name=f"esm-{mapping.queue_id}-{n}", daemon=True)
            for n in range(pollers)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self, timeout: float = 30) -> None:
        for thread in self.threads:
            thread.join(timeout)

    def _loop(self) -> None:
        try:
            while not self.stop.is_set():
                if not self._poll_once():
                    time.sleep(POLL_INTERVAL_SECONDS)
        except BaseException as exc:  # a bug in the stand-in: surface it, stop the run
            self.errors.append(exc)
            self.stop.set()

    def _poll_once(self) -> bool:
        m = self.mapping
        sqs = self.engine.sqs
        with self.lock:
            messages = sqs.receive_message(
                QueueUrl=m.queue_url,
                MaxNumberOfMessages=m.batch_size,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
            ).get("Messages", [])
            if not messages:
                return False
            self.in_flight += 1
            self.stats.receives += 1
        began = time.monotonic()
        try:
            self._deliver(messages)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.stats.slowest_batch_seconds = max(self.stats.slowest_batch_seconds, time.monotonic() - began)
        return True

    def _deliver(self, messages: list[dict[str, Any]]) -> None:
        m = self.mapping
        records = [lambda_sqs_record(msg, m.queue_arn, self.engine.region) for msg in messages]
        for record in records:
            index = _child_index(record["body"])
            count = int(record["attributes"].get("ApproximateReceiveCount", "1"))
            with self.lock:
                self.stats.deliveries[index] += 1
                self.stats.receive_counts[index] = max(count, self.stats.receive_counts.get(index, 0))
        headers: dict[str, str] = {}
        payload = self.engine.router.invoke(m.function_id, json.dumps({"Records": records}).encode(), headers)
        by_id = {r["messageId"]: r for r in records}
        if headers.get("x-amz-function-error"):
            failed = set(by_id)
            with self.lock:
                self.stats.function_errors += 1
        elif m.report_batch_item_failures:
            failed = _reported_failures(payload, by_id)
        else:
            failed = set()
        done = [r for r in records if r["messageId"] not in failed]
        with self.lock:
            for start in range(0, len(done), 10):
                chunk = done[start : start + 10]
                answer = self.engine.sqs.delete_message_batch(
                    QueueUrl=m.queue_url,
                    Entries=[{"Id": str(n), "ReceiptHandle": r["receiptHandle"]} for n, r in enumerate(chunk)],
                )
                self.stats.delete_failures += len(answer.get("Failed", []))
            self.stats.deleted += len(done)
            self.stats.left_for_retry += len(failed)
            self.stats.rejected.difference_update(r["messageId"] for r in done)
            self.stats.rejected.update(failed)


def _reported_failures(payload: bytes, by_id: Mapping[str, Any]) -> set[str]:
    """The messageIds to keep, from a partial batch response (Lambda's validation rules)."""
    try:
        response = json.loads(payload or b"null")
    except ValueError:
        return set(by_id)
    if response is None or (isinstance(response, dict) and not response.get("batchItemFailures")):
        return set()  # null, {} or an empty list: the whole batch succeeded
    if not isinstance(response, dict) or not isinstance(response["batchItemFailures"], list):
        return set(by_id)
    failed = set()
    for item in response["batchItemFailures"]:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not identifier or identifier not in by_id:
            return set(by_id)  # an invalid response fails the whole batch
        failed.add(identifier)
    return failed


def _child_index(body: str) -> Any:
    try:
        parsed = json.loads(body)
        return parsed.get("index", parsed.get("childId"))
    except (ValueError, AttributeError):
        return None


def _queue_depth(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                        "ApproximateNumberOfMessagesDelayed"],
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


# --------------------------------------------------------------------------- the demo


def run_ledger_demo(
    app: Any,
    *,
    children: int,
    fail: list[int],
    concurrency: int,
    duplicate: bool,
    console: Console | None = None,
    batch_id: str | None = None,
    visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    on_engine: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Run one demo batch through the ledger's SQS path on moto; print and return the outcome.

    ``on_engine(engine)`` is called after the run, before the engine is closed (tests read the
    emulated tables and queues there)."""
    from fanout.local.engine import LocalEngine
    from lambdas.fanout_common.ledger_producer import demo_messages, send_to_sqs

    if children < 1:
        raise ValueError(f"children must be >= 1, got {children}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    bad = [i for i in fail if not 0 <= i < children]
    if bad:
        raise ValueError(f"fail: child indexes must be in [0, {children}), got {bad}")
    console = console or Console()
    batch_id = batch_id or f"ledger-demo-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    with LocalEngine(app, workflows=(WORKFLOW,), sleep_retries=False) as engine:
        wiring = ledger_wiring(engine)
        notes = apply_queue_attributes(engine, visibility_timeout)
        notes.append(
            "event source mappings: local pollers stand in for Lambda's (moto does not run them in-process): "
            f"{wiring.source.queue_id} -> {wiring.source.function_id} ({concurrency} poller(s), "
            f"BatchSize {wiring.source.batch_size}, template MaximumConcurrency {wiring.source.max_concurrency}); "
            f"{wiring.dlq.queue_id} -> {wiring.dlq.function_id} "
            f"({_dlq_pollers(wiring)} poller(s), BatchSize {wiring.dlq.batch_size})"
        )
        messages = demo_messages(batch_id, children, fail=fail)
        if duplicate:
            messages = messages + messages  # every child twice: at-least-once delivery
        sent = send_to_sqs(engine.sqs, wiring.source.queue_url, messages)

        lock, stop = threading.Lock(), threading.Event()
        source = SqsEventSource(engine, wiring.source, pollers=concurrency, sqs_lock=lock, stop=stop)
        dlq = SqsEventSource(engine, wiring.dlq, pollers=_dlq_pollers(wiring), sqs_lock=lock, stop=stop)
        modules = [handler_module(engine, wiring.source.function_id), handler_module(engine, wiring.dlq.function_id)]
        with per_thread_processors(modules):
            timed_out = _drive(console, engine, batch_id, children, source, dlq, lock, stop, timeout_seconds)
        for event_source in (source, dlq):
            if event_source.errors:
                raise RuntimeError(f"the local event source mapping of {event_source.mapping.queue_id} "
                                   "failed") from event_source.errors[0]

        slowest = max(source.stats.slowest_batch_seconds, dlq.stats.slowest_batch_seconds)
        if slowest > visibility_timeout:
            notes.append(f"a batch took {slowest:.2f}s, more than the {visibility_timeout}s visibility timeout: "
                         "its messages may have been redelivered while in flight (the ledger counts once)")
        ledger = engine.ledger_counts(batch_id, WORKFLOW) or {}
        record = engine.status_record(batch_id, WORKFLOW)
        dlq_left = engine.dlq_messages(queue_url=wiring.dlq.queue_url)
        source_left = _queue_depth(engine.sqs, wiring.source.queue_url)
        facts = {
            "batch_id": batch_id,
            "children": children,
            "fail": sorted(set(fail)),
            "duplicate": duplicate,
            "sent": sent,
            "ledger": {k: ledger.get(k) for k in ("status", "total", "succeeded", "failed", "done")},
            "ledger_status": ledger.get("status"),
            "finished_by": ledger.get("finishedBy"),
            "update_final_status_invocations": engine.router.count(wiring.finalizer_id),
            "status_record": record,
            "consumer_invocations": engine.router.count(wiring.source.function_id),
            "dlq_recorder_invocations": engine.router.count(wiring.dlq.function_id),
            "deliveries": dict(source.stats.deliveries),
            "receive_counts": dict(source.stats.receive_counts),
            "dead_lettered": sorted(dlq.stats.deliveries, key=str),
            "dlq_messages_left": dlq_left,
            "source_messages_left": source_left,
            "max_receive_count": wiring.max_receive_count,
            "batch_size": wiring.source.batch_size,
            "visibility_timeout": visibility_timeout,
            "concurrency": concurrency,
            "timed_out": timed_out,
            "slowest_batch_seconds": round(slowest, 3),
            "delete_failures": source.stats.delete_failures + dlq.stats.delete_failures,
            "notes": notes,
            "function_ids": {
                "consumer": wiring.source.function_id,
                "dlq_recorder": wiring.dlq.function_id,
                "update_final_status": wiring.finalizer_id,
            },
            "queue_urls": {"source": wiring.source.queue_url, "dlq": wiring.dlq.queue_url},
        }
        if on_engine:
            on_engine(engine)
    facts["wall_seconds"] = round(time.monotonic() - started, 2)
    print_outcome(console, facts)
    return facts


def _dlq_pollers(wiring: LedgerWiring) -> int:
    return max(1, min(wiring.dlq.max_concurrency or 2, 2))


def _drive(
    console: Console,
    engine: Any,
    batch_id: str,
    children: int,
    source: SqsEventSource,
    dlq: SqsEventSource,
    lock: threading.Lock,
    stop: threading.Event,
    timeout_seconds: float,
) -> bool:
    """Run both event sources until the queues are drained and nothing is in flight (or the
    timeout); a progress bar shows the ledger's counts meanwhile. Returns True on timeout."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("done, failed {task.fields[failed]}, status {task.fields[status]}"),
               TimeElapsedColumn())
    deadline = time.monotonic() + timeout_seconds
    timed_out = False
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task(f"batch {batch_id}", total=children, failed=0, status="-")

        def refresh() -> None:
            counts = engine.ledger_counts(batch_id, WORKFLOW) or {}
            progress.update(bar, completed=counts.get("done", 0), failed=counts.get("failed", 0),
                            status=counts.get("status", "-"))

        source.start()
        dlq.start()
        try:
            while not stop.is_set():
                refresh()
                if _drained(engine, source, dlq, lock):
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                time.sleep(0.1)
        finally:
            stop.set()
            source.join()
            dlq.join()
            refresh()
    return timed_out


def _drained(engine: Any, source: SqsEventSource, dlq: SqsEventSource, lock: threading.Lock) -> bool:
    """Both queues empty and no batch in flight; checked under the pollers' lock, so no receive
    is half done. Messages the DLQ recorder keeps rejecting (not child messages) do not hold the
    run: they are reported as left in the DLQ."""
    with lock:
        if source.in_flight or dlq.in_flight:
            return False
        if _queue_depth(engine.sqs, source.mapping.queue_url):
            return False
        return _queue_depth(engine.sqs, dlq.mapping.queue_url) <= len(dlq.stats.rejected)


def print_outcome(console: Console, facts: Mapping[str, Any]) -> None:
    ledger = facts["ledger"]
    status = facts["ledger_status"]
    color = "green" if status == "COMPLETED" else "red"
    console.print(
        f"\nledger batch {facts['batch_id']}: [bold {color}]{status}[/]  "
        + ", ".join(f"{k}={ledger.get(k)}" for k in ("total", "succeeded", "failed", "done"))
        + (f"  (decided by {facts['finished_by']})" if facts.get("finished_by") else "")
    )
    copies = " (every message sent twice)" if facts["duplicate"] else ""
    console.print(f"sent {facts['sent']} message(s){copies}; consumer invocations: "
                  f"{facts['consumer_invocations']}, DLQ recorder invocations: {facts['dlq_recorder_invocations']}")
    ran = facts["update_final_status_invocations"]
    console.print(f"UpdateFinalStatus: {'ran' if ran else 'never invoked'} ({ran} invocation(s))")
    record = facts["status_record"]
    console.print(f"final status record: {json.dumps(record, sort_keys=True) if record else 'none'}")
    for index in facts["fail"]:
        console.print(
            f"child {index}: delivered {facts['deliveries'].get(index, 0)} time(s) (highest "
            f"ApproximateReceiveCount {facts['receive_counts'].get(index, 0)}, maxReceiveCount "
            f"{facts['max_receive_count']}), dead-lettered: {index in facts['dead_lettered']}"
        )
    repeated = sorted(i for i, n in facts["deliveries"].items() if n > 1 and i not in facts["fail"])
    if repeated:
        console.print(f"children delivered more than once (counted once): {len(repeated)}")
    left = facts["dlq_messages_left"]
    console.print(f"dead-letter queue: {len(left)} message(s) left; source queue: "
                  f"{facts['source_messages_left']} message(s) left")
    for message in left[:10]:
        console.print(f"  - {json.dumps(message)[:200]}")
    if facts["timed_out"]:
        console.print("[bold red]timed out before the queues were drained[/]")
    for note in facts["notes"]:
        console.print(f"[dim]local adaptation: {note}[/]")
    console.print(f"wall time: {facts['wall_seconds']:.2f}s (deploy + run, synth excluded)")


# --------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--children", type=int, default=25, help="child messages in the batch (default 25)")
    parser.add_argument("--fail", default="", metavar="I,J",
                        help="comma-separated child indexes that fail permanently (dead-lettered)")
    parser.add_argument("--concurrency", type=int, default=10, help="consumer pollers (default 10)")
    parser.add_argument("--duplicate", action="store_true", help="send every message twice")
    parser.add_argument("--env", default="dev", help="environment from cdk.json (default: dev)")
    parser.add_argument("--batch-id", help="batch id (default: generated)")
    parser.add_argument("--visibility-timeout", type=int, default=DEFAULT_VISIBILITY_TIMEOUT,
                        help=f"seconds, for a fast local redelivery (default {DEFAULT_VISIBILITY_TIMEOUT})")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS,
                        help="give up after this many seconds")
    return parser


def run_from_args(args: argparse.Namespace, console: Console | None = None) -> int:
    """Synthesize, run, print; exit code 0 when the batch COMPLETED and was finalized."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    logging.getLogger("aws_lambda_powertools").setLevel(logging.WARNING)
    try:
        fail = sorted({int(i) for i in args.fail.split(",") if i.strip()})
    except ValueError:
        raise CliError(f"--fail {args.fail!r}: comma-separated whole numbers (child indexes) expected") from None
    from fanout.local.template import synthesize

    console = console or Console()
    started = time.monotonic()
    with console.status(f"synthesizing the CDK app ({args.env}) with cdk-nag..."):
        app = synthesize(args.env)
    console.print(f"synthesized {args.env} in {time.monotonic() - started:.1f}s")
    try:
        facts = run_ledger_demo(
            app,
            children=args.children,
            fail=fail,
            concurrency=args.concurrency,
            duplicate=args.duplicate,
            console=console,
            batch_id=args.batch_id,
            visibility_timeout=args.visibility_timeout,
            timeout_seconds=args.timeout,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    record = facts["status_record"] or {}
    return 0 if facts["ledger_status"] == "COMPLETED" and record.get("status") == "SUCCEEDED" else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(
        prog="python -m fanout.ledger_demo", description=__doc__.splitlines()[0]
    ))
    return run_from_args(parser.parse_args(argv))


if __name__ == "__main__":
    from stacks.runtime_node import use_venv_node

    use_venv_node()
    raise SystemExit(main())

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
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from rich.console import Console

from fanout.errors import CliError
from fanout.local.template import LOCAL_ACCOUNT, local_names, make_resolver, resources_of_type

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
    kinesis: Any = None  # KinesisMapping: ChildStream -> LedgerKinesisConsumer
    kinesis_failures: SqsMapping | None = None  # KinesisFailureQueue -> LedgerKinesisFailureRecorder


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
    kinesis = kinesis_mapping(template, engine.region)
    if kinesis.on_failure_queue_id not in mappings:
        raise RuntimeError(f"no event source mapping reads the on-failure queue {kinesis.on_failure_queue_id}")
    return LedgerWiring(
        source=source,
        dlq=mappings[dlq_id],
        max_receive_count=int(redrive["maxReceiveCount"]),
        finalizer_id=engine.stacks[WORKFLOW].setting("FINALIZER_FUNCTION_NAME"),
        kinesis=kinesis,
        kinesis_failures=mappings[kinesis.on_failure_queue_id],
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


class EventSourcePollers:
    """What every local event source mapping stand-in shares: one thread per ``target`` (an SQS
    poller, a Kinesis shard) looping ``_poll_once(target)`` until ``stop``; an exception in the
    stand-in itself (a bug, not a function error) is kept in ``errors`` and stops the run."""

    name = "esm"

    def __init__(self, targets: Sequence[Any], stop: threading.Event) -> None:
        self.stop = stop
        self.in_flight = 0  # batches being processed (guarded by the subclass's lock)
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._loop, args=(target,), name=f"{self.name}-{n}", daemon=True)
            for n, target in enumerate(targets)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self, timeout: float = 30) -> None:
        for thread in self.threads:
            thread.join(timeout)

    def _loop(self, target: Any) -> None:
        try:
            while not self.stop.is_set():
                if not self._poll_once(target):
                    time.sleep(POLL_INTERVAL_SECONDS)
        except BaseException as exc:  # a bug in the stand-in: surface it, stop the run
            self.errors.append(exc)
            self.stop.set()

    def _poll_once(self, target: Any) -> bool:
        """Process one batch if there is one; False when there was nothing to do."""
        raise NotImplementedError

    def idle(self) -> bool:
        """Nothing left to deliver and nothing in flight (checked once upstream sources are idle)."""
        raise NotImplementedError

    def _invoke(self, function_id: str, event: Mapping[str, Any]) -> tuple[bytes, bool]:
        """Invoke the function with the event, as Lambda would; (payload, function error?)."""
        headers: dict[str, str] = {}
        payload = self.engine.router.invoke(function_id, json.dumps(event).encode(), headers)
        return payload, bool(headers.get("x-amz-function-error"))


class SqsEventSource(EventSourcePollers):
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
        keeps_rejected: bool = False,
    ) -> None:
        self.name = f"esm-{mapping.queue_id}"
        super().__init__(range(pollers), stop)
        self.engine = engine
        self.mapping = mapping
        self.pollers = pollers
        self.lock = sqs_lock  # every SQS call of the stand-ins (moto's SQS is not thread-safe)
        self.keeps_rejected = keeps_rejected  # a recorder: messages it rejects stay for an operator
        self.stats = SourceStats()

    def idle(self) -> bool:
        with self.lock:
            if self.in_flight:
                return False
            depth = _queue_depth(self.engine.sqs, self.mapping.queue_url)
            return depth <= len(self.stats.rejected) if self.keeps_rejected else depth == 0

    def _poll_once(self, _poller: int) -> bool:
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
        payload, function_error = self._invoke(m.function_id, {"Records": records})
        by_id = {r["messageId"]: r for r in records}
        if function_error:
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


@dataclass(frozen=True)
class KinesisMapping:
    """The template's Kinesis event source mapping, resolved to local names."""

    logical_id: str
    stream_id: str
    stream_arn: str
    function_id: str
    batch_size: int
    bisect_on_error: bool
    max_retry_attempts: int  # -1: until the record expires
    report_batch_item_failures: bool
    on_failure_queue_id: str | None


def kinesis_mapping(template: Mapping[str, Any], region: str) -> KinesisMapping:
    refs, attrs = local_names(template, region)
    streams = resources_of_type(template, "AWS::Kinesis::Stream")
    for lid, res in resources_of_type(template, "AWS::Lambda::EventSourceMapping").items():
        props = res["Properties"]
        source = props.get("EventSourceArn", {})
        stream_id = source.get("Fn::GetAtt", [None])[0] if isinstance(source, dict) else None
        if stream_id not in streams:
            continue
        destination = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        function = props["FunctionName"]
        return KinesisMapping(
            logical_id=lid,
            stream_id=stream_id,
            stream_arn=attrs[(stream_id, "Arn")],
            function_id=function["Ref"] if isinstance(function, dict) else function,
            batch_size=int(props.get("BatchSize", 100)),
            bisect_on_error=bool(props.get("BisectBatchOnFunctionError", False)),
            max_retry_attempts=int(props.get("MaximumRetryAttempts", -1)),
            report_batch_item_failures="ReportBatchItemFailures" in props.get("FunctionResponseTypes", []),
            on_failure_queue_id=destination["Fn::GetAtt"][0] if isinstance(destination, dict) else None,
        )
    raise RuntimeError("the template has no Kinesis event source mapping")


def lambda_kinesis_record(record: Mapping[str, Any], shard_id: str, mapping: KinesisMapping, region: str) -> dict:
    """A GetRecords record -> the record of Lambda's Kinesis event (same field names and types)."""
    arrival = record.get("ApproximateArrivalTimestamp")
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": record["SequenceNumber"],
            "data": base64.b64encode(record["Data"]).decode(),
            "approximateArrivalTimestamp": arrival.timestamp() if arrival else time.time(),
        },
        "eventSource": "aws:kinesis",
        "eventVersion": "1.0",
        "eventID": f"{shard_id}:{record['SequenceNumber']}",
        "eventName": "aws:kinesis:record",
        "invokeIdentityArn": f"arn:aws:iam::{LOCAL_ACCOUNT}:role/{mapping.function_id}Role",
        "awsRegion": region,
        "eventSourceARN": mapping.stream_arn,
    }


@dataclass
class KinesisStats:
    invocations: int = 0
    function_errors: int = 0  # invocations that raised
    partial_failures: int = 0  # responses naming failed records (batchItemFailures)
    bisections: int = 0  # failed batches split in two (BisectBatchOnFunctionError)
    retries: int = 0  # batches (or their remainders) retried
    deliveries: Counter = field(default_factory=Counter)  # child index -> deliveries to the function
    discarded: list = field(default_factory=list)  # ranges sent to the on-failure destination
    records_read: int = 0


class KinesisEventSource(EventSourcePollers):
    """The local substitute for Lambda's Kinesis event source mapping (moto does not run it):
    one poller per shard (ParallelizationFactor 1, so each shard's records are processed in order,
    one batch at a time), from TRIM_HORIZON, GetRecords up to the mapping's BatchSize, the Kinesis
    event built as Lambda builds it, and Lambda's documented error handling:

    * ReportBatchItemFailures: the records before the lowest failed sequence number are done; the
      batch is retried from that record (records after it that had succeeded are delivered again:
      at-least-once). An unknown/empty itemIdentifier fails the whole batch.
    * BisectBatchOnFunctionError: a batch whose invocation raised is split in two halves, retried
      separately; splitting does not count towards the retry quota.
    * MaximumRetryAttempts: when a batch (or its remainder) has failed 1 + MaximumRetryAttempts
      times, Lambda discards it and sends the range's *metadata* to the on-failure destination (the
      stack's SQS queue): requestContext.condition RetryAttemptsExhausted and KinesisBatchInfo
      (shardId, start/endSequenceNumber, batchSize, streamArn, arrival times); then it goes on.

    Not modelled: MaximumRecordAgeInSeconds (the template leaves it unlimited), batching windows,
    tumbling windows, ParallelizationFactor > 1, enhanced fan-out consumers.
    """

    def __init__(
        self,
        engine: Any,
        mapping: KinesisMapping,
        *,
        failure_queue_url: str | None,
        sqs_lock: threading.Lock,
        stop: threading.Event,
    ) -> None:
        self.name = f"esm-{mapping.stream_id}"
        self.engine = engine
        self.mapping = mapping
        self.kinesis = engine.client("kinesis")
        shards = [s["ShardId"] for s in self.kinesis.describe_stream(
            StreamARN=mapping.stream_arn)["StreamDescription"]["Shards"]]
        super().__init__(shards, stop)
        self.shards = shards
        self.failure_queue_url = failure_queue_url
        self.sqs_lock = sqs_lock
        self.lock = threading.Lock()
        self.iterators = {
            shard: self.kinesis.get_shard_iterator(
                StreamARN=mapping.stream_arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            for shard in shards
        }
        self.caught_up = dict.fromkeys(shards, False)
        self.stats = KinesisStats()

    def idle(self) -> bool:
        with self.lock:
            return not self.in_flight and all(self.caught_up.values())

    def _poll_once(self, shard: str) -> bool:
        page = self.kinesis.get_records(
            ShardIterator=self.iterators[shard], Limit=self.mapping.batch_size, StreamARN=self.mapping.stream_arn
        )
        self.iterators[shard] = page["NextShardIterator"]
        records = page["Records"]
        with self.lock:
            if not records:
                self.caught_up[shard] = not page.get("MillisBehindLatest")
                return False
            self.caught_up[shard] = False
            self.in_flight += 1
            self.stats.records_read += len(records)
        try:
            self._process(shard, records)
        finally:
            with self.lock:
                self.in_flight -= 1
        return True

    def _process(self, shard: str, records: list[dict[str, Any]]) -> None:
        """One batch read from the shard, with its retries, bisections and discards."""
        m = self.mapping
        pending: deque[tuple[list[dict[str, Any]], int]] = deque([(records, 0)])
        while pending:
            batch, retries = pending[0]
            failed_at, function_error = self._deliver(shard, batch)
            if failed_at is None:
                pending.popleft()
                continue
            if function_error and m.bisect_on_error and len(batch) > 1:
                half = len(batch) // 2
                pending.popleft()
                pending.extendleft([(batch[half:], retries), (batch[:half], retries)])
                with self.lock:
                    self.stats.bisections += 1
                continue
            remaining, retries = batch[failed_at:], retries + 1
            if 0 <= m.max_retry_attempts < retries:
                pending.popleft()
                self._discard(shard, remaining, attempts=retries, function_error=function_error)
                continue
            pending[0] = (remaining, retries)
            with self.lock:
                self.stats.retries += 1

    def _deliver(self, shard: str, batch: list[dict[str, Any]]) -> tuple[int | None, bool]:
        """Invoke once; (index of the first record to retry or None when all done, function error?)."""
        m = self.mapping
        event_records = [lambda_kinesis_record(r, shard, m, self.engine.region) for r in batch]
        with self.lock:
            self.stats.invocations += 1
            for record in batch:
                self.stats.deliveries[_child_index(record["Data"])] += 1
        payload, function_error = self._invoke(m.function_id, {"Records": event_records})
        if function_error:
            with self.lock:
                self.stats.function_errors += 1
            return 0, True
        if not m.report_batch_item_failures:
            return None, False
        by_sequence = {r["SequenceNumber"]: r for r in batch}
        failed = _reported_failures(payload, by_sequence)
        if not failed:
            return None, False
        with self.lock:
            self.stats.partial_failures += 1
        lowest = min(int(sequence) for sequence in failed)
        return next(i for i, r in enumerate(batch) if int(r["SequenceNumber"]) == lowest), False

    def _discard(self, shard: str, batch: list[dict[str, Any]], *, attempts: int, function_error: bool) -> None:
        """Retries exhausted: the range's metadata to the on-failure destination, as Lambda sends it."""
        def iso(record: Mapping[str, Any]) -> str:
            arrival = record.get("ApproximateArrivalTimestamp")
            return (arrival or datetime.now(timezone.utc)).astimezone(timezone.utc).isoformat(timespec="milliseconds")

        info = {
            "shardId": shard,
            "startSequenceNumber": batch[0]["SequenceNumber"],
            "endSequenceNumber": batch[-1]["SequenceNumber"],
            "approximateArrivalOfFirstRecord": iso(batch[0]),
            "approximateArrivalOfLastRecord": iso(batch[-1]),
            "batchSize": len(batch),
            "streamArn": self.mapping.stream_arn,
        }
        with self.lock:
            self.stats.discarded.append(
                {**info, "children": [_child_index(r["Data"]) for r in batch], "attempts": attempts})
        if self.failure_queue_url is None:
            return  # no destination: the records are just skipped
        message = {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": f"arn:aws:lambda:{self.engine.region}:{LOCAL_ACCOUNT}:function:{self.mapping.function_id}",
                "condition": "RetryAttemptsExhausted",
                "approximateInvokeCount": attempts,
            },
            "responseContext": {
                "statusCode": 200,
                "executedVersion": "$LATEST",
                "functionError": "Unhandled" if function_error else "",
            },
            "version": "1.0",
            "timestamp": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
            "KinesisBatchInfo": info,
        }
        with self.sqs_lock:
            self.engine.sqs.send_message(QueueUrl=self.failure_queue_url, MessageBody=json.dumps(message))


def _child_index(body: str | bytes) -> Any:
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

SOURCES = ("sqs", "kinesis")
DEFAULT_CONTENTION_WINDOW_MS = 3.0


def ledger_of(engine: Any) -> Any:
    """The ledger as the deployed consumers see it (table, counter layout from their environment)."""
    from fanout_common.ledger import Ledger

    stack = engine.stacks[WORKFLOW]
    shards = int(stack.environment.get("LEDGER_COUNTER_SHARDS", "1"))
    return Ledger(engine.dynamodb, stack.setting("LEDGER_TABLE_NAME"), counter_shards=shards)


def run_ledger_demo(
    app: Any,
    *,
    children: int,
    fail: list[int],
    concurrency: int,
    duplicate: bool,
    source: str = "sqs",
    console: Console | None = None,
    batch_id: str | None = None,
    visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    contention_window_ms: float = DEFAULT_CONTENTION_WINDOW_MS,
    on_engine: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Run one demo batch through the ledger's SQS (or Kinesis) path on moto; print and return
    the outcome. ``contention_window_ms`` > 0 turns the DynamoDB contention model on (each
    transaction holds its items that long; fanout/local/dynamodb_contention.py), 0 turns it off.

    ``on_engine(engine)`` is called after the run, before the engine is closed (tests read the
    emulated tables and queues there)."""
    from fanout.local.dynamodb_contention import ContentionModel
    from fanout.local.engine import LocalEngine

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
    console = console or Console()
    batch_id = batch_id or f"ledger-demo-{uuid.uuid4().hex[:8]}"
    contention = ContentionModel(window_seconds=contention_window_ms / 1000) if contention_window_ms else None
    started = time.monotonic()
    with LocalEngine(app, workflows=(WORKFLOW,), sleep_retries=False, dynamodb_contention=contention) as engine:
        wiring = ledger_wiring(engine)
        notes = apply_queue_attributes(engine, visibility_timeout)
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
            timed_out = _drive(console, engine, batch_id, children, run.sources, stop, timeout_seconds)
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
        if on_engine:
            on_engine(engine)
    facts["wall_seconds"] = round(time.monotonic() - started, 2)
    print_outcome(console, facts)
    return facts


def _messages(batch_id: str, children: int, fail: list[int], duplicate: bool) -> list[dict[str, Any]]:
    """The demo batch's child messages; with ``duplicate`` every child twice (at-least-once
    delivery, or a producer's retry)."""
    from fanout_common.ledger_producer import demo_messages

    messages = demo_messages(batch_id, children, fail=fail)
    return messages + messages if duplicate else messages


class _SqsRun:
    """The SQS path: ChildQueue -> consumer (pollers), ChildDeadLetterQueue -> DLQ recorder."""

    def __init__(self, engine: Any, wiring: LedgerWiring, concurrency: int, lock: threading.Lock,
                 stop: threading.Event) -> None:
        self.engine, self.wiring, self.concurrency = engine, wiring, concurrency
        self.source = SqsEventSource(engine, wiring.source, pollers=concurrency, sqs_lock=lock, stop=stop)
        self.dlq = SqsEventSource(engine, wiring.dlq, pollers=_dlq_pollers(wiring.dlq), sqs_lock=lock, stop=stop,
                                  keeps_rejected=True)
        self.sources = [self.source, self.dlq]  # upstream first (see _drained)

    def note(self) -> str:
        w = self.wiring
        return ("event source mappings: local pollers stand in for Lambda's (moto does not run them in-process): "
                f"{w.source.queue_id} -> {w.source.function_id} ({self.concurrency} poller(s), "
                f"BatchSize {w.source.batch_size}, template MaximumConcurrency {w.source.max_concurrency}); "
                f"{w.dlq.queue_id} -> {w.dlq.function_id} ({_dlq_pollers(w.dlq)} poller(s), BatchSize {w.dlq.batch_size})")

    def send(self, batch_id: str, children: int, fail: list[int], duplicate: bool) -> int:
        from fanout_common.ledger_producer import send_to_sqs

        return send_to_sqs(self.engine.sqs, self.wiring.source.queue_url, _messages(batch_id, children, fail, duplicate))

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
            "source_messages_left": _queue_depth(self.engine.sqs, w.source.queue_url),
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
        self.stream = KinesisEventSource(engine, wiring.kinesis, failure_queue_url=failures.queue_url,
                                         sqs_lock=lock, stop=stop)
        self.failures = SqsEventSource(engine, failures, pollers=_dlq_pollers(failures), sqs_lock=lock, stop=stop,
                                       keeps_rejected=True)
        self.sources = [self.stream, self.failures]  # upstream first (see _drained)

    def note(self) -> str:
        k, f = self.wiring.kinesis, self.wiring.kinesis_failures
        return ("event source mappings: local pollers stand in for Lambda's (moto does not run them in-process): "
                f"{k.stream_id} -> {k.function_id} (one poller per shard: {len(self.stream.shards)}, BatchSize "
                f"{k.batch_size}, BisectBatchOnFunctionError {k.bisect_on_error}, MaximumRetryAttempts "
                f"{k.max_retry_attempts}, on failure -> {k.on_failure_queue_id}); "
                f"{f.queue_id} -> {f.function_id} ({_dlq_pollers(f)} poller(s), BatchSize {f.batch_size})")

    def send(self, batch_id: str, children: int, fail: list[int], duplicate: bool) -> int:
        from fanout_common.ledger_producer import send_to_kinesis

        messages = _messages(batch_id, children, fail, duplicate)
        return send_to_kinesis(self.engine.client("kinesis"), self.wiring.kinesis.stream_arn, messages)

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
            "discarded_ranges": stats.discarded,
            "dead_lettered": sorted({c for r in stats.discarded for c in r["children"]}, key=str),
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
    console: Console,
    engine: Any,
    batch_id: str,
    children: int,
    sources: Sequence[EventSourcePollers],
    stop: threading.Event,
    timeout_seconds: float,
) -> bool:
    """Run the event sources until all are idle (or the timeout); a progress bar shows the
    ledger's counts meanwhile. Returns True on timeout."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("done, failed {task.fields[failed]}, status {task.fields[status]}"),
               TimeElapsedColumn())
    deadline = time.monotonic() + timeout_seconds
    timed_out = False
    ledger = ledger_of(engine)
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task(f"batch {batch_id}", total=children, failed=0, status="-")

        def refresh() -> None:
            counts = ledger.read_batch(batch_id) or {}
            progress.update(bar, completed=counts.get("done", 0), failed=counts.get("failed", 0),
                            status=counts.get("status", "-"))

        for event_source in sources:
            event_source.start()
        try:
            while not stop.is_set():
                refresh()
                if _drained(sources):
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


def _drained(sources: Sequence[EventSourcePollers]) -> bool:
    """Every source idle, checked upstream first: once a source is idle it stays idle (nothing
    upstream can feed it any more), so checking them in order is enough. Messages a recorder keeps
    rejecting (not child messages) do not hold the run: they are reported as left in its queue."""
    return all(event_source.idle() for event_source in sources)


def print_outcome(console: Console, facts: Mapping[str, Any]) -> None:
    ledger = facts["ledger"]
    status = facts["ledger_status"]
    color = "green" if status == "COMPLETED" else "red"
    kinesis = facts["source"] == "kinesis"
    console.print(
        f"\nledger batch {facts['batch_id']} ({facts['source']}, counter shards {facts['counter_shards']}): "
        f"[bold {color}]{status}[/]  "
        + ", ".join(f"{k}={ledger.get(k)}" for k in ("total", "succeeded", "failed", "done"))
        + (f"  (decided by {facts['finished_by']})" if facts.get("finished_by") else "")
    )
    copies = " (every message sent twice)" if facts["duplicate"] else ""
    recorder = "on-failure recorder" if kinesis else "DLQ recorder"
    what = "record(s)" if kinesis else "message(s)"
    console.print(f"sent {facts['sent']} {what}{copies}; consumer invocations: "
                  f"{facts['consumer_invocations']}, {recorder} invocations: {facts['recorder_invocations']}")
    if kinesis:
        console.print(f"kinesis: {facts['shards']} shard(s), BatchSize {facts['batch_size']}; partial batch "
                      f"responses {facts['partial_failures']}, retries {facts['retries']}, bisections "
                      f"{facts['bisections']}, function errors {facts['function_errors']}; ranges sent to the "
                      f"on-failure queue: {len(facts['discarded_ranges'])}")
        for r in facts["discarded_ranges"]:
            console.print(f"  - {r['shardId']} {r['startSequenceNumber']}..{r['endSequenceNumber']} "
                          f"({r['batchSize']} record(s), after {r['attempts']} attempts)")
    ran = facts["update_final_status_invocations"]
    console.print(f"UpdateFinalStatus: {'ran' if ran else 'never invoked'} ({ran} invocation(s))")
    record = facts["status_record"]
    if record:
        console.print(f"final status record: {json.dumps(record, sort_keys=True)}")
    else:
        console.print("final status record: none written (the batch was not decided)")
    for index in facts["fail"]:
        delivered = facts["deliveries"].get(index, 0)
        if kinesis:
            console.print(f"child {index}: delivered {delivered} time(s) (MaximumRetryAttempts "
                          f"{facts['max_retry_attempts']}), in a range sent to the on-failure queue: "
                          f"{index in facts['dead_lettered']}")
        else:
            console.print(
                f"child {index}: delivered {delivered} time(s) (highest ApproximateReceiveCount "
                f"{facts['receive_counts'].get(index, 0)}, maxReceiveCount {facts['max_receive_count']}), "
                f"dead-lettered: {index in facts['dead_lettered']}"
            )
    repeated = sorted(i for i, n in facts["deliveries"].items() if n > 1 and i not in facts["fail"])
    if repeated:
        console.print(f"children delivered more than once (counted once): {len(repeated)}")
    if facts.get("contention") is not None:
        c = facts["contention"]
        console.print(f"DynamoDB contention model ({facts['contention_window_ms']:g} ms in flight): "
                      f"{c.get('transactions', 0)} transaction(s) committed, {c.get('transaction_conflicts', 0)} "
                      f"cancelled with TransactionConflict, {c.get('write_conflicts', 0)} plain write(s) refused"
                      + (f"; messages returned to the queue after the ledger's retries: {facts['returned_to_queue']}"
                         if not kinesis else ""))
    left = facts["failure_queue_messages_left"] if kinesis else facts["dlq_messages_left"]
    queue = "on-failure queue" if kinesis else "dead-letter queue"
    tail = "" if kinesis else f"; source queue: {facts['source_messages_left']} message(s) left"
    console.print(f"{queue}: {len(left)} message(s) left{tail}")
    for message in left[:10]:
        console.print(f"  - {json.dumps(message)[:200]}")
    if facts["timed_out"]:
        console.print("[bold red]timed out before the queues were drained[/]")
    for note in facts["notes"] + facts["extra_notes"]:
        console.print(f"[dim]local adaptation: {note}[/]")
    console.print(f"wall time: {facts['wall_seconds']:.2f}s (deploy + run, synth excluded)")
    console.print(f"exit code {exit_code(facts)}: {EXIT_CODES[exit_code(facts)]}")


EXIT_CODES = {
    0: "the batch COMPLETED and its SUCCEEDED status record is written",
    1: "the batch FAILED (a child failed beyond the threshold, e.g. --fail), or was not decided in time",
    2: "usage error (bad option value)",
}


def exit_code(facts: Mapping[str, Any]) -> int:
    record = facts.get("status_record") or {}
    return 0 if facts["ledger_status"] == "COMPLETED" and record.get("status") == "SUCCEEDED" else 1


# --------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.description = (
        "Run one completion-ledger batch locally: the synthesized ledger stack on moto, the real "
        "consumer/recorder/UpdateFinalStatus handlers in-process, local pollers standing in for "
        "Lambda's event source mappings, DynamoDB contention modelled. Prints the ledger counts, "
        "what the event sources did and the batch's final status record."
    )
    parser.epilog = "exit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--source", choices=SOURCES, default="sqs",
                        help="sqs (default): ChildQueue + its DLQ; kinesis: ChildStream + its on-failure queue")
    parser.add_argument("--children", type=int, default=25, help="child messages in the batch (default 25)")
    parser.add_argument("--fail", default="", metavar="I,J",
                        help="comma-separated child indexes that fail permanently (sqs: dead-lettered; "
                        "kinesis: retries exhausted, range sent to the on-failure queue)")
    parser.add_argument("--concurrency", type=int, default=10,
                        help="sqs: consumer pollers (default 10); kinesis: one poller per shard, as Lambda")
    parser.add_argument("--duplicate", action="store_true", help="send every message (record) twice")
    parser.add_argument("--env", default="dev", help="environment from cdk.json (default: dev)")
    parser.add_argument("--batch-id", help="batch id (default: generated)")
    parser.add_argument("--visibility-timeout", type=int, default=DEFAULT_VISIBILITY_TIMEOUT,
                        help=f"seconds, for a fast local redelivery (default {DEFAULT_VISIBILITY_TIMEOUT})")
    parser.add_argument("--contention-window", type=float, default=DEFAULT_CONTENTION_WINDOW_MS, metavar="MS",
                        help="DynamoDB contention model: how long a transaction holds its items "
                        f"(default {DEFAULT_CONTENTION_WINDOW_MS:g} ms; 0 turns the model off)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS,
                        help="give up after this many seconds")
    return parser


def run_from_args(args: argparse.Namespace, console: Console | None = None) -> int:
    """Synthesize, run, print; the exit code says how the batch ended (EXIT_CODES)."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    logging.getLogger("aws_lambda_powertools").setLevel(logging.WARNING)
    _quiet_preconfigured_handler_loggers()
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
            source=getattr(args, "source", "sqs"),
            children=args.children,
            fail=fail,
            concurrency=args.concurrency,
            duplicate=args.duplicate,
            console=console,
            batch_id=args.batch_id,
            visibility_timeout=args.visibility_timeout,
            timeout_seconds=args.timeout,
            contention_window_ms=getattr(args, "contention_window", DEFAULT_CONTENTION_WINDOW_MS),
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return exit_code(facts)


def _quiet_preconfigured_handler_loggers() -> None:
    """A Powertools Logger takes its level when its service's logger is first configured: the
    ``fanout`` CLI imports handler code (fanout_common.worker) before QUIET_ENV is set, so those
    loggers keep INFO and every child would print a JSON line. Apply QUIET_ENV's level to them."""
    from aws_lambda_powertools.logging.constants import LOGGER_ATTRIBUTE_PRECONFIGURED

    level = os.environ.get("POWERTOOLS_LOG_LEVEL", QUIET_ENV["POWERTOOLS_LOG_LEVEL"])
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger) and getattr(logger, LOGGER_ATTRIBUTE_PRECONFIGURED, False):
            logger.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(
        prog="python -m fanout.ledger_demo", description=__doc__.splitlines()[0]
    ))
    try:
        return run_from_args(parser.parse_args(argv))
    except CliError as exc:  # (the fanout command prints these the same way)
        print(f"fanout ledger: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from stacks.runtime_node import use_venv_node

    use_venv_node()
    raise SystemExit(main())

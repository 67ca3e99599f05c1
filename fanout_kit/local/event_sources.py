"""Lambda's event source mappings, emulated for the local engine: moto does not run them in-process.

What the emulation adapts, all here and all visible (the ledger demo lists it in its outcome):

* The engine creates each queue with its name only. The queue attributes the mappings depend on
  are applied from the synthesized template (``apply_queue_attributes``): each queue's
  ``RedrivePolicy`` (``deadLetterTargetArn`` + ``maxReceiveCount``), and a short
  ``VisibilityTimeout`` (the caller's, instead of the template's minutes) so that a message whose
  processing failed is redelivered quickly.
* ``SqsEventSource`` and ``KinesisEventSource`` stand in for the mappings: pollers that read the
  queue (the shard), invoke the function through the engine's Lambda router with the event Lambda
  builds, and apply Lambda's documented answer handling (partial batch responses, bisect on error,
  retry quota, on-failure destination).
* moto's SQS backend is not thread-safe (ReceiveMessage checks visibility, then marks the message
  received, and moves messages to the DLQ, without a lock); the pollers' SQS calls take one lock,
  which is what SQS guarantees (a visible message goes to one receiver). Handler invocations run
  concurrently, outside that lock.
* The consumers keep a module-level Powertools ``BatchProcessor``: per execution environment in
  Lambda, but shared by every thread in-process (its records and results would mix). While the
  pollers run, each thread gets its own processor (``per_thread_processors``): N threads are N
  execution environments.

Each source counts its deliveries by a record key (``key``: the body of an SQS message, the data of
a Kinesis record -> any value; the ledger demo's child index); without one, every delivery counts
under ``None``.
"""

from __future__ import annotations

import base64
import json
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

from fanout_kit.local.template import LOCAL_ACCOUNT, local_names, make_resolver, resources_of_type
from fanout_kit.ops.dlq import queue_counts

POLL_INTERVAL_SECONDS = 0.02  # an empty receive waits this long before the next one
RecordKey = Callable[[Any], Any]  # an SQS body (str) or Kinesis data (bytes) -> what to count it under


def no_key(_body: Any) -> None:
    return None


# --------------------------------------------------------------------------- the template's mappings


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


def apply_queue_attributes(engine: Any, workflow: str, visibility_timeout: int) -> list[str]:
    """Give the engine's queues of ``workflow`` (created by name only) the template's RedrivePolicy
    and a short VisibilityTimeout. Returns one note per queue, for the outcome."""
    template = engine.app.template(workflow)
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
        engine.sqs.set_queue_attributes(QueueUrl=engine.stacks[workflow].queues[lid], Attributes=attributes)
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
    """The module of a function's handler: the one the router imports it from."""
    router = engine.router
    return sys.modules[router._handler(router.functions[function_id]).__module__]



# --------------------------------------------------------------------------- the stand-ins


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
    deliveries: Counter = field(default_factory=Counter)  # record key -> deliveries to the function
    receive_counts: dict = field(default_factory=dict)  # record key -> highest ApproximateReceiveCount
    rejected: set = field(default_factory=set)  # messageIds currently failing (for the stop rule)
    delete_failures: int = 0
    slowest_batch_seconds: float = 0.0  # receive -> settled; above the visibility timeout the
    # batch's messages could reappear while still in flight (harmless: counted once, but noted)


class EventSourcePollers:
    """What every local event source mapping stand-in shares: one thread per ``target`` (an SQS
    poller, a Kinesis shard) looping ``_poll_once(target)`` until ``stop``; an exception in the
    stand-in itself (a bug, not a function error) is kept in ``errors`` and stops the run."""

    name = "esm"

    def __init__(self, targets: Sequence[Any], stop: threading.Event, key: RecordKey = no_key) -> None:
        self.stop = stop
        self.key = key  # what a delivery is counted under (stats.deliveries)
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
        key: RecordKey = no_key,
    ) -> None:
        self.name = f"esm-{mapping.queue_id}"
        super().__init__(range(pollers), stop, key)
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
            depth = sum(queue_counts(self.engine.sqs, self.mapping.queue_url).values())
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
            self._metered("ReceiveMessage")
        began = time.monotonic()
        try:
            self._deliver(messages)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.stats.slowest_batch_seconds = max(self.stats.slowest_batch_seconds, time.monotonic() - began)
        return True

    def _metered(self, operation: str) -> None:
        """An SQS call the event source mapping makes for the account (billed in AWS), for the
        measured cost (``fanout_kit.local.metering``); empty receives are not counted."""
        recorder = getattr(self.engine, "usage_recorder", None)
        if recorder is not None:
            recorder.add_call("sqs", operation, {})

    def _deliver(self, messages: list[dict[str, Any]]) -> None:
        m = self.mapping
        records = [lambda_sqs_record(msg, m.queue_arn, self.engine.region) for msg in messages]
        for record in records:
            index = self.key(record["body"])
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
                self._metered("DeleteMessageBatch")
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
    deliveries: Counter = field(default_factory=Counter)  # record key -> deliveries to the function
    # ranges sent to the on-failure destination: KinesisBatchInfo + "keys" (of its records) + "attempts"
    discarded: list = field(default_factory=list)
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
        key: RecordKey = no_key,
    ) -> None:
        self.name = f"esm-{mapping.stream_id}"
        self.engine = engine
        self.mapping = mapping
        self.kinesis = engine.client("kinesis")
        shards = [s["ShardId"] for s in self.kinesis.describe_stream(
            StreamARN=mapping.stream_arn)["StreamDescription"]["Shards"]]
        super().__init__(shards, stop, key)
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
                self.stats.deliveries[self.key(record["Data"])] += 1
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
                {**info, "keys": [self.key(r["Data"]) for r in batch], "attempts": attempts})
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


def drained(sources: Sequence[EventSourcePollers]) -> bool:
    """Every source idle, checked upstream first: once a source is idle it stays idle (nothing
    upstream can feed it any more), so checking them in order is enough. Messages a recorder keeps
    rejecting do not hold the run: they are left in its queue."""
    return all(event_source.idle() for event_source in sources)

"""The measured cost of a local run: what the run used, counted by the engine, priced with the same
code and prices as ``fanout estimate`` (``fanout_kit.local.cost_estimate``, ``fanout_kit.shared.cost``, ``fanout_kit.shared.pricing``).

What is counted, and from where:

* Step Functions Standard state transitions: each Standard execution's history (every state
  entered, plus every retry: ``fanout_kit.local.history.state_transitions``), plus one per Distributed
  Map child execution started ("charged one state transition for each child workflow execution",
  Step Functions developer guide, concepts-transitions);
* Express children: one request each, and their duration as the engine's Express clock counts it
  (wall time plus the retry waits and hangs it simulated), rounded up to 100 ms, at 64 MB;
* Lambda: every invocation the router served, its measured duration (rounded up to 1 ms) times
  the function's memory, by architecture; a function that hung is billed its timeout;
* DynamoDB, SQS, S3: every API call a handler or a state machine made (attributed as the IAM
  recorder does, ``fanout_kit.local.iam``), in request units: a strongly consistent read of an item
  up to 4 KB 1 unit (eventually consistent 0.5), a write of up to 1 KB 1 unit, transactional
  reads and writes twice that; an SQS request per 64 KB of payload; S3 PUT/LIST and GET classes.
  Plus the calls made on Lambda's behalf by the SQS event source (its ReceiveMessage and
  DeleteMessageBatch, billed to the account in AWS) and the producer's SendMessage(Batch);
* EventBridge: one status-change event per execution end (AWS service events: free);
* logs and traces: the state machine's history events (Level ALL) and Lambda invocations at the
  sizes ``fanout_kit.shared.cost.Assumptions`` assumes, X-Ray at its sampling rate: sizes are not measured.

What the local run does NOT show: real AWS latencies (handlers run in-process, in microseconds
where AWS adds network round trips and cold starts), and the empty receives of idle pollers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fanout_kit.shared.cost import (
    EXPRESS_DURATION_STEP_S,
    EXPRESS_MEMORY_CHUNK_GB,
    LAMBDA_DURATION_STEP_S,
    Assumptions,
    Usage,
    price_lines,
    total_usd,
)
from fanout_kit.local.cost_estimate import functions_of
from fanout_kit.local.iam import _INTERPRETER_CLIENTS, CallRecorder

SQS_CHUNK_BYTES = 64 * 1024


def _item_bytes(item: Mapping[str, Any]) -> int:
    """DynamoDB's item size, roughly: attribute names plus their values' text."""
    return sum(len(str(k)) + len(str(v)) for k, v in item.items())


def _write_units(item: Mapping[str, Any] | None) -> float:
    return float(max(1, math.ceil(_item_bytes(item) / 1024))) if item else 1.0


def _read_units(consistent: bool) -> float:
    return 1.0 if consistent else 0.5  # an item up to 4 KB


def _sqs_requests(params: Mapping[str, Any]) -> float:
    bodies = [params.get("MessageBody") or ""] + [e.get("MessageBody") or "" for e in params.get("Entries") or []]
    size = sum(len(str(b).encode()) for b in bodies)
    return float(max(1, math.ceil(size / SQS_CHUNK_BYTES)))


S3_PUT_CLASS = {"PutObject", "CopyObject", "PostObject", "ListObjects", "ListObjectsV2",
                "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "ListMultipartUploads"}
S3_GET_CLASS = {"GetObject", "HeadObject", "SelectObjectContent"}


def request_usage(service: str, operation: str, params: Mapping[str, Any]) -> Usage:
    """The billable request units of one API call (DynamoDB, SQS, S3; others: none)."""
    u = Usage()
    if service == "dynamodb":
        if operation == "GetItem":
            u.dynamodb_read_units = _read_units(bool(params.get("ConsistentRead")))
        elif operation in ("Query", "Scan"):
            u.dynamodb_read_units = _read_units(bool(params.get("ConsistentRead")))  # per 4 KB page: one
        elif operation == "BatchGetItem":
            u.dynamodb_read_units = sum(
                len(spec.get("Keys", [])) * _read_units(bool(spec.get("ConsistentRead")))
                for spec in (params.get("RequestItems") or {}).values()
            )
        elif operation == "TransactGetItems":
            u.dynamodb_read_units = 2.0 * len(params.get("TransactItems") or [])
        elif operation in ("PutItem", "UpdateItem", "DeleteItem"):
            u.dynamodb_write_units = _write_units(params.get("Item"))
        elif operation == "BatchWriteItem":
            u.dynamodb_write_units = sum(
                _write_units((r.get("PutRequest") or {}).get("Item"))
                for requests in (params.get("RequestItems") or {}).values() for r in requests
            )
        elif operation == "TransactWriteItems":
            u.dynamodb_write_units = sum(
                2.0 * _write_units((entry.get("Put") or {}).get("Item"))
                for entry in params.get("TransactItems") or []
            )
    elif service == "sqs":
        if operation in ("SendMessage", "SendMessageBatch"):
            u.sqs_requests = _sqs_requests(params)
        elif operation in ("ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility",
                           "ChangeMessageVisibilityBatch"):
            u.sqs_requests = 1.0
    elif service == "s3":
        if operation in S3_PUT_CLASS:
            u.s3_put_requests = 1.0
        elif operation in S3_GET_CLASS:
            u.s3_get_requests = 1.0
    return u


class UsageRecorder(CallRecorder):
    """Counts the billable requests of the calls handlers and state machines make, those the
    event source pollers make for Lambda, and the producer's sends (the harness's other calls:
    not counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.usage = Usage()
        self.operations: Counter = Counter()  # (service, operation) -> calls counted

    def record(self, client: Any, operation: str, params: Mapping[str, Any]) -> None:
        from fanout_kit.local.moto_lambda import current_function

        service = client.meta.service_model.service_name
        attributed = (
            current_function() is not None
            or client in _INTERPRETER_CLIENTS
            or (service == "sqs" and operation in ("SendMessage", "SendMessageBatch"))  # the producer
        )
        if attributed:
            self.add_call(service, operation, params)

    def add_call(self, service: str, operation: str, params: Mapping[str, Any]) -> None:
        """Count one call (also for the event source pollers: their non-empty ReceiveMessage and
        their DeleteMessageBatch, which Lambda makes for the account)."""
        usage = request_usage(service, operation, params)
        with self._lock:
            self.operations[(service, operation)] += 1
            self.usage = self.usage + usage


@dataclass
class ChildRun:
    arn: str
    status: str
    items: int
    express: bool
    seconds: float  # Express: what the engine's clock counted; else the wall time


@dataclass
class Measurement:
    usage: Usage
    counts: dict[str, float] = field(default_factory=dict)  # what was counted, for the report

    @property
    def total_usd(self) -> float:
        return total_usd(self.usage)

    def line(self) -> str:
        """The one line a local run prints."""
        parts = [f"{self.counts.get('transitions', 0):g} transitions"]
        if self.counts.get("express_children"):
            parts.append(f"{self.counts['express_children']:g} Express children")
        parts.append(f"{self.counts.get('invocations', 0):g} Lambda invocations "
                     f"({self.usage.lambda_gb_seconds_x86_64 + self.usage.lambda_gb_seconds_arm64:.3f} GB-s)")
        if self.usage.dynamodb_read_units or self.usage.dynamodb_write_units:
            parts.append(f"DynamoDB {self.usage.dynamodb_read_units:g} RRU / {self.usage.dynamodb_write_units:g} WRU")
        if self.usage.sqs_requests:
            parts.append(f"{self.usage.sqs_requests:g} SQS requests")
        if self.usage.s3_put_requests or self.usage.s3_get_requests:
            parts.append(f"S3 {self.usage.s3_put_requests:g} PUT / {self.usage.s3_get_requests:g} GET")
        return f"measured cost: ${self.total_usd:.6f} at list prices ({', '.join(parts)})"

    def to_json(self) -> dict[str, Any]:
        return {
            "components": {line.component: {"label": line.label, "quantity": line.quantity,
                                            "unitUsd": line.unit_usd, "usd": round(line.usd, 8)}
                           for line in price_lines(self.usage)},
            "total_usd": round(self.total_usd, 8),
            "counts": self.counts,
        }


def measure(engine: Any, executions: Iterable[Any], a: Assumptions | None = None) -> Measurement:
    """Price what ``engine`` counted for the finished ``executions`` (``ExecutionResult``s of
    Standard state machines) and everything the engine ran since it started."""
    from fanout_kit.local.history import state_transitions

    a = a or Assumptions()
    usage = Usage()
    executions = list(executions)
    events = 0
    for result in executions:
        usage.transitions += state_transitions(result.history)
        events += len(result.history)
    children = list(engine.metered_children)
    usage.transitions += len(children)  # one per child execution started
    express = [c for c in children if c.express]
    usage.express_requests += len(express)
    usage.express_gb_seconds += sum(
        math.ceil(round(c.seconds / EXPRESS_DURATION_STEP_S, 6)) * EXPRESS_DURATION_STEP_S * EXPRESS_MEMORY_CHUNK_GB
        for c in express
    )
    functions: dict[str, Any] = {}
    for workflow in engine.workflows:
        functions.update(functions_of(engine.app.template(workflow)))
    invocations = list(engine.router.invocations)
    for record in invocations:
        fn = functions.get(record.function)
        memory_gb = (fn.memory_mb if fn else engine.router.functions[record.function].memory_mb) / 1024
        billed = math.ceil(round(record.seconds / LAMBDA_DURATION_STEP_S, 6)) * LAMBDA_DURATION_STEP_S
        usage.add_lambda(fn.architecture if fn else "x86_64", max(billed, LAMBDA_DURATION_STEP_S) * memory_gb)
    recorder = engine.usage_recorder
    if recorder is not None:
        usage = usage + recorder.usage
    usage.eventbridge_service_events += len(executions)  # one status-change event per execution end
    logged = any(_level_all(engine.app.template(w)) for w in engine.workflows if w != "ledger")
    usage.log_bytes += len(invocations) * a.log_bytes_per_invocation
    if logged:
        # the children's events are not in the parent's history: a child logs at least its start,
        # its task's five events and its end
        usage.log_bytes += (events + 7 * len(children)) * a.log_bytes_per_event
        usage.xray_traces += (len(executions) + len(express)) * a.xray_sampled
    counts = {
        "transitions": usage.transitions,
        "executions": len(executions),
        "children": len(children),
        "express_children": len(express),
        "express_seconds": round(sum(c.seconds for c in express), 3),
        "invocations": len(invocations),
        "lambda_seconds": round(sum(r.seconds for r in invocations), 3),
        "aws_calls": {f"{s}:{o}": n for (s, o), n in sorted(recorder.operations.items())} if recorder else {},
    }
    return Measurement(usage, counts)


def _level_all(template: Mapping[str, Any]) -> bool:
    for res in template.get("Resources", {}).values():
        if res.get("Type") == "AWS::StepFunctions::StateMachine":
            return ((res.get("Properties") or {}).get("LoggingConfiguration") or {}).get("Level") == "ALL"
    return False

"""What a batch costs: the usage a batch needs (state transitions, Express requests and duration,
Lambda invocations and GB-seconds, DynamoDB request units, SQS and S3 requests, logs, traces) and
its price at the list prices of ``fanout_kit.shared.pricing``.

Two sources of usage, priced by the same ``price_lines``:

* the estimate (``fanout_kit.local.cost_estimate.estimate``): read from the synthesized template of the workflow (the ASL's
  states on the success path, the Distributed Map's ItemBatcher and child execution type, each
  Task's Retry policy, each function's memory and architecture, the ledger's event source batch
  size and counter shards), plus the assumptions a template cannot know (``Assumptions``: the work
  seconds per item, the failure rate, per-invocation overheads, log sizes), each printed with it;
* the measurement (``fanout_kit.local.metering``): what a local run used, counted by the engine.

The success path of a state machine (``success_path``) is the kit's convention
(``fanout_kit.shared.asl_graph.happy_path``): from StartAt, follow ``Next``; at a Choice take its first
rule (the kit's Choices list the happy case first, the default is the exception); Catch targets
and Fail states are off the path. A test checks the
estimated transitions against the ones a local run's history shows, so a workflow change that
breaks the convention fails the suite rather than skewing the estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from fanout_kit.shared import pricing

EXPRESS_MEMORY_CHUNK_GB = 64 / 1024  # "billed in 64-MB chunks" (Step Functions pricing page)
EXPRESS_DURATION_STEP_S = 0.1  # "rounded up to the nearest 100ms"
LAMBDA_DURATION_STEP_S = 0.001  # Lambda bills duration in 1 ms increments
SQS_BATCH_MAX = 10  # SendMessageBatch / DeleteMessageBatch: at most 10 entries per request
GB = 1024**3


@dataclass
class Usage:
    """Billable quantities (floats: an estimate may expect fractions)."""

    transitions: float = 0.0
    express_requests: float = 0.0
    express_gb_seconds: float = 0.0
    lambda_requests: float = 0.0
    lambda_gb_seconds_x86_64: float = 0.0
    lambda_gb_seconds_arm64: float = 0.0
    dynamodb_read_units: float = 0.0
    dynamodb_write_units: float = 0.0
    sqs_requests: float = 0.0
    s3_put_requests: float = 0.0
    s3_get_requests: float = 0.0
    eventbridge_service_events: float = 0.0
    log_bytes: float = 0.0
    xray_traces: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __mul__(self, k: float) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) * k for f in fields(self)})

    __rmul__ = __mul__

    def add_lambda(self, architecture: str, gb_seconds: float, requests: float = 1.0) -> None:
        self.lambda_requests += requests
        if architecture == "arm64":
            self.lambda_gb_seconds_arm64 += gb_seconds
        else:
            self.lambda_gb_seconds_x86_64 += gb_seconds


# (Usage field, pricing key, what the line says, unit factor: quantity * factor = priced units)
COMPONENTS: tuple[tuple[str, str, str, float], ...] = (
    ("transitions", "sfn_standard_transition", "Step Functions Standard state transitions", 1.0),
    ("express_requests", "sfn_express_request", "Step Functions Express requests", 1.0),
    ("express_gb_seconds", "sfn_express_gb_second", "Step Functions Express duration (GB-s)", 1.0),
    ("lambda_requests", "lambda_request", "Lambda invocations", 1.0),
    ("lambda_gb_seconds_x86_64", "lambda_gb_second_x86_64", "Lambda duration x86_64 (GB-s)", 1.0),
    ("lambda_gb_seconds_arm64", "lambda_gb_second_arm64", "Lambda duration arm64 (GB-s)", 1.0),
    ("dynamodb_read_units", "dynamodb_read_request_unit", "DynamoDB read request units", 1.0),
    ("dynamodb_write_units", "dynamodb_write_request_unit", "DynamoDB write request units", 1.0),
    ("sqs_requests", "sqs_request", "SQS requests", 1.0),
    ("s3_put_requests", "s3_put_request", "S3 PUT/LIST requests", 1.0),
    ("s3_get_requests", "s3_get_request", "S3 GET requests", 1.0),
    ("eventbridge_service_events", "eventbridge_aws_service_event", "EventBridge service events", 1.0),
    ("log_bytes", "cloudwatch_logs_gb_ingested", "CloudWatch Logs ingested (bytes)", 1.0 / GB),
    ("xray_traces", "xray_trace_recorded", "X-Ray traces recorded", 1.0),
)


@dataclass(frozen=True)
class Line:
    component: str  # the Usage field
    label: str
    quantity: float
    unit_usd: float  # per quantity
    usd: float


def price_lines(usage: Usage) -> list[Line]:
    """One line per component the usage has (zero quantities left out)."""
    lines = []
    for name, key, label, factor in COMPONENTS:
        quantity = getattr(usage, name)
        if quantity:
            unit = pricing.price(key) * factor
            lines.append(Line(name, label, quantity, unit, quantity * unit))
    return lines


def total_usd(usage: Usage) -> float:
    return sum(line.usd for line in price_lines(usage))


# ------------------------------------------------------------------------------------ assumptions
@dataclass(frozen=True)
class Assumptions:
    """What a template cannot say; every one is printed with an estimate."""

    work_seconds: float = 0.1  # the worker's own time per item (or per Parallel task)
    failure_rate: float = 0.0  # fraction of items that fail on every attempt (poison items)
    invoke_overhead_seconds: float = 0.02  # per Lambda invocation (warm): runtime + SDK calls
    state_overhead_seconds: float = 0.02  # per state of an Express child (its own time)
    log_bytes_per_event: int = 400  # one state machine log event (Level ALL), without data
    log_bytes_per_invocation: int = 600  # Lambda START/END/REPORT and one Powertools line
    xray_sampled: float = 0.05  # X-Ray's default rule: 1 trace/s, then 5% of requests

    def lines(self) -> list[str]:
        return [
            f"work per item: {self.work_seconds:g} s (--work-seconds); each Lambda invocation adds "
            f"{self.invoke_overhead_seconds:g} s, each Express child state {self.state_overhead_seconds:g} s",
            f"failure rate: {self.failure_rate:g} of items fail on every attempt (--failure-rate); a "
            "batch with one such item fails as a whole, is retried by its Retry policy "
            "(RetryableTaskError; full jitter: half the backoff ceiling on average) and dead-lettered",
            f"logs: {self.log_bytes_per_event} bytes per state machine event (x2 with execution data), "
            f"{self.log_bytes_per_invocation} bytes per Lambda invocation; X-Ray records "
            f"{self.xray_sampled:.0%} of executions (the default sampling rule)",
            "prices: first tier, no free tier, no Savings Plans "
            f"({pricing.REGION}, checked {pricing.CHECKED}; sources in fanout_kit/shared/pricing.py)",
        ]

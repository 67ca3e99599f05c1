"""The constructs' props that are plain data: settings every kit resource shares, retry policies,
alarm thresholds, Distributed Map and ledger settings. Each has secure defaults and is checked
when created: a wrong value raises ``ConfigError`` naming the prop, its range and the value.

No aws_cdk import here: the app's cdk.json reader (fanout_kit.shared.app_config) builds these too, before any
construct exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from fanout_kit.shared.limits import MAX_COUNTER_SHARDS
from fanout_kit.shared.checks import ConfigError, whole_number
from fanout_kit.shared.retry_policy import RetrySettings

DEFAULT_POWERTOOLS_LAYER_VERSION = 27  # AWSLambdaPowertoolsPythonV3-python313-x86_64:27
# Step Functions delivers logs as a vended log source; AWS advises this prefix for its log groups.
VENDED_LOGS_PREFIX = "/aws/vendedlogs/states/"
TASK_NAME = re.compile(r"^[A-Z][A-Za-z0-9]{0,39}$")  # a task's name: part of state names, a key of the input
ENVIRONMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# CloudWatch Logs accepts only these retention periods (days -> CDK's logs.RetentionDays member).
LOG_RETENTION = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS",
    30: "ONE_MONTH", 60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS",
    150: "FIVE_MONTHS", 180: "SIX_MONTHS", 365: "ONE_YEAR", 400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1827: "FIVE_YEARS", 3653: "TEN_YEARS",
}
LOG_RETENTION_DAYS = tuple(LOG_RETENTION)


def check_type(prop: str, value: object, kind: type, none_means: str | None = None) -> None:
    """A prop of the wrong type is a ConfigError naming it (``none_means``: None is allowed, and
    what it means)."""
    if value is None and none_means is not None:
        return
    if not isinstance(value, kind):
        allowed = kind.__name__ + (f" or None ({none_means})" if none_means else "")
        raise ConfigError(f"{prop}: must be {allowed}, got {value!r}")


def _check_whole_numbers(obj: object, where: str, ranges: dict[str, tuple[int, int | None, str]]) -> None:
    for name, (low, high, meaning) in ranges.items():
        whole_number(getattr(obj, name), f"{where}.{name}", low, high, meaning)


@dataclass(frozen=True)
class ResourceSettings:
    """What every resource a kit construct creates shares."""

    environment_name: str = "default"  # in descriptions, FANOUT_ENV and the ledger metrics' dimension
    retain_data: bool = True  # RETAIN and deletion protection; False (dev): DESTROY, buckets emptied
    log_retention_days: int = 30  # every log group the construct creates
    powertools_layer_version: int = DEFAULT_POWERTOOLS_LAYER_VERSION
    function_timeout_seconds: int = 30  # the kit's own functions without a timeout of their own

    def __post_init__(self) -> None:
        if not isinstance(self.environment_name, str) or not ENVIRONMENT_NAME.match(self.environment_name):
            raise ConfigError(
                f"environment_name: must be 1-64 letters, digits, '-' or '_', got {self.environment_name!r}"
            )
        if not isinstance(self.retain_data, bool):
            raise ConfigError(f"retain_data: must be True or False, got {self.retain_data!r}")
        if self.log_retention_days not in LOG_RETENTION_DAYS:
            raise ConfigError(
                f"log_retention_days: {self.log_retention_days!r} is not a CloudWatch Logs retention; "
                f"use one of {list(LOG_RETENTION_DAYS)}"
            )
        _check_whole_numbers(
            self,
            "ResourceSettings",
            {
                "powertools_layer_version": (1, None, "version of the Powertools for AWS Lambda layer"),
                "function_timeout_seconds": (1, 900, "Lambda allows at most 900 s"),
            },
        )


@dataclass(frozen=True)
class WorkflowRetries:
    """The Retry rules of a workflow. ``transient`` (Lambda service errors), ``retryable`` (the
    task raised RetryableTaskError) and ``ambiguous`` (the task timed out, ran out of memory or
    crashed: Lambda.Unknown, Sandbox.Timedout, ...; it may have done its work, so by default it is
    not retried, and at most 3 times) are every task's defaults, overridden per task."""

    transient: RetrySettings = RetrySettings(2, 6, 2.0, 60)
    retryable: RetrySettings = RetrySettings(5, 4, 2.0, 120)
    dlq_send: RetrySettings = RetrySettings(1, 8, 2.0, 30)  # the DLQ send of an exhausted task
    status_write: RetrySettings = RetrySettings(1, 8, 2.0, 30)  # input check, status reads and writes
    ambiguous: RetrySettings = RetrySettings(2, 0, 2.0, 60)  # AMBIGUOUS_ERRORS: not retried by default

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            check_type(f"retries.{f.name}", value, RetrySettings)
            value._check(f"retries.{f.name}")
        self.ambiguous.check_ambiguous("retries.ambiguous")


# The Distributed Map's defaults: an EXPRESS child must fit AWS's 5 minutes with every retry
# exhausted (fanout_kit/patterns/distributed_map/express_budget.py), so it retries less than a Parallel task. With a
# worker timeout of 20 s (50 s per attempt with the task margin) the worst case is 244 s.
MAP_RETRIES = WorkflowRetries(
    transient=RetrySettings(2, 1, 2.0, 60),
    retryable=RetrySettings(5, 2, 2.0, 10),
    dlq_send=RetrySettings(1, 3, 2.0, 4),
)


@dataclass(frozen=True)
class AlarmThresholds:
    """Each alarm fires when its metric reaches the threshold within one period."""

    dlq_visible_messages: int = 1
    executions_failed: int = 1
    executions_timed_out: int = 1
    lambda_errors: int = 1
    lambda_throttles: int = 1
    period_minutes: int = 5

    def __post_init__(self) -> None:
        _check_whole_numbers(self, "alarms", {f.name: (1, None, "") for f in fields(self)})


@dataclass(frozen=True)
class MapSettings:
    """How a DistributedMapFanOut runs and checks its items."""

    max_concurrency: int = 100  # Distributed Map MaxConcurrency (children at once)
    items_per_batch: int = 20  # ItemBatcher MaxItemsPerBatch: items per child Lambda invoke
    child_execution_type: str = "EXPRESS"  # EXPRESS (cheap, at-least-once, 5 min) or STANDARD
    # One item, as JSON, at most this many bytes. A failed child holds items_per_batch of them and
    # the error within 256 KiB (checked at synth: fanout_kit/shared/payload_budget.py); 20 x 8192 is over.
    max_item_bytes: int = 6144
    max_inline_items: int = 1000  # more than this must come as an S3 manifest
    results_retention_days: int = 30  # lifecycle of manifests and ResultWriter output in S3
    failure_threshold: int = 0  # items that may fail (or time out, or abort) and still finalize
    # Reserved concurrency of the worker: set it on your own function; the kit checks it here
    # against max_concurrency when you pass it (None: unreserved).
    worker_reserved_concurrency: int | None = None

    RANGES = {  # a class constant (no annotation): not a field
        "max_concurrency": (1, 10_000, "Distributed Map MaxConcurrency"),
        "items_per_batch": (1, 100_000, "ItemBatcher MaxItemsPerBatch"),
        "max_item_bytes": (64, 256 * 1024, "Step Functions payloads are at most 256 KiB"),
        "max_inline_items": (1, 10_000, "items in the execution input"),
        "results_retention_days": (1, 3650, "days"),
        "failure_threshold": (0, 1_000_000_000, "unsuccessful items that still finalize"),
    }

    def __post_init__(self) -> None:
        _check_whole_numbers(self, "map", self.RANGES)
        if self.child_execution_type not in ("EXPRESS", "STANDARD"):
            raise ConfigError(f"map.child_execution_type: must be EXPRESS or STANDARD, got {self.child_execution_type!r}")
        reserved = self.worker_reserved_concurrency
        if reserved is not None:
            whole_number(reserved, "map.worker_reserved_concurrency", 1, None, "or unset: unreserved")
            if reserved < self.max_concurrency:
                raise ConfigError(
                    f"map.worker_reserved_concurrency: {reserved} is below max_concurrency "
                    f"{self.max_concurrency}: children would be throttled; raise it or lower max_concurrency"
                )


@dataclass(frozen=True)
class LedgerSettings:
    """How a CompletionLedger counts children and when it gives up on a batch."""

    consumer_max_concurrency: int = 10
    failure_threshold: int = 0
    ttl_days: int = 30
    deadline_minutes: int = 240
    max_receive_count: int = 5
    batch_size: int = 10
    kinesis_batch_size: int = 100
    kinesis_retry_attempts: int = 5
    kinesis_shard_count: int = 1
    sweep_interval_minutes: int = 5
    counter_shards: int = 1

    RANGES = {  # a class constant (no annotation): not a field
        "consumer_max_concurrency": (2, 1000, "SQS event source MaximumConcurrency"),
        "failure_threshold": (0, 1_000_000, "failed children a batch tolerates"),
        "ttl_days": (1, 3650, "days until DynamoDB TTL deletes ledger items"),
        "deadline_minutes": (0, 10_080, "0 disables; batches open longer fail"),
        # AWS Lambda Developer Guide, "Using Lambda with Amazon SQS" (with-sqs.html, configuring the
        # queue): set the source queue's maxReceiveCount to at least 5, so that a message is not
        # dead-lettered by throttling or transient errors before it could be processed.
        "max_receive_count": (5, 1000, "SQS redrive policy maxReceiveCount; AWS advises at least 5 for a Lambda event source"),
        "batch_size": (1, 10, "SQS event source batch size (no batching window)"),
        "kinesis_batch_size": (1, 10_000, "Kinesis event source batch size"),
        "kinesis_retry_attempts": (0, 10_000, "Kinesis event source retry attempts"),
        "kinesis_shard_count": (1, 100, "shards of the child stream"),
        "sweep_interval_minutes": (1, 1440, "deadline sweeper schedule"),
        "counter_shards": (
            1, MAX_COUNTER_SHARDS,
            "counter items per batch of the SQS/Kinesis consumers; 1 = one batch item; change only while no batch is open",
        ),
    }

    def __post_init__(self) -> None:
        _check_whole_numbers(self, "ledger", self.RANGES)

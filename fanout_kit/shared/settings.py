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

# Lambda keeps this many concurrent executions of an account unreserved: "You can reserve
# concurrency for as many functions as you like, as long as you leave at least 100 simultaneous
# executions unreserved" (PutFunctionConcurrency, AWS Lambda API Reference).
UNRESERVED_MINIMUM = 100
DEFAULT_POWERTOOLS_LAYER_VERSION = 27  # AWSLambdaPowertoolsPythonV3-python313-x86_64:27
# Step Functions delivers logs as a vended log source; AWS advises this prefix for its log groups.
VENDED_LOGS_PREFIX = "/aws/vendedlogs/states/"
TASK_NAME = re.compile(r"^[A-Z][A-Za-z0-9]{0,39}$")  # a task's name: part of state names, a key of the input
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")  # an alarm_email_addresses entry
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
    """What every resource a kit construct creates shares.

    Args:
        environment_name: The environment's name (1-64 letters, digits, ``-``, ``_``): in
            descriptions, ``FANOUT_ENV`` and the ledger metrics' dimension. Default ``"default"``.
        retain_data: ``True``: tables, buckets and log groups are RETAINed and deletion protected;
            ``False`` (dev): DESTROYed, buckets emptied. Default ``True``.
        log_retention_days: The retention of every log group the construct creates (a CloudWatch
            Logs retention: 1, 3, 5, 7, 14, 30, 60, 90, ... days). Default ``30``.
        powertools_layer_version: The version of the Powertools for AWS Lambda layer
            (AWSLambdaPowertoolsPythonV3-python313-x86_64) the kit's functions use. Default ``27``.
        function_timeout_seconds: The timeout of the kit's own functions that have none of their
            own (1 to 900). Default ``30``.
        account_concurrency_limit: The target account's Lambda concurrent executions quota in
            the Region (Service Quotas L-B99A9384; ``aws lambda get-account-settings``). When set,
            a reserved concurrency the construct knows of (``map.worker_reserved_concurrency``)
            must leave 100 of it unreserved, as Lambda requires (PutFunctionConcurrency), or the
            synth refuses it instead of the deploy failing. Default ``None``: not checked.
    """

    environment_name: str = "default"
    retain_data: bool = True
    log_retention_days: int = 30
    powertools_layer_version: int = DEFAULT_POWERTOOLS_LAYER_VERSION
    function_timeout_seconds: int = 30
    account_concurrency_limit: int | None = None

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
        if self.account_concurrency_limit is not None:
            whole_number(self.account_concurrency_limit, "ResourceSettings.account_concurrency_limit", 1, None,
                         "the account's Lambda concurrent executions quota, or None")

    def check_reserved_concurrency(self, reserved: int | None, prop: str) -> None:
        """A reserved concurrency Lambda would refuse in this account (it keeps at least 100
        concurrent executions unreserved: PutFunctionConcurrency, AWS Lambda API Reference) is a
        ConfigError naming ``prop``."""
        limit = self.account_concurrency_limit
        if reserved is not None and limit is not None and reserved > limit - UNRESERVED_MINIMUM:
            raise ConfigError(
                f"{prop}: {reserved} leaves fewer than {UNRESERVED_MINIMUM} of the account's {limit} concurrent "
                f"executions unreserved, which Lambda refuses at deploy: lower it to at most "
                f"{max(limit - UNRESERVED_MINIMUM, 0)} or raise the quota (settings.account_concurrency_limit)"
            )


@dataclass(frozen=True)
class WorkflowRetries:
    """The Retry rules of a workflow. ``transient``, ``retryable`` and ``ambiguous`` are every
    task's defaults, overridden per task (``FanOutTask``).

    Args:
        transient: Lambda service errors (``Lambda.ServiceException``, throttles, ...). Default
            ``RetrySettings(interval_seconds=2, max_attempts=6, backoff_rate=2.0, max_delay_seconds=60)``.
        retryable: The task raised ``RetryableTaskError`` (or a name in its ``retry_on``). Default
            ``RetrySettings(interval_seconds=5, max_attempts=4, backoff_rate=2.0, max_delay_seconds=120)``.
        dlq_send: The send of an exhausted task to the dead-letter queue. Default
            ``RetrySettings(interval_seconds=1, max_attempts=8, backoff_rate=2.0, max_delay_seconds=30)``.
        status_write: The input check and the status table's reads and writes. Default
            ``RetrySettings(interval_seconds=1, max_attempts=8, backoff_rate=2.0, max_delay_seconds=30)``.
        ambiguous: The task timed out, ran out of memory or crashed (``Lambda.Unknown``,
            ``Sandbox.Timedout``, ...): it may have done its work, so by default it is not retried,
            and at most 3 times. Default
            ``RetrySettings(interval_seconds=2, max_attempts=0, backoff_rate=2.0, max_delay_seconds=60)``.
    """

    transient: RetrySettings = RetrySettings(interval_seconds=2, max_attempts=6, backoff_rate=2.0, max_delay_seconds=60)
    retryable: RetrySettings = RetrySettings(interval_seconds=5, max_attempts=4, backoff_rate=2.0, max_delay_seconds=120)
    dlq_send: RetrySettings = RetrySettings(interval_seconds=1, max_attempts=8, backoff_rate=2.0, max_delay_seconds=30)
    status_write: RetrySettings = RetrySettings(interval_seconds=1, max_attempts=8, backoff_rate=2.0, max_delay_seconds=30)
    ambiguous: RetrySettings = RetrySettings(interval_seconds=2, max_attempts=0, backoff_rate=2.0, max_delay_seconds=60)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            check_type(f"retries.{f.name}", value, RetrySettings)
            value._check(f"retries.{f.name}")
        self.ambiguous._check_ambiguous("retries.ambiguous")


# The Distributed Map's defaults: an EXPRESS child must fit AWS's 5 minutes with every retry
# exhausted (fanout_kit/patterns/distributed_map/express_budget.py), so it retries less than a Parallel task. With a
# worker timeout of 20 s (50 s per attempt with the task margin) the worst case is 244 s.
MAP_RETRIES = WorkflowRetries(
    transient=RetrySettings(interval_seconds=2, max_attempts=1, backoff_rate=2.0, max_delay_seconds=60),
    retryable=RetrySettings(interval_seconds=5, max_attempts=2, backoff_rate=2.0, max_delay_seconds=10),
    dlq_send=RetrySettings(interval_seconds=1, max_attempts=3, backoff_rate=2.0, max_delay_seconds=4),
)


@dataclass(frozen=True)
class AlarmThresholds:
    """Each alarm fires when its metric reaches the threshold within one period.

    Args:
        dlq_visible_messages: Messages visible in the dead-letter queue. Default ``1``.
        executions_failed: Failed executions of the state machine. Default ``1``.
        executions_timed_out: Timed-out executions. Default ``1``.
        lambda_errors: Errors of any function the workflow invokes. Default ``1``.
        lambda_throttles: Throttles of any function the workflow invokes. Default ``1``.
        period_minutes: The alarms' period. Default ``5``.
    """

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
    """How a DistributedMapFanOut runs and checks its items.

    Args:
        max_concurrency: The Distributed Map's MaxConcurrency: child executions at once (1 to
            10,000). Default ``100``.
        items_per_batch: ItemBatcher MaxItemsPerBatch: items per child, one worker invocation each.
            Default ``20``.
        child_execution_type: ``"EXPRESS"`` (cheap, at-least-once, at most 5 minutes) or
            ``"STANDARD"``. Default ``"EXPRESS"``.
        max_item_bytes: One item, as JSON, at most this many bytes: a failed child holds
            ``items_per_batch`` of them and the error within 256 KiB (checked at synth; 20 x 8192
            is over). Default ``6144``.
        max_inline_items: Items an execution input may carry inline; more must come as an S3
            manifest. Default ``1000``.
        results_retention_days: The lifecycle of the manifests and the Map's result files in S3.
            Default ``30``.
        failure_threshold: Items that may fail (or time out, or abort) while the batch still
            finalizes. Default ``0``.
        worker_reserved_concurrency: The reserved concurrency you set on your worker function;
            the kit checks it against ``max_concurrency`` (``None``: unreserved). Default ``None``.
    """

    max_concurrency: int = 100
    items_per_batch: int = 20
    child_execution_type: str = "EXPRESS"
    max_item_bytes: int = 6144
    max_inline_items: int = 1000
    results_retention_days: int = 30
    failure_threshold: int = 0
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
    """How a CompletionLedger counts children and when it gives up on a batch.

    Args:
        consumer_max_concurrency: The SQS event source's MaximumConcurrency (2 to 1,000).
            Default ``10``.
        failure_threshold: Failed children a batch tolerates and still finalizes. Default ``0``.
        ttl_days: Days until DynamoDB TTL deletes the ledger's items. Default ``30``.
        deadline_minutes: A batch open longer fails (the sweeper); ``0`` disables. Default ``240``.
        max_receive_count: The child queue's redrive maxReceiveCount (AWS advises at least 5 for a
            Lambda event source). Default ``5``.
        batch_size: The SQS event source's batch size (1 to 10). Default ``10``.
        kinesis_batch_size: The Kinesis event source's batch size. Default ``100``.
        kinesis_retry_attempts: The Kinesis event source's retry attempts. Default ``5``.
        kinesis_shard_count: Shards of the child stream. Default ``1``.
        sweep_interval_minutes: The deadline sweeper's schedule. Default ``5``.
        counter_shards: Counter items per batch (1 = one item; more spread a busy batch's writes
            over keys); change only while no batch is open. Default ``1``.
    """

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

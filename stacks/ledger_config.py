"""Per-environment settings of the completion ledger (cdk.json ``fanout:environments.<env>.ledger``).

``load_ledger_settings(env_raw, env_name)`` validates the ``ledger`` object of one environment and
raises ``stacks.config.ConfigError`` naming the field, its allowed range and the value found.
No aws_cdk import here (the CLI and tests use it too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fanout_common.ledger import MAX_COUNTER_SHARDS
from stacks.config import ENVIRONMENTS_KEY, ConfigError

LEDGER_KEY = "ledger"

# cdk.json field -> (attribute, minimum, maximum, what the limit is)
FIELDS: dict[str, tuple[str, int, int, str]] = {
    "consumerMaxConcurrency": ("consumer_max_concurrency", 2, 1000, "SQS event source MaximumConcurrency"),
    "failureThreshold": ("failure_threshold", 0, 1_000_000, "failed children a batch tolerates"),
    "ttlDays": ("ttl_days", 1, 3650, "days until DynamoDB TTL deletes ledger items"),
    "deadlineMinutes": ("deadline_minutes", 0, 10_080, "0 disables; batches open longer fail"),
    "maxReceiveCount": ("max_receive_count", 1, 1000, "SQS redrive policy maxReceiveCount"),
    "batchSize": ("batch_size", 1, 10, "SQS event source batch size (no batching window)"),
    "kinesisBatchSize": ("kinesis_batch_size", 1, 10_000, "Kinesis event source batch size"),
    "kinesisRetryAttempts": ("kinesis_retry_attempts", 0, 10_000, "Kinesis event source retry attempts"),
    "kinesisShardCount": ("kinesis_shard_count", 1, 100, "shards of the child stream"),
    "sweepIntervalMinutes": ("sweep_interval_minutes", 1, 1440, "deadline sweeper schedule"),
    "counterShards": (
        "counter_shards", 1, MAX_COUNTER_SHARDS,
        "counter items per batch of the SQS/Kinesis consumers; 1 = one batch item; change only while no batch is open",
    ),
}


@dataclass(frozen=True)
class LedgerSettings:
    consumer_max_concurrency: int
    failure_threshold: int
    ttl_days: int
    deadline_minutes: int
    max_receive_count: int
    batch_size: int
    kinesis_batch_size: int
    kinesis_retry_attempts: int
    kinesis_shard_count: int
    sweep_interval_minutes: int
    counter_shards: int = 1


def load_ledger_settings(env_raw: Mapping[str, Any], env_name: str) -> LedgerSettings:
    where = f"context.{ENVIRONMENTS_KEY}.{env_name}.{LEDGER_KEY}"
    raw = env_raw.get(LEDGER_KEY) if isinstance(env_raw, Mapping) else None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: missing; must be an object with {', '.join(FIELDS)}")
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown setting; allowed: {', '.join(FIELDS)}")
    values: dict[str, int] = {}
    for field, (attribute, low, high, meaning) in FIELDS.items():
        value = raw.get(field)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ConfigError(
                f"{where}.{field}: must be a whole number from {low} to {high} ({meaning}), got {value!r}"
            )
        values[attribute] = value
    return LedgerSettings(**values)

"""Per-environment settings, read from cdk.json context (the one place they live).

``load_environment(context, name)`` validates everything the stacks use and fails with a message
that names the setting and the fix. No aws_cdk import here: the CLI and tests use it too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from statemachines.retry_policy import RetryConfigError, RetrySettings

if TYPE_CHECKING:
    from stacks.ledger_config import LedgerSettings

ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = ROOT / "cdk.json"
ENVIRONMENTS_KEY = "fanout:environments"
TASKS_KEY = "fanout:tasks"
MAP_WORKER_KEY = "fanout:mapWorker"
TASK_NAME = re.compile(r"^[A-Z][A-Za-z0-9]{0,39}$")
RETRY_KINDS = ("transient", "retryable", "dlqSend", "statusWrite")
ALARM_KEYS = (
    "dlqVisibleMessages",
    "executionsFailed",
    "executionsTimedOut",
    "lambdaErrors",
    "lambdaThrottles",
    "periodMinutes",
)


class ConfigError(ValueError):
    """cdk.json context is wrong; the message names the setting and the fix."""


@dataclass(frozen=True)
class TaskSpec:
    name: str
    handler: str
    description: str
    transient: RetrySettings  # Lambda service errors
    retryable: RetrySettings  # the task raised RetryableTaskError


@dataclass(frozen=True)
class AlarmThresholds:
    dlq_visible_messages: int
    executions_failed: int
    executions_timed_out: int
    lambda_errors: int
    lambda_throttles: int
    period_minutes: int


MAP_INT_FIELDS: dict[str, tuple[str, int, int]] = {
    "maxConcurrency": ("max_concurrency", 1, 10_000),
    "itemsPerBatch": ("items_per_batch", 1, 100_000),
    "maxItemBytes": ("max_item_bytes", 64, 256 * 1024),
    "maxInlineItems": ("max_inline_items", 1, 10_000),
    "resultsRetentionDays": ("results_retention_days", 1, 3650),
    "workerTimeoutSeconds": ("worker_timeout_seconds", 1, 900),
    "failureThreshold": ("failure_threshold", 0, 1_000_000_000),
}
MAP_RETRY_KINDS = ("transient", "retryable", "dlqSend")  # map.retry: the Map child's own overrides


@dataclass(frozen=True)
class MapSettings:
    max_concurrency: int  # Distributed Map MaxConcurrency (children at once)
    items_per_batch: int  # ItemBatcher MaxItemsPerBatch: items per child Lambda invoke
    child_execution_type: str  # "EXPRESS" (cheap, at-least-once, 5 min) or "STANDARD"
    max_item_bytes: int  # one item, as JSON, at most this many bytes
    max_inline_items: int  # more than this must come as an S3 manifest
    results_retention_days: int  # lifecycle of manifests and ResultWriter output in S3
    worker_timeout_seconds: int
    failure_threshold: int  # items that may fail (or time out, or abort) and still finalize
    # Optional: reserved concurrency of the Map worker function, so one batch at high
    # MaxConcurrency cannot take the account's whole Lambda concurrency (None: unreserved).
    worker_reserved_concurrency: int | None = None


@dataclass(frozen=True)
class EnvironmentConfig:
    name: str
    stack_prefix: str
    account: str | None
    region: str
    removal_policy: str  # "destroy" | "retain"
    log_retention_days: int
    task_timeout_seconds: int
    execution_timeout_minutes: int
    powertools_layer_version: int
    # Step Functions logs at level ALL; with execution data the logs carry every state's input and
    # output (customer e-mails, amounts): on for debugging in dev, off in prod.
    include_execution_data: bool
    dlq_send_retry: RetrySettings
    status_write_retry: RetrySettings
    map_dlq_send_retry: RetrySettings  # the Map child's DLQ send (map.retry.dlqSend over dlqSend)
    alarms: AlarmThresholds
    tasks: tuple[TaskSpec, ...]
    map: MapSettings
    map_worker: TaskSpec
    ledger: "LedgerSettings"

    @property
    def task_names(self) -> list[str]:
        return [t.name for t in self.tasks]

    @property
    def retain_data(self) -> bool:
        return self.removal_policy == "retain"


def read_cdk_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """cdk.json's ``context``; an unreadable or malformed file is a ConfigError naming the spot."""
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    context = data.get("context") if isinstance(data, dict) else None
    if not isinstance(context, dict):
        raise ConfigError('needs a "context" object (the kit\'s settings live there)')
    return context


def _int(env: Mapping[str, Any], key: str, where: str, low: int = 1) -> int:
    value = env.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{where}.{key}: must be a whole number >= {low}, got {value!r}")
    return value


def _bool(env: Mapping[str, Any], key: str, where: str) -> bool:
    value = env.get(key)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key}: must be true or false, got {value!r}")
    return value


def _tasks(raw: Any, defaults: dict[str, RetrySettings]) -> tuple[TaskSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"context.{TASKS_KEY}: must be a non-empty list of tasks")
    specs, seen = [], set()
    for i, task in enumerate(raw):
        where = f"context.{TASKS_KEY}[{i}]"
        if not isinstance(task, Mapping):
            raise ConfigError(f"{where}: must be an object with name and handler")
        name, handler = task.get("name"), task.get("handler")
        if not isinstance(name, str) or not TASK_NAME.match(name):
            raise ConfigError(
                f"{where}.name: must be PascalCase letters/digits, at most 40, got {name!r}"
            )
        if name in seen:
            raise ConfigError(f"{where}.name: {name} is configured twice")
        seen.add(name)
        if not isinstance(handler, str) or not re.match(r"^[a-z_][\w.]*\.[a-z_]\w*$", handler):
            raise ConfigError(
                f"{where}.handler: must be 'module.function' under lambdas/, got {handler!r}"
            )
        overrides = task.get("retry", {})
        if not isinstance(overrides, Mapping) or set(overrides) - {"transient", "retryable"}:
            raise ConfigError(f"{where}.retry: may only override 'transient' and 'retryable'")
        try:
            specs.append(
                TaskSpec(
                    name=name,
                    handler=handler,
                    description=str(task.get("description", name)),
                    transient=defaults["transient"].with_overrides(
                        overrides.get("transient", {}), f"{where}.retry.transient"
                    ),
                    retryable=defaults["retryable"].with_overrides(
                        overrides.get("retryable", {}), f"{where}.retry.retryable"
                    ),
                )
            )
        except RetryConfigError as exc:
            raise ConfigError(str(exc)) from exc
    return tuple(specs)


def _map_settings(raw: Any, where: str) -> MapSettings:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be an object with {', '.join([*MAP_INT_FIELDS, 'childExecutionType'])}")
    unknown = sorted(set(raw) - set(MAP_INT_FIELDS) - {"childExecutionType", "retry", "workerReservedConcurrency"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown setting")
    values: dict[str, Any] = {}
    for key, (attr, low, high) in MAP_INT_FIELDS.items():
        value = raw.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ConfigError(f"{where}.{key}: must be a whole number from {low} to {high}, got {value!r}")
        values[attr] = value
    kind = raw.get("childExecutionType")
    if kind not in ("EXPRESS", "STANDARD"):
        raise ConfigError(f"{where}.childExecutionType: must be EXPRESS or STANDARD, got {kind!r}")
    reserved = raw.get("workerReservedConcurrency")
    if reserved is not None and (not isinstance(reserved, int) or isinstance(reserved, bool) or reserved < 1):
        raise ConfigError(
            f"{where}.workerReservedConcurrency: must be a whole number >= 1 (or absent: unreserved), got {reserved!r}"
        )
    if reserved is not None and reserved < values["max_concurrency"]:
        raise ConfigError(
            f"{where}.workerReservedConcurrency: {reserved} is below maxConcurrency "
            f"{values['max_concurrency']}: children would be throttled; raise it or lower maxConcurrency"
        )
    return MapSettings(child_execution_type=kind, worker_reserved_concurrency=reserved, **values)


def load_environment(context: Mapping[str, Any], name: str | None) -> EnvironmentConfig:
    environments = context.get(ENVIRONMENTS_KEY)
    if not isinstance(environments, Mapping) or not environments:
        raise ConfigError(f"cdk.json context.{ENVIRONMENTS_KEY}: missing or empty")
    known = ", ".join(sorted(environments))
    if not name:
        raise ConfigError(f"no environment chosen: pass -c env=NAME (known: {known})")
    if name not in environments:
        raise ConfigError(f"unknown environment {name!r}: pass -c env=NAME with one of: {known}")
    env = environments[name]
    where = f"context.{ENVIRONMENTS_KEY}.{name}"
    if not isinstance(env, Mapping):
        raise ConfigError(f"{where}: must be an object")

    prefix = env.get("stackPrefix")
    if not isinstance(prefix, str) or not re.match(r"^[A-Za-z][A-Za-z0-9-]{0,100}$", prefix):
        raise ConfigError(f"{where}.stackPrefix: must be letters, digits and '-', got {prefix!r}")
    region = env.get("region")
    if not isinstance(region, str) or not re.match(r"^[a-z]{2}(-[a-z]+)+-\d$", region):
        raise ConfigError(f"{where}.region: must be an AWS region such as eu-west-1, got {region!r}")
    account = env.get("account")
    if account is not None and not (isinstance(account, str) and re.match(r"^\d{12}$", account)):
        raise ConfigError(f"{where}.account: must be null or a 12-digit account id, got {account!r}")
    removal = env.get("removalPolicy")
    if removal not in ("destroy", "retain"):
        raise ConfigError(f"{where}.removalPolicy: must be 'destroy' or 'retain', got {removal!r}")

    raw_retry = env.get("retry")
    if not isinstance(raw_retry, Mapping):
        raise ConfigError(f"{where}.retry: must be an object with {', '.join(RETRY_KINDS)}")
    try:
        retry = {k: RetrySettings.parse(raw_retry.get(k), f"{where}.retry.{k}") for k in RETRY_KINDS}
    except RetryConfigError as exc:
        raise ConfigError(str(exc)) from exc

    map_retry = _map_retry(env.get("map"), retry, f"{where}.map.retry")

    raw_alarms = env.get("alarms")
    if not isinstance(raw_alarms, Mapping):
        raise ConfigError(f"{where}.alarms: must be an object with {', '.join(ALARM_KEYS)}")
    alarms = AlarmThresholds(*(_int(raw_alarms, k, f"{where}.alarms") for k in ALARM_KEYS))

    return EnvironmentConfig(
        name=name,
        stack_prefix=prefix,
        account=account,
        region=region,
        removal_policy=removal,
        log_retention_days=_int(env, "logRetentionDays", where),
        task_timeout_seconds=_int(env, "taskTimeoutSeconds", where),
        execution_timeout_minutes=_int(env, "executionTimeoutMinutes", where),
        powertools_layer_version=_int(env, "powertoolsLayerVersion", where),
        include_execution_data=_bool(env, "includeExecutionData", where),
        dlq_send_retry=retry["dlqSend"],
        status_write_retry=retry["statusWrite"],
        alarms=alarms,
        tasks=_tasks(context.get(TASKS_KEY), retry),
        map=_map_settings(env.get("map"), f"{where}.map"),
        map_worker=_tasks([context.get(MAP_WORKER_KEY)], map_retry)[0],
        map_dlq_send_retry=map_retry["dlqSend"],
        ledger=_ledger_settings(env, name),
    )


def _map_retry(raw_map: Any, retry: dict[str, RetrySettings], where: str) -> dict[str, RetrySettings]:
    """The Map child's retry settings: the environment's, with ``map.retry`` overrides (an EXPRESS
    child must fit 5 minutes with every retry exhausted, so it usually needs fewer)."""
    raw = raw_map.get("retry", {}) if isinstance(raw_map, Mapping) else {}
    if not isinstance(raw, Mapping) or set(raw) - set(MAP_RETRY_KINDS):
        raise ConfigError(f"{where}: may only override {', '.join(MAP_RETRY_KINDS)}")
    try:
        return {
            **retry,
            **{k: retry[k].with_overrides(raw.get(k, {}), f"{where}.{k}") for k in MAP_RETRY_KINDS},
        }
    except RetryConfigError as exc:
        raise ConfigError(str(exc)) from exc


def _ledger_settings(env: Mapping[str, Any], name: str) -> "LedgerSettings":
    from stacks.ledger_config import load_ledger_settings  # it imports this module

    return load_ledger_settings(env, name)


def environment_names(context: Mapping[str, Any] | None = None) -> list[str]:
    environments = (context if context is not None else read_cdk_context()).get(ENVIRONMENTS_KEY)
    return sorted(environments) if isinstance(environments, Mapping) else []


def stack_names(cfg: EnvironmentConfig) -> dict[str, str]:
    """Workflow -> CloudFormation stack name in this environment (the app and the ops CLI)."""
    return {
        "parallel": f"{cfg.stack_prefix}-ParallelWorkflow",
        "map": f"{cfg.stack_prefix}-MapWorkflow",
        "ledger": f"{cfg.stack_prefix}-CompletionLedger",
    }

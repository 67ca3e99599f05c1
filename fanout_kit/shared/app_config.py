"""The kit's settings format in an app's cdk.json context, read and validated: the environments
(``fanout:environments``), the Parallel workflow's tasks (``fanout:tasks``), the Map worker
(``fanout:mapWorker``) and the app's own builder (``fanout:builder``, ``module:function``, which
``fanout run --env`` / ``fanout ledger`` / ``fanout iam-report`` synthesize in-process).

``load_environment(context, name)`` validates everything the stacks use and fails with a message
that names the setting and the fix. The settings end up as the kit constructs' props
(fanout_kit.shared.settings): their ranges are defined there once and checked here with the cdk.json
names. No aws_cdk import here: the CLI and tests use it too. The app is found from the current
directory (the nearest folder with a cdk.json), else the checkout the kit runs from
(``app_root``); an app's own code (this repository's stacks/config.py) imports it from here.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fanout_kit.shared.settings import (
    EMAIL,
    LOG_RETENTION_DAYS,
    TASK_NAME,
    VENDED_LOGS_PREFIX,
    AlarmThresholds,
    LedgerSettings,
    MapSettings,
    ResourceSettings,
    WorkflowRetries,
)
from fanout_kit.shared.checks import ConfigError, whole_number
from fanout_kit.shared.retry_policy import RetrySettings, check_error_names

# The checkout the kit runs from (an editable install: this repository), if it holds an app.
KIT_CHECKOUT = Path(__file__).resolve().parents[2]
ENVIRONMENTS_KEY = "fanout:environments"
TASKS_KEY = "fanout:tasks"
MAP_WORKER_KEY = "fanout:mapWorker"
BUILDER_KEY = "fanout:builder"  # "module:function": build_app(env_name, *, outdir, context) -> (app, cfg, stacks)
RETRY_KINDS = ("transient", "retryable", "dlqSend", "statusWrite")
# retry.ambiguous: timeouts, out-of-memory errors and crashes (the work may be done); optional, the
# kit's default (never retried) when absent; at most MAX_AMBIGUOUS_ATTEMPTS.
AMBIGUOUS = "ambiguous"
LEDGER_KEY = "ledger"


@dataclass(frozen=True)
class TaskSpec:
    name: str
    handler: str
    description: str
    transient: RetrySettings  # Lambda service errors
    retryable: RetrySettings  # the task raised RetryableTaskError (or one of retry_on)
    ambiguous: RetrySettings  # it timed out, ran out of memory or crashed
    retry_on: tuple[str, ...] = ()  # retryOn: the function's own error names, retried
    never_retry: tuple[str, ...] = ()  # neverRetry: the function's own error names, never retried


TASK_KEYS = {"name", "handler", "description", "retry", "retryOn", "neverRetry"}
TASK_RETRY_KINDS = ("transient", "retryable", AMBIGUOUS)  # a task's retry: its own overrides
MAP_RETRY_KINDS = ("transient", "retryable", "dlqSend", AMBIGUOUS)  # map.retry: the Map child's own overrides
# The app's own Map setting (not a construct prop: the worker is the app's function).
WORKER_TIMEOUT_RANGE = (1, 900, "the Map worker function's timeout")


def cdk_json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _whole_numbers(raw: Mapping[str, Any], where: str, ranges: Mapping[str, tuple]) -> dict[str, int]:
    """Attribute -> value of each whole-number setting, read from its camelCase cdk.json key with
    the construct's range (``ranges``: attribute -> (low, high, meaning))."""
    return {
        attr: whole_number(raw.get(cdk_json_name(attr)), f"{where}.{cdk_json_name(attr)}", low, high, meaning)
        for attr, (low, high, meaning) in ranges.items()
    }


def _kit_settings(kind: type, raw: Mapping[str, Any], prefix: str, where: str, **values: Any) -> Any:
    """``kind`` (a fanout_kit.shared.settings dataclass) from the camelCase keys of ``raw`` (``values``
    given instead for some fields): the construct's own checks, with its error named as cdk.json
    names it (``prefix.snake_name`` -> ``where.camelName``)."""
    fields = [f.name for f in dataclasses.fields(kind)]
    try:
        return kind(**{name: values[name] if name in values else raw.get(cdk_json_name(name)) for name in fields})
    except ConfigError as exc:
        message = str(exc)
        if message.startswith(f"{prefix}."):
            message = f"{where}.{message[len(prefix) + 1:]}"
        for name in fields:
            message = re.sub(rf"\b{name}\b", cdk_json_name(name), message)
        raise ConfigError(message) from None


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
    map_worker_timeout_seconds: int
    ledger: LedgerSettings
    transient_retry: RetrySettings  # every task's default (Lambda service errors)
    retryable_retry: RetrySettings  # every task's default (RetryableTaskError)
    ambiguous_retry: RetrySettings  # every task's default (timeouts, out of memory, crashes)
    # optional keys: alarmEmailAddresses (subscribed to the alarm topics), accountConcurrencyLimit
    alarm_email_addresses: tuple[str, ...] = ()
    account_concurrency_limit: int | None = None

    @property
    def task_names(self) -> list[str]:
        return [t.name for t in self.tasks]

    @property
    def retain_data(self) -> bool:
        return self.removal_policy == "retain"

    @property
    def resources(self) -> ResourceSettings:
        """What every resource of this environment shares (the constructs' ``settings`` prop)."""
        return ResourceSettings(
            environment_name=self.name,
            retain_data=self.retain_data,
            log_retention_days=self.log_retention_days,
            powertools_layer_version=self.powertools_layer_version,
            function_timeout_seconds=self.task_timeout_seconds,
            account_concurrency_limit=self.account_concurrency_limit,
        )

    @property
    def retries(self) -> WorkflowRetries:
        """The Parallel workflow's retries (tasks carry their own, resolved per task)."""
        return WorkflowRetries(
            self.transient_retry, self.retryable_retry, self.dlq_send_retry, self.status_write_retry, self.ambiguous_retry
        )

    @property
    def map_retries(self) -> WorkflowRetries:
        """The Map workflow's retries: map.retry over the environment's."""
        return WorkflowRetries(
            self.map_worker.transient,
            self.map_worker.retryable,
            self.map_dlq_send_retry,
            self.status_write_retry,
            self.map_worker.ambiguous,
        )


def find_app_root(start: Path | None = None) -> Path | None:
    """The app folder: the nearest folder with a cdk.json from ``start`` (the current directory)
    up, else the kit's own checkout when it holds one; None when there is none."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "cdk.json").is_file():
            return folder
    return KIT_CHECKOUT if (KIT_CHECKOUT / "cdk.json").is_file() else None


def app_root() -> Path:
    """``find_app_root()``; no app found is a ConfigError."""
    root = find_app_root()
    if root is None:
        raise ConfigError(f"no cdk.json in {Path.cwd()} or above: run in your CDK app's folder")
    return root


def read_cdk_context(path: Path | None = None) -> dict[str, Any]:
    """cdk.json's ``context`` (default: the app's, ``app_root()``); an unreadable or malformed
    file is a ConfigError naming the spot."""
    path = path if path is not None else app_root() / "cdk.json"
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


def _bool(env: Mapping[str, Any], key: str, where: str) -> bool:
    value = env.get(key)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}.{key}: must be true or false, got {value!r}")
    return value


def _tasks(raw: Any, defaults: dict[str, RetrySettings], key: str = TASKS_KEY) -> tuple[TaskSpec, ...]:
    """The tasks of ``context.<key>`` (a list; the Map worker's, one object, comes as a list of one)."""
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"context.{key}: must be a non-empty list of tasks")
    specs, seen = [], set()
    for i, task in enumerate(raw):
        where = f"context.{key}[{i}]" if key == TASKS_KEY else f"context.{key}"
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
        unknown = sorted(set(task) - TASK_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(TASK_KEYS))}")
        overrides = task.get("retry", {})
        if not isinstance(overrides, Mapping) or set(overrides) - set(TASK_RETRY_KINDS):
            raise ConfigError(f"{where}.retry: may only override {', '.join(TASK_RETRY_KINDS)}")
        own = {k: defaults[k]._with_overrides(overrides.get(k, {}), f"{where}.retry.{k}") for k in TASK_RETRY_KINDS}
        own[AMBIGUOUS]._check_ambiguous(f"{where}.retry.{AMBIGUOUS}")
        retry_on, never_retry = check_error_names(
            task.get("retryOn", []), task.get("neverRetry", []), where, names=("retryOn", "neverRetry")
        )
        specs.append(TaskSpec(name=name, handler=handler, description=str(task.get("description", name)), **own,
                              retry_on=retry_on, never_retry=never_retry))
    return tuple(specs)


def _map_settings(raw: Any, where: str) -> tuple[MapSettings, int]:
    """(the construct's MapSettings, the worker function's timeout)."""
    int_keys = [cdk_json_name(a) for a in MapSettings.RANGES] + ["workerTimeoutSeconds"]
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be an object with {', '.join([*int_keys, 'childExecutionType'])}")
    unknown = sorted(set(raw) - set(int_keys) - {"childExecutionType", "retry", "workerReservedConcurrency"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown setting")
    settings = _kit_settings(MapSettings, raw, "map", where)
    worker_timeout = whole_number(raw.get("workerTimeoutSeconds"), f"{where}.workerTimeoutSeconds", *WORKER_TIMEOUT_RANGE)
    return settings, worker_timeout


def load_ledger_settings(env: Mapping[str, Any], name: str) -> LedgerSettings:
    where = f"context.{ENVIRONMENTS_KEY}.{name}.{LEDGER_KEY}"
    fields = [cdk_json_name(a) for a in LedgerSettings.RANGES]
    raw = env.get(LEDGER_KEY)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: missing; must be an object with {', '.join(fields)}")
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown setting; allowed: {', '.join(fields)}")
    return _kit_settings(LedgerSettings, raw, "ledger", where)


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
    unknown = sorted(set(raw_retry) - {*RETRY_KINDS, AMBIGUOUS})
    if unknown:
        raise ConfigError(f"{where}.retry.{unknown[0]}: unknown kind; known: {', '.join([*RETRY_KINDS, AMBIGUOUS])}")
    retry = {k: RetrySettings._parse(raw_retry.get(k), f"{where}.retry.{k}") for k in RETRY_KINDS}
    retry[AMBIGUOUS] = WorkflowRetries().ambiguous._with_overrides(
        raw_retry.get(AMBIGUOUS, {}), f"{where}.retry.{AMBIGUOUS}"
    )
    retry[AMBIGUOUS]._check_ambiguous(f"{where}.retry.{AMBIGUOUS}")

    map_retry = _map_retry(env.get("map"), retry, f"{where}.map.retry")

    raw_alarms = env.get("alarms")
    if not isinstance(raw_alarms, Mapping):
        fields = (cdk_json_name(f.name) for f in dataclasses.fields(AlarmThresholds))
        raise ConfigError(f"{where}.alarms: must be an object with {', '.join(fields)}")
    alarms = _kit_settings(AlarmThresholds, raw_alarms, "alarms", f"{where}.alarms")
    map_settings, worker_timeout = _map_settings(env.get("map"), f"{where}.map")
    top = _whole_numbers(
        env,
        where,
        {
            "log_retention_days": (1, None, ""),
            "task_timeout_seconds": (1, 900, "Lambda allows at most 900 s"),
            "execution_timeout_minutes": (1, None, ""),
            "powertools_layer_version": (1, None, ""),
        },
    )

    if top["log_retention_days"] not in LOG_RETENTION_DAYS:
        raise ConfigError(
            f"{where}.logRetentionDays: {top['log_retention_days']} is not a CloudWatch Logs retention; "
            f"use one of {list(LOG_RETENTION_DAYS)}"
        )

    emails = env.get("alarmEmailAddresses", [])
    if not isinstance(emails, list) or not all(isinstance(e, str) and EMAIL.match(e) for e in emails):
        raise ConfigError(f"{where}.alarmEmailAddresses: must be a list of e-mail addresses, got {emails!r}")
    limit = env.get("accountConcurrencyLimit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"{where}.accountConcurrencyLimit: must be null or the account's Lambda concurrency quota, "
                          f"got {limit!r}")

    return EnvironmentConfig(
        alarm_email_addresses=tuple(emails),
        account_concurrency_limit=limit,
        name=name,
        stack_prefix=prefix,
        account=account,
        region=region,
        removal_policy=removal,
        **top,
        include_execution_data=_bool(env, "includeExecutionData", where),
        dlq_send_retry=retry["dlqSend"],
        status_write_retry=retry["statusWrite"],
        alarms=alarms,
        tasks=_tasks(context.get(TASKS_KEY), retry),
        map=map_settings,
        map_worker=_tasks([context.get(MAP_WORKER_KEY)], map_retry, MAP_WORKER_KEY)[0],
        map_worker_timeout_seconds=worker_timeout,
        map_dlq_send_retry=map_retry["dlqSend"],
        ledger=load_ledger_settings(env, name),
        transient_retry=retry["transient"],
        retryable_retry=retry["retryable"],
        ambiguous_retry=retry[AMBIGUOUS],
    )


def _map_retry(raw_map: Any, retry: dict[str, RetrySettings], where: str) -> dict[str, RetrySettings]:
    """The Map child's retry settings: the environment's, with ``map.retry`` overrides (an EXPRESS
    child must fit 5 minutes with every retry exhausted, so it usually needs fewer)."""
    raw = raw_map.get("retry", {}) if isinstance(raw_map, Mapping) else {}
    if not isinstance(raw, Mapping) or set(raw) - set(MAP_RETRY_KINDS):
        raise ConfigError(f"{where}: may only override {', '.join(MAP_RETRY_KINDS)}")
    merged = {
        **retry,
        **{k: retry[k]._with_overrides(raw.get(k, {}), f"{where}.{k}") for k in MAP_RETRY_KINDS},
    }
    merged[AMBIGUOUS]._check_ambiguous(f"{where}.{AMBIGUOUS}")
    return merged


def environment_names(context: Mapping[str, Any] | None = None) -> list[str]:
    environments = (context if context is not None else read_cdk_context()).get(ENVIRONMENTS_KEY)
    return sorted(environments) if isinstance(environments, Mapping) else []


def builder_name(context: Mapping[str, Any]) -> str:
    """The app's builder (``context.fanout:builder``, ``module:function``)."""
    name = context.get(BUILDER_KEY)
    if not isinstance(name, str) or not re.match(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$", name):
        raise ConfigError(
            f"context.{BUILDER_KEY}: must name the app's builder as 'module:function' "
            f"(build_app(env_name, *, outdir, context) -> (app, config, stacks)), got {name!r}"
        )
    return name


def stack_names(cfg: EnvironmentConfig) -> dict[str, str]:
    """Workflow -> CloudFormation stack name in this environment (the app and the ops CLI)."""
    return {
        "parallel": f"{cfg.stack_prefix}-ParallelWorkflow",
        "map": f"{cfg.stack_prefix}-MapWorkflow",
        "ledger": f"{cfg.stack_prefix}-CompletionLedger",
    }


def log_group_name(cfg: EnvironmentConfig, workflow: str) -> str:
    """The beginning of a workflow's state machine log group name,
    ``/aws/vendedlogs/states/<stackPrefix>-<workflow>``; the construct appends ``-<the stack id's
    unique suffix>`` (fanout_kit.shared.workflow.stack_unique_suffix)."""
    return f"{VENDED_LOGS_PREFIX}{cfg.stack_prefix}-{workflow}"

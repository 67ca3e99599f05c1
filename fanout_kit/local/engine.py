"""The embedded engine: moto's Step Functions interpreter running the synthesized definitions,
with the project's real handlers in-process and DynamoDB / SQS (and S3) emulated by moto.

What the local run adapts, all here and all visible:

* Retry waits: by default honoured (really slept, with the jitter the interpreter draws); with
  ``sleep_retries=False`` they are recorded in ``retry_clock.waits`` and not slept, for tests. Wait
  states likewise (``retry_clock.state_waits``).
* S3: a bucket the template versions (``VersioningConfiguration``) is versioned locally too, so
  object versions (the Map workflow's pinned manifest) behave as in AWS.
* DescribeMapRun: moto's counts are final as soon as the Map state ends. ``map_run_view`` (tests)
  answers the state machine's reads with other counts, e.g. not final yet, as AWS may (it documents
  no consistency guarantee for DescribeMapRun right after the Map state ends).
* moto's Step Functions failure logging is silenced (it logs every caught error at length).
* EventBridge: moto runs no rule targets. When an execution ends, the engine builds the
  documented "Step Functions Execution Status Change" event and delivers it to the Lambda target of
  every ``AWS::Events::Rule`` of the stack whose pattern matches (``deliveries`` records each), as
  EventBridge would (in AWS, best effort and asynchronous; here once, before ``wait`` returns).
* IAM: every AWS call a handler or the state machine makes is recorded (``iam_calls``) and
  ``iam_report()`` evaluates each against the synthesized policies of the role making it
  (``fanout_kit/local/iam.py``); moto itself enforces no IAM.
* Definitions are adapted where moto cannot parse them: ``fanout_kit/local/adapt.py`` (notes kept in
  ``engine.adaptations``); emulator bugs are fixed in ``fanout_kit/local/moto_fixes.py``.
* Payload limit: every state's input (also after Parameters) and output, and every connector's
  output, is held to AWS's 262,144 bytes; past it the execution fails with the terminal
  ``States.DataLimitExceeded``, which ``States.ALL`` does not catch (``fanout_kit/local/payload_limits.py``;
  ``engine.payload_violations`` lists each).
* Optionally (``dynamodb_contention=ContentionModel(...)``), DynamoDB write contention as DynamoDB
  has it and moto does not: ``fanout_kit/local/dynamodb_contention.py``.

The deployed view: after deploying a stack, the engine resolves the template's ``Outputs`` against
the local resources into the same ``fanout_kit.ops.aws.Deployment`` the ops CLI builds from
CloudFormation's DescribeStacks (``engine.deployment(workflow)``), and reads executions, the
dead-letter queue and the status record with the ops CLI's readers (``fanout_kit.ops.watch``,
``fanout_kit.ops.dlq``). Lambda's event source mappings (which moto does not run in-process) are
emulated by ``fanout_kit/local/event_sources.py``.

Server mode (``endpoint_url=``): instead of ``mock_aws`` in this process, the stacks are deployed
into a ``moto server`` reached over HTTP (``moto.server.ThreadedMotoServer`` started in *this*
process, since the Lambda routing and the other patches act on moto's classes in-process), so
tools that talk to "AWS" over the network (the ops CLI) can be tested against it. Every client
of the engine uses the endpoint; the handlers reach it through ``AWS_ENDPOINT_URL``; moto's Step
Functions interpreter reaches it through ``MOTO_PORT``; the execution and no-docker Lambda config
is set with ``POST /moto-api/config`` (and put back on exit).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import boto3
from moto import mock_aws
from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

from fanout_kit.local.adapt import adapt_for_moto, distributed_maps
from fanout_kit.local.moto_fixes import (
    MapChildren,
    aws_sdk_integration_casing,
    cached_interpreter_clients,
    cached_json_paths,
    distributed_map_children,
    iterative_map_workers,
    serialized_dynamodb_writes,
)
from fanout_kit.local.payload_limits import enforced_payload_limits
from fanout_kit.local.moto_lambda import (
    METRICS_NAMESPACE_ENV,
    RUNTIME_NAMES,
    UNHANDLED_ERROR_NAMES,
    LambdaRouter,
    LocalFunction,
    runs_in_process,
    is_kit_handler,
    metrics_namespaces,
    restore_metrics_namespaces,
    routed_lambdas,
)
from fanout_kit.patterns.distributed_map.express_budget import EXPRESS_LIMIT_SECONDS
from fanout_kit.local.template import (
    EXTERNAL_APP,
    LOCAL_ACCOUNT,
    SynthesizedApp,
    code_directory,
    local_names,
    make_resolver,
    resources_of_type,
)

MOTO_CONFIG = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
# Per-function identity variables: in AWS each function has its own; in-process they are shared,
# so they are left to the handlers' defaults rather than set to one function's value.
PER_FUNCTION_ENV = {"POWERTOOLS_SERVICE_NAME"}
# Log and trace knobs: a value the local caller set (the demo quiets the logs, tests too) wins
# over the deployed one.
CALLER_WINS_ENV = {
    "POWERTOOLS_LOG_LEVEL",
    "POWERTOOLS_TRACE_DISABLED",
    "POWERTOOLS_DEV",
    "POWERTOOLS_METRICS_DISABLED",
}
QUIET_LOGGERS = ("moto", "moto.stepfunctions", "botocore", "aws_lambda_powertools")


def _clear_handler_client_caches() -> None:
    """Empty the ``functools.cache`` of every loaded handler module (their cached boto3 clients)."""
    import sys

    from fanout_kit.local.moto_lambda import is_handler_file

    for module in list(sys.modules.values()):
        if not is_handler_file(getattr(module, "__file__", None) or ""):
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", None) == module.__name__:
                value.cache_clear()


_RETRYING = threading.local()  # .execution: the $$.Execution.Id whose Retrier is waiting


def _epoch_ms(value: Any) -> int | None:
    return int(value.timestamp() * 1000) if hasattr(value, "timestamp") else value


def execution_status_event(described: Mapping[str, Any], region: str) -> dict[str, Any]:
    """The "Step Functions Execution Status Change" event EventBridge carries for an execution
    (https://docs.aws.amazon.com/step-functions/latest/dg/eventbridge-integration.html), from
    DescribeExecution's answer."""
    detail = {
        key: described.get(key)
        for key in ("executionArn", "stateMachineArn", "name", "status", "input", "output", "error", "cause")
    }
    detail.update(
        startDate=_epoch_ms(described.get("startDate")),
        stopDate=_epoch_ms(described.get("stopDate")),
        inputDetails={"included": True},
        outputDetails={"included": True},
    )
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Step Functions Execution Status Change",
        "source": "aws.states",
        "account": LOCAL_ACCOUNT,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": region,
        "resources": [described["executionArn"]],
        "detail": detail,
    }


def event_matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """EventBridge pattern matching for the forms the kit's rules use: nested objects, and arrays
    of exact values (any one must equal the event's value). Other forms are refused, not guessed."""
    for key, want in pattern.items():
        got = event.get(key) if isinstance(event, Mapping) else None
        if isinstance(want, Mapping):
            if not isinstance(got, Mapping) or not event_matches(want, got):
                return False
        elif isinstance(want, list):
            if any(isinstance(w, (dict, list)) for w in want):
                raise ValueError(f"event pattern {key}: only exact-value arrays are supported locally, got {want}")
            values = got if isinstance(got, list) else [got]
            if not any(v in want for v in values):
                return False
        else:
            raise ValueError(f"event pattern {key}: must be an object or an array, got {want!r}")
    return True


class StackDefect(RuntimeError):
    """The synthesized stack would fail on AWS in a way the local run must not paper over."""


class RetryClock:
    """Stands in for ``time`` in moto's Retrier: records each retry wait, sleeps it if asked, and
    charges a wait that is not slept to the Express child that waits (``ChildClock``)."""

    def __init__(self, sleep: bool):
        self.sleep_enabled = sleep
        self.waits: list[float] = []
        self.state_waits: list[float] = []  # Wait states' seconds (slept only when sleep_enabled)
        self._lock = threading.Lock()
        self.children: ChildClock | None = None

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(float(seconds))
        if self.sleep_enabled:
            time.sleep(seconds)
        elif self.children is not None:
            self.children.charge(getattr(_RETRYING, "execution", None), float(seconds), "retry waits")


@dataclass
class _ChildBudget:
    env: Any
    started: float
    simulated: float = 0.0
    charged: dict[str, float] = field(default_factory=dict)
    stopped: str | None = None


class ChildClock:
    """The Express limit, locally: each EXPRESS Distributed Map child's time is its wall time plus
    what the engine simulates instead of waiting (retry waits not slept; a function that hangs
    until its timeout). Past ``limit_seconds`` the child is stopped at once, as AWS stops an
    Express execution at 5 minutes: no Catch runs, the map run counts it timed out."""

    def __init__(self, limit_seconds: float):
        self.limit_seconds = limit_seconds
        self._budgets: dict[str, _ChildBudget] = {}
        self._lock = threading.Lock()
        self.seconds: dict[str, float] = {}  # child ARN -> its clocked time, until metered

    def start(self, child_arn: str, env: Any) -> None:
        with self._lock:
            self._budgets[child_arn] = _ChildBudget(env=env, started=time.monotonic())

    def charge(self, child_arn: str | None, seconds: float, what: str) -> None:
        with self._lock:
            budget = self._budgets.get(child_arn or "")
            if budget is None:
                return
            budget.simulated += seconds
            budget.charged[what] = budget.charged.get(what, 0.0) + seconds
        self._check(budget)

    def end(self, child_arn: str) -> str | None:
        with self._lock:
            budget = self._budgets.pop(child_arn, None)
        if budget is None:
            return None
        self._check(budget)
        with self._lock:
            self.seconds[child_arn] = time.monotonic() - budget.started + budget.simulated
        return budget.stopped

    def _check(self, budget: _ChildBudget) -> None:
        elapsed = time.monotonic() - budget.started
        total = elapsed + budget.simulated
        if total > self.limit_seconds and budget.stopped is None:
            parts = ", ".join(f"{what} {s:g} s" for what, s in budget.charged.items())
            budget.stopped = (
                f"Express child stopped at the {self.limit_seconds:g} s limit: ran {total:.1f} s "
                f"(wall {elapsed:.1f} s" + (f", {parts}" if parts else "") + ")"
            )
            budget.env.set_timed_out()


@dataclass
class ExecutionResult:
    arn: str
    status: str
    output: Any
    error: str | None
    cause: str | None
    history: list[dict[str, Any]]
    seconds: float
    described: dict[str, Any] = field(default_factory=dict)  # DescribeExecution's answer at the end


@dataclass
class LocalStack:
    """Local stand-ins of one stack's resources, by logical id."""

    functions: dict[str, str] = field(default_factory=dict)  # logical id -> service name
    queues: dict[str, str] = field(default_factory=dict)  # logical id -> queue URL
    tables: dict[str, str] = field(default_factory=dict)  # logical id -> table name
    buckets: dict[str, str] = field(default_factory=dict)
    streams: dict[str, str] = field(default_factory=dict)  # logical id -> stream ARN
    state_machines: dict[str, str] = field(default_factory=dict)  # logical id -> ARN
    rules: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (event pattern, target function id)
    environment: dict[str, str] = field(default_factory=dict)  # the functions' variables

    def setting(self, name: str) -> str:
        """A function environment variable of this stack (table names, bucket name, ...)."""
        if name not in self.environment:
            raise KeyError(f"no function of this stack has {name}")
        return self.environment[name]


class LocalEngine:
    """``with LocalEngine(app) as engine: result = engine.run("parallel", {...})``."""

    def __init__(
        self,
        app: SynthesizedApp,
        *,
        workflows: tuple[str, ...] = ("parallel",),
        sleep_retries: bool = True,
        quiet: bool = True,
        endpoint_url: str | None = None,
        express_limit_seconds: float = EXPRESS_LIMIT_SECONDS,
        record_calls: bool = True,
        dynamodb_contention: Any | None = None,
        unhandled_errors: str = RUNTIME_NAMES,
        sandbox: bool = True,
    ) -> None:
        """Deploys the stacks of ``workflows`` locally. The handlers run in this one process and
        share its environment, so stacks whose functions read the same variable with different
        values (each stack has its own status table) are deployed by separate engines.
        ``unhandled_errors``: how a function Lambda stopped (timeout, out of memory, crash) is
        reported: "runtime" (Sandbox.Timedout, Runtime.OutOfMemory, Runtime.ExitError) or
        "Lambda.Unknown" (the name the Step Functions guide documents for all of them)."""
        if unhandled_errors not in UNHANDLED_ERROR_NAMES:
            raise ValueError(f"unhandled_errors: one of {', '.join(UNHANDLED_ERROR_NAMES)}, got {unhandled_errors!r}")
        self.app = app
        self.workflows = workflows
        self.region = app.region
        self.router = LambdaRouter(region=self.region, account=LOCAL_ACCOUNT, unhandled_errors=unhandled_errors)
        self.retry_clock = RetryClock(sleep_retries)
        self.child_clock = ChildClock(express_limit_seconds)
        self.retry_clock.children = self.child_clock
        self.map_children = MapChildren(
            on_start=self.child_clock.start, on_end=self.child_clock.end, on_child_end=self._meter_child
        )
        # What the run used, for its measured cost (fanout_kit.local.metering)
        self.metered_children: list[Any] = []  # metering.ChildRun
        self.usage_recorder: Any = None  # metering.UsageRecorder, while the engine runs
        self.router.on_hang = self._charge_hang
        self.router.on_backoff = self._backoff
        self.quiet = quiet
        self.stacks: dict[str, LocalStack] = {}
        self.deployments: dict[str, Any] = {}  # workflow -> fanout_kit.ops.aws.Deployment
        self._exit = ExitStack()
        self._sqs_send_faults: dict[str, int] = {}
        self._env_backup: dict[str, str | None] = {}
        self.adaptations: list[str] = []  # what adapt_for_moto changed, per state
        self._shared_env: dict[str, str] = {}
        self.endpoint_url = endpoint_url.rstrip("/") if endpoint_url else None
        self.record_calls = record_calls
        self.iam_calls: list[Any] = []  # fanout_kit.local.iam.Call, while recording
        self.deliveries: list[dict[str, Any]] = []  # EventBridge events delivered to rule targets
        self._delivered: set[str] = set()
        self.contention = dynamodb_contention  # a dynamodb_contention.ContentionModel, or None (off)
        # The app's own functions (code not the kit's) in processes of their own, as strict as
        # Lambda (fanout_kit/local/sandbox.py); sandbox=False runs them in this process.
        self.sandbox = sandbox
        self.sandboxes: Any = None
        self.payload_violations: list[Any] = []  # payload_limits.Violation: states over 256 KiB
        # (read number from 1, the map run's true itemCounts) -> the itemCounts DescribeMapRun answers
        self.map_run_view: Callable[[int, dict[str, int]], dict[str, int]] | None = None
        self.map_run_reads = 0

    # ----------------------------------------------------------------- lifecycle
    def __enter__(self) -> "LocalEngine":
        from fanout_kit.ops.aws import environment

        # cdk.json's environment, for the deployments (before any patch); None for another app
        self.env = (
            None if self.app.env_name == EXTERNAL_APP else self.app.config or environment(self.app.env_name)
        )
        if self.quiet:
            for name in QUIET_LOGGERS:
                logging.getLogger(name).setLevel(logging.CRITICAL)
        self._set_env({"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region})
        if self.endpoint_url:
            self._enter_server_mode()
        else:
            self._exit.enter_context(mock_aws(config=MOTO_CONFIG))
        self._exit.enter_context(routed_lambdas(self.router))
        # each invocation sets its function's metrics namespace (moto_lambda): put back the caller's
        self._exit.callback(restore_metrics_namespaces, metrics_namespaces())
        self._exit.enter_context(serialized_dynamodb_writes())
        if self.contention is not None:
            from fanout_kit.local.dynamodb_contention import dynamodb_contention

            self._exit.enter_context(dynamodb_contention(self.contention))
        self._exit.enter_context(cached_interpreter_clients())
        self._exit.enter_context(iterative_map_workers())
        self._exit.enter_context(distributed_map_children(self.map_children))
        self._exit.enter_context(aws_sdk_integration_casing())
        self._exit.enter_context(cached_json_paths())
        self._exit.enter_context(enforced_payload_limits(self.payload_violations))
        if self.record_calls:
            from fanout_kit.local.iam import CallRecorder

            self.iam_calls = self._exit.enter_context(CallRecorder()).calls
        from fanout_kit.local.metering import UsageRecorder

        self.usage_recorder = self._exit.enter_context(UsageRecorder())
        original_time = retrier_decl.time
        retrier_decl.time = self.retry_clock
        self._exit.callback(setattr, retrier_decl, "time", original_time)
        original_eval_body = retrier_decl.RetrierDecl._eval_body

        def eval_body(retrier, env):  # which execution's Retrier waits (for the child clock)
            _RETRYING.execution = env.states.context_object.context_object_data["Execution"]["Id"]
            try:
                return original_eval_body(retrier, env)
            finally:
                _RETRYING.execution = None

        retrier_decl.RetrierDecl._eval_body = eval_body
        self._exit.callback(setattr, retrier_decl.RetrierDecl, "_eval_body", original_eval_body)
        self._patch_sqs_send()
        self._patch_wait_states()
        self._patch_describe_map_run()
        self.sfn = self.client("stepfunctions")
        self.sqs = self.client("sqs")
        self.dynamodb = self.client("dynamodb")
        try:
            for workflow in self.workflows:
                template = self.app.template(workflow)
                self.stacks[workflow] = self._deploy(template, (self.app.workflow_scopes or {}).get(workflow))
                self.deployments[workflow] = self._resolve_outputs(workflow, template)
        except BaseException:  # nothing patched or mocked outlives a failed deployment
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self._exit.close()
        for key, value in self._env_backup.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def client(self, service: str):
        if self.endpoint_url:
            return boto3.client(service, region_name=self.region, endpoint_url=self.endpoint_url)
        return boto3.client(service, region_name=self.region)

    def _enter_server_mode(self) -> None:
        """Point the handlers and moto's interpreter at the server; enable execution there."""
        from urllib.parse import urlsplit

        from moto.core.config import default_user_config

        parts = urlsplit(self.endpoint_url)
        if parts.hostname not in ("127.0.0.1", "localhost", "::1") or not parts.port:
            raise ValueError(
                f"endpoint_url {self.endpoint_url}: server mode needs a moto server started in this "
                "process on loopback (moto.server.ThreadedMotoServer), with an explicit port"
            )
        # moto's interpreter calls http://localhost:$MOTO_PORT when mock_aws is not active.
        self._set_env({"AWS_ENDPOINT_URL": self.endpoint_url, "MOTO_PORT": str(parts.port)})
        previous = {key: dict(default_user_config.get(key) or {}) for key in MOTO_CONFIG}
        self._post_moto_config(MOTO_CONFIG)
        self._exit.callback(self._post_moto_config, previous)
        # Handlers cache their boto3 clients (functools.cache); a client made under mock_aws
        # (or for another endpoint) would not reach this server: start and end with fresh ones.
        _clear_handler_client_caches()
        self._exit.callback(_clear_handler_client_caches)

    def _post_moto_config(self, config: Mapping[str, Any]) -> None:
        import urllib.request

        request = urllib.request.Request(
            f"{self.endpoint_url}/moto-api/config",
            data=json.dumps(config).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def _set_env(self, values: Mapping[str, str]) -> None:
        for key, value in values.items():
            if key in CALLER_WINS_ENV and key in os.environ and key not in self._env_backup:
                continue
            self._env_backup.setdefault(key, os.environ.get(key))
            os.environ[key] = value

    # ------------------------------------------------------------ "deployment"
    def _deploy(self, template: Mapping[str, Any], scope: frozenset[str] | None = None) -> LocalStack:
        """Create the template's resources. ``scope`` (another app): the logical ids of the
        resources of the workflow run; the kit's functions of other constructs of the same stack are created but
        their variables stay out of this process's shared environment (each construct has its own
        status table): only this workflow's functions run in-process."""
        local = LocalStack()
        refs, attrs = local_names(template, self.region)
        for lid in resources_of_type(template, "AWS::SQS::Queue"):
            url = self.sqs.create_queue(QueueName=lid)["QueueUrl"]
            # A moto server names queues after its own host; the path (account/name) still
            # identifies the queue, and the AWS-style URL the definition carries works there too.
            expected = refs[lid] if not self.endpoint_url else refs[lid].split("amazonaws.com", 1)[1]
            if not (url == expected or (self.endpoint_url and url.endswith(expected))):
                raise RuntimeError(f"moto named queue {lid} {url}, expected {refs[lid]}")
            local.queues[lid] = refs[lid]
        for lid, res in resources_of_type(template, "AWS::DynamoDB::Table").items():
            self._create_table(lid, res["Properties"])
            local.tables[lid] = lid
        for lid, res in resources_of_type(template, "AWS::Kinesis::Stream").items():
            kinesis = self.client("kinesis")
            kinesis.create_stream(StreamName=lid, ShardCount=int(res["Properties"].get("ShardCount", 1)))
            local.streams[lid] = attrs[(lid, "Arn")]
        for lid, res in resources_of_type(template, "AWS::S3::Bucket").items():
            s3 = self.client("s3")
            # S3 refuses LocationConstraint us-east-1 (InvalidLocationConstraint): a bucket there is
            # created without one (S3 API reference, CreateBucket: "If you don't specify a Region,
            # the bucket is created in the US East (N. Virginia) Region (us-east-1)")
            where = {} if self.region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": self.region}}
            s3.create_bucket(Bucket=refs[lid], **where)
            versioning = (res.get("Properties") or {}).get("VersioningConfiguration", {}).get("Status")
            if versioning:
                s3.put_bucket_versioning(Bucket=refs[lid], VersioningConfiguration={"Status": versioning})
            local.buckets[lid] = refs[lid]
        functions = resources_of_type(template, "AWS::Lambda::Function")
        resolve = make_resolver(refs, attrs, self.region)

        shared_env = self._shared_env
        for lid, res in functions.items():
            props = res["Properties"]
            env = resolve(props.get("Environment", {}).get("Variables", {}))
            local.functions[lid] = env.get("POWERTOOLS_SERVICE_NAME", lid)
            code_dir = code_directory(self.app.outdir, props)
            if self.sandbox and code_dir is not None and not runs_in_process(code_dir, props["Handler"]):
                # The app's own function: its own processes, its own environment (not shared)
                self._register_sandboxed(lid, props, env, code_dir, template, resolve)
                local.environment.update({k: v for k, v in env.items() if k not in local.environment})
                continue
            in_scope = scope is None or lid in scope
            if METRICS_NAMESPACE_ENV not in env and is_kit_handler(props["Handler"]):
                raise StackDefect(
                    f"function {lid} ({props['Handler']}) is the kit's but its template has no "
                    f"{METRICS_NAMESPACE_ENV}: on AWS its metrics flush fails on every invocation "
                    "(SchemaValidationError: Must contain a metric namespace); build it with KitFunction, "
                    "which sets it"
                )
            for key, value in env.items() if in_scope else ():
                if key in PER_FUNCTION_ENV:
                    continue
                local.environment[key] = value
                if shared_env.get(key, value) != value:
                    raise RuntimeError(
                        f"functions disagree on environment variable {key}; the in-process "
                        "engine shares one environment: deploy those workflows in separate engines (or add the "
                        "variable to PER_FUNCTION_ENV if it is per-function)"
                    )
                shared_env[key] = value
            self.router.register(
                LocalFunction(
                    name=lid,
                    handler=props["Handler"],
                    memory_mb=props.get("MemorySize", 128),
                    timeout_s=props.get("Timeout", 3),
                    code_dir=code_dir,
                    environment={str(k): str(v) for k, v in env.items()},
                )
            )
        self._set_env(shared_env)

        for lid, res in resources_of_type(template, "AWS::StepFunctions::StateMachine").items():
            synthesized = json.loads(resolve(res["Properties"]["DefinitionString"]))
            for state, rules in distributed_maps(synthesized).items():
                if rules.items_per_batch:
                    self.map_children.batch_sizes[state] = rules.items_per_batch
                if rules.express:
                    self.map_children.express.add(state)
            definition, notes = adapt_for_moto(synthesized)
            self.adaptations.extend(notes)
            created = self.sfn.create_state_machine(
                name=lid,
                definition=json.dumps(definition),
                roleArn=f"arn:aws:iam::{LOCAL_ACCOUNT}:role/{lid}",
                type=res["Properties"].get("StateMachineType", "STANDARD"),
            )
            local.state_machines[lid] = created["stateMachineArn"]
        for lid, res in resources_of_type(template, "AWS::Events::Rule").items():
            pattern = resolve(res["Properties"].get("EventPattern") or {})
            for target in res["Properties"].get("Targets", []):
                arn = resolve(target["Arn"])
                if ":function:" not in arn:
                    raise RuntimeError(f"rule {lid}: the local engine delivers to Lambda targets only, not {arn}")
                local.rules.append((pattern, arn.rsplit(":", 1)[-1]))
        return local

    def _register_sandboxed(self, lid: str, props: Mapping[str, Any], env: Mapping[str, Any], code_dir: Any,
                            template: Mapping[str, Any], resolve: Callable[[Any], Any]) -> None:
        from fanout_kit.local.sandbox import Sandboxes, SandboxSpec, layer_paths

        if self.sandboxes is None:
            self.sandboxes = Sandboxes(self.region, LOCAL_ACCOUNT)
            self.router.sandboxes = self.sandboxes
            self._exit.callback(self.sandboxes.close)
        spec = SandboxSpec(
            name=lid,
            handler=props["Handler"],
            code_dir=code_dir,
            environment={str(k): str(v) for k, v in env.items()},
            layer_paths=layer_paths(list(props.get("Layers") or []), template, self.app.outdir, resolve,
                                    self.sandboxes.powertools_dir, lid),
            memory_mb=int(props.get("MemorySize", 128)),
            timeout_s=float(props.get("Timeout", 3)),
        )
        if self.sandboxes.powertools_dir in spec.layer_paths:
            self.sandboxes.provided_powertools()
        self.sandboxes.register(spec)
        self.router.register(LocalFunction(name=lid, handler=spec.handler, memory_mb=spec.memory_mb,
                                           timeout_s=int(spec.timeout_s), code_dir=code_dir, sandboxed=True))

    def _resolve_outputs(self, workflow: str, template: Mapping[str, Any]) -> Any:
        """The stack's CfnOutputs resolved against the local resources: the deployment object the
        ops CLI builds from the same outputs of the deployed stack."""
        from fanout_kit.ops.aws import deployment_of

        resolve = make_resolver(*local_names(template, self.region), self.region)
        found = (self.app.workflow_outputs or {}).get(workflow)
        if found is not None:  # another app: the construct's own record, with or without add_outputs()
            outputs = {key: str(resolve(value)) for key, value in found.items()}
        else:
            outputs = {key: str(resolve(output["Value"])) for key, output in template.get("Outputs", {}).items()}
        return deployment_of(self.env, workflow, self.region, outputs, stack_name=self.app.workflow_stacks[workflow])

    def _create_table(self, name: str, props: Mapping[str, Any]) -> None:
        kwargs: dict[str, Any] = {
            "TableName": name,
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "BillingMode": "PAY_PER_REQUEST",
        }
        if props.get("GlobalSecondaryIndexes"):
            kwargs["GlobalSecondaryIndexes"] = [
                {k: v for k, v in gsi.items() if k in ("IndexName", "KeySchema", "Projection")}
                for gsi in props["GlobalSecondaryIndexes"]
            ]
        self.dynamodb.create_table(**kwargs)

    def _meter_child(self, child: Any, express: bool) -> None:
        from fanout_kit.local.metering import ChildRun

        with self.child_clock._lock:
            seconds = self.child_clock.seconds.pop(child.arn, None)
        if seconds is None:  # not clocked (a Standard child): its wall time
            import datetime

            start, stop = (datetime.datetime.fromisoformat(t) for t in (child.start, child.stop))
            seconds = (stop - start).total_seconds()
        self.metered_children.append(ChildRun(child.arn, child.status, child.items, express, seconds))

    def measured_cost(self, executions: Any) -> Any:
        """What the run used, priced (``fanout_kit.local.metering.Measurement``)."""
        from fanout_kit.local.metering import measure

        return measure(self, executions)

    def _backoff(self, event: Any, seconds: float) -> None:
        """RetryFailedItems' wait before a retry round: on the retry clock (slept, or recorded and
        charged to the Express child it runs in), as the Retriers' waits are."""
        _RETRYING.execution = event.get("childExecutionArn") if isinstance(event, Mapping) else None
        try:
            self.retry_clock.sleep(seconds)
        finally:
            _RETRYING.execution = None

    def _charge_hang(self, event: Any, seconds: float) -> None:
        """A function that hangs runs (in simulated time) until its timeout: charge its child."""
        child = event.get("executionArn") if isinstance(event, Mapping) else None
        self.child_clock.charge(child, seconds, "functions hung until their timeout")

    # ------------------------------------------------------------------ faults
    def inject_lambda_service_faults(
        self, service: str, codes: list[str], *, after_handler: bool = False, workflow: str = "parallel"
    ) -> None:
        """The next ``len(codes)`` invokes of the function named ``service`` fail with these
        Lambda API errors (e.g. ``["ServiceException", "TooManyRequestsException"]``); with
        ``after_handler`` the handler runs first and its response is lost."""
        lid = self.function_id(service, workflow)
        when = "after" if after_handler else "before"
        self.router.service_faults.setdefault(lid, []).extend((c, when) for c in codes)

    def inject_sqs_send_failures(self, queue_logical_id: str, count: int, workflow: str = "parallel") -> None:
        """The next ``count`` SendMessage calls to that queue fail with a service error."""
        url = self.stacks[workflow].queues[queue_logical_id]
        self._sqs_send_faults[url.rsplit("/", 1)[-1]] = count

    def _patch_sqs_send(self) -> None:
        from moto.core.exceptions import JsonRESTError
        from moto.sqs.models import SQSBackend

        original = SQSBackend.send_message
        faults = self._sqs_send_faults
        lock = threading.Lock()

        def send_message(backend, queue_name, *args, **kwargs):
            with lock:
                left = faults.get(queue_name, 0)
                if left:
                    faults[queue_name] = left - 1
            if left:
                error = JsonRESTError("InternalError", "injected SQS SendMessage failure")
                error.code = 500
                raise error
            return original(backend, queue_name, *args, **kwargs)

        SQSBackend.send_message = send_message
        self._exit.callback(setattr, SQSBackend, "send_message", original)

    def _patch_wait_states(self) -> None:
        """Wait states on the retry clock: slept when retry waits are, else recorded."""
        from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction

        original = WaitFunction._wait_interval
        clock = self.retry_clock

        def wait_interval(function, env, wait_seconds):
            clock.state_waits.append(float(wait_seconds))
            if clock.sleep_enabled:
                return original(function, env, wait_seconds)
            return None

        WaitFunction._wait_interval = wait_interval
        self._exit.callback(setattr, WaitFunction, "_wait_interval", original)

    def _patch_describe_map_run(self) -> None:
        """DescribeMapRun through ``map_run_view`` when a test sets one (see the module notes)."""
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend

        original = StepFunctionsParserBackend.describe_map_run
        engine = self

        def describe_map_run(backend, map_run_arn):
            described = original(backend, map_run_arn)
            view = engine.map_run_view
            if view is None:
                return described
            engine.map_run_reads += 1
            return {**described, "itemCounts": view(engine.map_run_reads, dict(described["itemCounts"]))}

        StepFunctionsParserBackend.describe_map_run = describe_map_run
        self._exit.callback(setattr, StepFunctionsParserBackend, "describe_map_run", original)

    # --------------------------------------------------------------- lookups
    def function_id(self, service: str, workflow: str = "parallel") -> str:
        """The logical id of the function named ``service``; of the workflow's own construct when
        its stack holds several of the kit's constructs (each has its UpdateFinalStatus...)."""
        named = [lid for lid, name in self.stacks[workflow].functions.items() if name == service]
        scope = (getattr(self.app, "workflow_scopes", None) or {}).get(workflow)
        own = [lid for lid in named if scope and lid in scope]
        if own or named:
            return (own or named)[0]
        raise KeyError(f"no function {service!r} in the {workflow} workflow")

    def deployment(self, workflow: str = "parallel") -> Any:
        """The deployed stack of ``workflow`` by its outputs (``fanout_kit.ops.aws.Deployment``)."""
        return self.deployments[workflow]

    def state_machine_arn(self, workflow: str = "parallel") -> str:
        return self.deployment(workflow).state_machine_arn

    def queue_url(self, workflow: str = "parallel") -> str:
        """The workflow's dead-letter queue."""
        return self.deployment(workflow).queue_url

    def table_name(self, workflow: str = "parallel") -> str:
        """The batch status table (UpdateFinalStatus's)."""
        return self.deployment(workflow).status_table

    def ledger_table_name(self, workflow: str = "ledger") -> str:
        return self.deployment(workflow).ledger_table

    def bucket_name(self, workflow: str = "map") -> str:
        return self.deployment(workflow).batch_bucket

    def map_run_counts(self, execution_arn: str) -> dict[str, int] | None:
        """The item counts of the execution's map run(s) (DescribeMapRun), live while it runs."""
        from fanout_kit.ops.watch import map_run_counts

        return map_run_counts(self.sfn, execution_arn)

    def upload_manifest(self, key: str, body: bytes, workflow: str = "map") -> dict[str, str]:
        """Put a manifest in the batch data bucket; returns the input's ``manifest`` object."""
        self.client("s3").put_object(Bucket=self.bucket_name(workflow), Key=key, Body=body)
        return {"bucket": self.bucket_name(workflow), "key": key}

    # ------------------------------------------------------------- executions
    def start(self, workflow: str, execution_input: Any, name: str | None = None) -> str:
        return self.sfn.start_execution(
            stateMachineArn=self.state_machine_arn(workflow),
            name=name or f"local-{uuid.uuid4().hex[:12]}",
            input=json.dumps(execution_input),
        )["executionArn"]

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        from fanout_kit.ops.watch import history

        return history(self.sfn, execution_arn)

    def follow(self, execution_arn: str, poll_seconds: float = 0.05) -> Iterator[dict[str, Any]]:
        """Yield history events as they happen, until the execution ends."""
        seen = 0
        while True:
            status = self.sfn.describe_execution(executionArn=execution_arn)["status"]
            events = self.history(execution_arn)
            yield from events[seen:]
            seen = len(events)
            if status != "RUNNING":
                return
            time.sleep(poll_seconds)

    def wait(
        self,
        execution_arn: str,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        timeout_seconds: float = 1800,
        poll_seconds: float = 0.05,
    ) -> ExecutionResult:
        started = time.monotonic()
        for event in self.follow(execution_arn, poll_seconds):
            if on_event:
                on_event(event)
            if time.monotonic() - started > timeout_seconds:
                raise TimeoutError(f"{execution_arn} still running after {timeout_seconds}s")
        described = self.sfn.describe_execution(executionArn=execution_arn)
        self._deliver_status_change(described)
        output = described.get("output")
        return ExecutionResult(
            arn=execution_arn,
            status=described["status"],
            output=json.loads(output) if output else None,
            error=described.get("error"),
            cause=described.get("cause"),
            history=self.history(execution_arn),
            seconds=time.monotonic() - started,
            described=described,
        )

    def iam_report(self, keep: Callable[[str], bool] | None = None):
        """Every recorded call evaluated against its role's synthesized policies, and the grants
        no call used (``fanout_kit.local.iam.IamReport``). ``keep(logical_id)``: only those functions
        and state machines (a stack holding several of the kit's constructs: this one's and the
        app's own functions)."""
        from fanout_kit.local.iam import check, stack_principals

        principals = {}
        for workflow in self.workflows:
            principals.update(stack_principals(workflow, self.app.template(workflow), self.region))
        if keep is not None:
            principals = {key: p for key, p in principals.items() if keep(p.logical_id)}
        return check(list(self.iam_calls), principals)

    def _deliver_status_change(self, described: Mapping[str, Any]) -> None:
        """What EventBridge does when an execution ends: the status-change event to every
        matching rule's Lambda target (once per execution)."""
        arn = described["executionArn"]
        if arn in self._delivered or described["status"] == "RUNNING":
            return
        self._delivered.add(arn)
        event = execution_status_event(described, self.region)
        for local in self.stacks.values():
            for pattern, function_id in local.rules:
                if not event_matches(pattern, event):
                    continue
                response: dict[str, str] = {}
                payload = json.loads(self.router.invoke(function_id, json.dumps(event, default=str), response))
                self.deliveries.append(
                    {"function": function_id, "event": event, "error": response.get("x-amz-function-error"),
                     "result": payload}
                )

    def run(self, workflow: str, execution_input: Any, **kwargs: Any) -> ExecutionResult:
        return self.wait(self.start(workflow, execution_input), **kwargs)

    # ---------------------------------------------------------------- state
    def dlq_peek(self, workflow: str = "parallel", queue_url: str | None = None) -> list[Any]:
        """Every visible message of the workflow's DLQ (or ``queue_url``), left in the queue: the
        ops CLI's peek (received, then made visible again), as ``fanout_kit.ops.dlq.Message``."""
        from fanout_kit.ops.dlq import LIST_HOLD_SECONDS, peek, release

        url = queue_url or self.queue_url(workflow)
        messages, _in_flight = peek(self.sqs, url, LIST_HOLD_SECONDS)
        release(self.sqs, url, messages)
        return messages

    def dlq_messages(self, workflow: str = "parallel", queue_url: str | None = None) -> list[Any]:
        """The bodies of ``dlq_peek``'s messages (parsed JSON objects; the text if not one)."""
        return [m.raw if m.body is None else m.body for m in self.dlq_peek(workflow, queue_url)]

    def status_record(self, batch_id: str, workflow: str = "parallel") -> dict[str, Any] | None:
        from fanout_kit.shared.final_status import read_status  # noqa: PLC0415

        return read_status(self.dynamodb, self.table_name(workflow), batch_id)

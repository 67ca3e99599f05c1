"""The embedded engine: moto's Step Functions interpreter running the synthesized definitions,
with the project's real handlers in-process and DynamoDB / SQS (and S3) emulated by moto.

What the local run adapts, all here and all visible:

* Retry waits: by default honoured (really slept, with the jitter the interpreter draws); with
  ``sleep_retries=False`` they are recorded in ``retry_clock.waits`` and not slept, for tests.
* moto's Step Functions failure logging is silenced (it logs every caught error at length).
* Definitions are adapted where moto cannot parse them: ``fanout/local/adapt.py`` (notes kept in
  ``engine.adaptations``); emulator bugs are fixed in ``fanout/local/moto_fixes.py``.
* Optionally (``dynamodb_contention=ContentionModel(...)``), DynamoDB write contention as DynamoDB
  has it and moto does not: ``fanout/local/dynamodb_contention.py``.

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

from fanout.local.adapt import adapt_for_moto
from fanout.local.moto_fixes import (
    cached_interpreter_clients,
    iterative_map_workers,
    serialized_dynamodb_writes,
)
from fanout.local.moto_lambda import LambdaRouter, LocalFunction, routed_lambdas
from fanout.local.template import (
    LOCAL_ACCOUNT,
    SynthesizedApp,
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

    from fanout.local.moto_lambda import LAMBDAS_DIR

    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if not path.startswith(str(LAMBDAS_DIR)):
            continue
        for value in list(vars(module).values()):
            if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", None) == module.__name__:
                value.cache_clear()


class RetryClock:
    """Stands in for ``time`` in moto's Retrier: records each retry wait, sleeps it if asked."""

    def __init__(self, sleep: bool):
        self.sleep_enabled = sleep
        self.waits: list[float] = []
        self._lock = threading.Lock()

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.waits.append(float(seconds))
        if self.sleep_enabled:
            time.sleep(seconds)


@dataclass
class ExecutionResult:
    arn: str
    status: str
    output: Any
    error: str | None
    cause: str | None
    history: list[dict[str, Any]]
    seconds: float


@dataclass
class LocalStack:
    """Local stand-ins of one stack's resources, by logical id."""

    functions: dict[str, str] = field(default_factory=dict)  # logical id -> service name
    queues: dict[str, str] = field(default_factory=dict)  # logical id -> queue URL
    tables: dict[str, str] = field(default_factory=dict)  # logical id -> table name
    buckets: dict[str, str] = field(default_factory=dict)
    streams: dict[str, str] = field(default_factory=dict)  # logical id -> stream ARN
    state_machines: dict[str, str] = field(default_factory=dict)  # logical id -> ARN
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
        dynamodb_contention: Any | None = None,
    ) -> None:
        """Deploys the stacks of ``workflows`` locally. The handlers run in this one process and
        share its environment, so stacks whose functions read the same variable with different
        values (each stack has its own status table) are deployed by separate engines."""
        self.app = app
        self.workflows = workflows
        self.region = app.region
        self.router = LambdaRouter(region=self.region, account=LOCAL_ACCOUNT)
        self.retry_clock = RetryClock(sleep_retries)
        self.quiet = quiet
        self.stacks: dict[str, LocalStack] = {}
        self._exit = ExitStack()
        self._sqs_send_faults: dict[str, int] = {}
        self._env_backup: dict[str, str | None] = {}
        self.adaptations: list[str] = []  # what adapt_for_moto changed, per state
        self._shared_env: dict[str, str] = {}
        self.endpoint_url = endpoint_url.rstrip("/") if endpoint_url else None
        self.contention = dynamodb_contention  # a dynamodb_contention.ContentionModel, or None (off)

    # ----------------------------------------------------------------- lifecycle
    def __enter__(self) -> "LocalEngine":
        if self.quiet:
            for name in QUIET_LOGGERS:
                logging.getLogger(name).setLevel(logging.CRITICAL)
        self._set_env({"AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region})
        if self.endpoint_url:
            self._enter_server_mode()
        else:
            self._exit.enter_context(mock_aws(config=MOTO_CONFIG))
        self._exit.enter_context(routed_lambdas(self.router))
        self._exit.enter_context(serialized_dynamodb_writes())
        if self.contention is not None:
            from fanout.local.dynamodb_contention import dynamodb_contention

            self._exit.enter_context(dynamodb_contention(self.contention))
        self._exit.enter_context(cached_interpreter_clients())
        self._exit.enter_context(iterative_map_workers())
        original_time = retrier_decl.time
        retrier_decl.time = self.retry_clock
        self._exit.callback(setattr, retrier_decl, "time", original_time)
        self._patch_sqs_send()
        self.sfn = self.client("stepfunctions")
        self.sqs = self.client("sqs")
        self.dynamodb = self.client("dynamodb")
        for workflow in self.workflows:
            self.stacks[workflow] = self._deploy(self.app.template(workflow))
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
    def _deploy(self, template: Mapping[str, Any]) -> LocalStack:
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
        for lid in resources_of_type(template, "AWS::S3::Bucket"):
            self.client("s3").create_bucket(
                Bucket=refs[lid], CreateBucketConfiguration={"LocationConstraint": self.region}
            )
            local.buckets[lid] = refs[lid]
        functions = resources_of_type(template, "AWS::Lambda::Function")
        resolve = make_resolver(refs, attrs, self.region)

        shared_env = self._shared_env
        for lid, res in functions.items():
            props = res["Properties"]
            env = resolve(props.get("Environment", {}).get("Variables", {}))
            local.functions[lid] = env.get("POWERTOOLS_SERVICE_NAME", lid)
            for key, value in env.items():
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
                )
            )
        self._set_env(shared_env)

        for lid, res in resources_of_type(template, "AWS::StepFunctions::StateMachine").items():
            definition, notes = adapt_for_moto(json.loads(resolve(res["Properties"]["DefinitionString"])))
            self.adaptations.extend(notes)
            created = self.sfn.create_state_machine(
                name=lid,
                definition=json.dumps(definition),
                roleArn=f"arn:aws:iam::{LOCAL_ACCOUNT}:role/{lid}",
                type=res["Properties"].get("StateMachineType", "STANDARD"),
            )
            local.state_machines[lid] = created["stateMachineArn"]
        return local

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

    # --------------------------------------------------------------- lookups
    def function_id(self, service: str, workflow: str = "parallel") -> str:
        for lid, name in self.stacks[workflow].functions.items():
            if name == service:
                return lid
        raise KeyError(f"no function {service!r} in the {workflow} workflow")

    def state_machine_arn(self, workflow: str = "parallel") -> str:
        (arn,) = self.stacks[workflow].state_machines.values()
        return arn

    def only(self, kind: str, workflow: str = "parallel") -> str:
        values = list(getattr(self.stacks[workflow], kind).values())
        if len(values) != 1:
            raise KeyError(f"{workflow} has {len(values)} {kind}, expected one")
        return values[0]

    def queue_url(self, workflow: str = "parallel") -> str:
        return self.only("queues", workflow)

    def table_name(self, workflow: str = "parallel") -> str:
        """The batch status table (UpdateFinalStatus's)."""
        return self.stacks[workflow].setting("STATUS_TABLE_NAME")

    def ledger_table_name(self, workflow: str = "map") -> str:
        return self.stacks[workflow].setting("LEDGER_TABLE_NAME")

    def bucket_name(self, workflow: str = "map") -> str:
        return self.stacks[workflow].setting("BATCH_BUCKET_NAME")

    def upload_manifest(self, key: str, body: bytes, workflow: str = "map") -> dict[str, str]:
        """Put a manifest in the batch data bucket; returns the input's ``manifest`` object."""
        self.client("s3").put_object(Bucket=self.bucket_name(workflow), Key=key, Body=body)
        return {"bucket": self.bucket_name(workflow), "key": key}

    def ledger_counts(self, batch_id: str, workflow: str = "map") -> dict[str, Any] | None:
        from lambdas.fanout_common.ledger import batch_key, plain

        item = self.dynamodb.get_item(
            TableName=self.ledger_table_name(workflow), Key=batch_key(batch_id), ConsistentRead=True
        ).get("Item")
        return plain(item) if item else None

    # ------------------------------------------------------------- executions
    def start(self, workflow: str, execution_input: Any, name: str | None = None) -> str:
        return self.sfn.start_execution(
            stateMachineArn=self.state_machine_arn(workflow),
            name=name or f"local-{uuid.uuid4().hex[:12]}",
            input=json.dumps(execution_input),
        )["executionArn"]

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        events, token = [], None
        while True:
            kwargs = {"executionArn": execution_arn, "maxResults": 1000}
            if token:
                kwargs["nextToken"] = token
            page = self.sfn.get_execution_history(**kwargs)
            events.extend(page["events"])
            token = page.get("nextToken")
            if not token:
                return events

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
        output = described.get("output")
        return ExecutionResult(
            arn=execution_arn,
            status=described["status"],
            output=json.loads(output) if output else None,
            error=described.get("error"),
            cause=described.get("cause"),
            history=self.history(execution_arn),
            seconds=time.monotonic() - started,
        )

    def run(self, workflow: str, execution_input: Any, **kwargs: Any) -> ExecutionResult:
        return self.wait(self.start(workflow, execution_input), **kwargs)

    # ---------------------------------------------------------------- state
    def dlq_messages(self, workflow: str = "parallel", queue_url: str | None = None) -> list[dict]:
        """Every message in the DLQ, left in the queue (received, then made visible again)."""
        url = queue_url or self.queue_url(workflow)
        messages, handles = [], []
        while True:
            got = self.sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300
            ).get("Messages", [])
            if not got:
                break
            for m in got:
                messages.append(json.loads(m["Body"]))
                handles.append(m["ReceiptHandle"])
        for i in range(0, len(handles), 10):
            self.sqs.change_message_visibility_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": h, "VisibilityTimeout": 0}
                    for n, h in enumerate(handles[i : i + 10])
                ],
            )
        return messages

    def status_record(self, batch_id: str, workflow: str = "parallel") -> dict[str, Any] | None:
        from lambdas.fanout_common.final_status import read_status  # noqa: PLC0415

        return read_status(self.dynamodb, self.table_name(workflow), batch_id)

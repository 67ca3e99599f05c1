"""Fixtures of the completion-ledger tests: a DynamoDB emulator over HTTP (moto server on loopback),
in-process moto for handler tests, and one cdk synth of the ledger stack per session."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.config import Config
from moto import mock_aws
from moto.server import ThreadedMotoServer

from fanout_kit.local.dynamodb_contention import dynamodb_contention
from fanout_kit.local.moto_fixes import serialized_dynamodb_writes
from tests.ledger.ledger_tables import create_ledger_table, create_status_table

REGION = "eu-west-1"
CONTENTION_WINDOW_SECONDS = 0.003


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto server on loopback, in this process. Its DynamoDB backend is made safe for concurrent
    requests by ``moto_fixes.serialized_dynamodb_writes`` (each write applied atomically, reads
    never see half a write), the same fix the local engine uses; request handling itself stays
    concurrent, so the contention model (``contention`` fixture) can hold items in flight while
    other requests run. Client-side concurrency (threads, HTTP, connection pools) stays real."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log line per request
    with serialized_dynamodb_writes():
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


@pytest.fixture
def contention() -> Iterator[Any]:
    """The DynamoDB contention model (fanout_kit/local/dynamodb_contention.py) on, for one test:
    transactions hold their items for a few milliseconds and cancel each other."""
    with dynamodb_contention(window_seconds=CONTENTION_WINDOW_SECONDS) as model:
        yield model


@pytest.fixture(scope="session")
def http_dynamodb(moto_endpoint: str) -> Any:
    """A DynamoDB client of the emulator over HTTP, shareable by many threads."""
    return boto3.client(
        "dynamodb",
        region_name=REGION,
        endpoint_url=moto_endpoint,
        config=Config(max_pool_connections=64, retries={"mode": "standard", "max_attempts": 3}),
    )


@pytest.fixture
def aws() -> Iterator[SimpleNamespace]:
    """In-process moto with a ledger table and a status table."""
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        yield SimpleNamespace(
            dynamodb=dynamodb,
            ledger_table=create_ledger_table(dynamodb, "ledger"),
            status_table=create_status_table(dynamodb, "status"),
        )


class LambdaContext:
    function_name = "test-function"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:eu-west-1:123456789012:function:test-function"
    aws_request_id = "00000000-0000-0000-0000-000000000000"


class FakeLambdaClient:
    """Stands in for boto3's Lambda client: Invoke runs UpdateFinalStatus's handler in process
    (against the moto status table), so finalization is the real code path minus the Lambda service."""

    def __init__(self) -> None:
        self.invocations: list[dict[str, Any]] = []
        self.fail_next = 0

    def invoke(self, FunctionName: str, InvocationType: str, Payload: bytes) -> dict[str, Any]:
        import io

        from fanout_kit.shared.handlers import update_final_status

        event = json.loads(Payload)
        self.invocations.append(event)
        if self.fail_next:
            self.fail_next -= 1
            return {"StatusCode": 200, "FunctionError": "Unhandled", "Payload": io.BytesIO(b'{"errorType": "Boom"}')}
        update_final_status._dynamodb.cache_clear()
        result = update_final_status.handler(event, LambdaContext())
        return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(result).encode())}


@pytest.fixture
def handler_env(aws: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Environment of the ledger Lambdas, wired to in-process moto and the fake Lambda client."""
    from fanout_kit.patterns.completion_ledger import runtime as ledger_runtime

    fake = FakeLambdaClient()
    for key, value in {
        "LEDGER_TABLE_NAME": aws.ledger_table,
        "LEDGER_FAILURE_THRESHOLD": "0",
        "LEDGER_TTL_DAYS": "7",
        "LEDGER_DEADLINE_MINUTES": "60",
        "FINALIZER_FUNCTION_NAME": "UpdateFinalStatus",
        "STATUS_TABLE_NAME": aws.status_table,
        "FANOUT_ENV": "test",
        # the tests read the EMF lines: on, whatever a CLI test run earlier in this process set
        # (fanout_kit.cli.handler_logs.quiet_handler_logs sets it for its view)
        "POWERTOOLS_METRICS_DISABLED": "false",
    }.items():
        monkeypatch.setenv(key, value)
    ledger_runtime.dynamodb_client.cache_clear()
    monkeypatch.setattr(ledger_runtime, "lambda_client", lambda: fake)
    aws.lambda_client = fake
    aws.context = LambdaContext()
    yield aws
    ledger_runtime.dynamodb_client.cache_clear()


@pytest.fixture(scope="session")
def ledger_synth(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """Synthesize the dev ledger stack once, with the cdk-nag v3 plugin (fails on findings)."""
    from aws_cdk import App, Environment, Validations
    from cdk_nag import AwsSolutionsChecks

    from stacks.completion_ledger_stack import CompletionLedgerStack
    from stacks.config import load_environment, read_cdk_context

    outdir = tmp_path_factory.mktemp("ledger-synth")
    context = read_cdk_context()
    cfg = load_environment(context, "dev")
    app = App(outdir=str(outdir), context=context)
    stack = CompletionLedgerStack(
        app, "FanOut-dev-CompletionLedger", cfg=cfg, env=Environment(account=cfg.account, region=cfg.region)
    )
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    app.synth()
    template = json.loads((Path(outdir) / f"{stack.stack_name}.template.json").read_text())
    report = json.loads((Path(outdir) / "validation-report.json").read_text())
    return SimpleNamespace(template=template, report=report, outdir=Path(outdir), cfg=cfg, stack_name=stack.stack_name)

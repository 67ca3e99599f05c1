"""A "deployed environment" for the ops CLI: a moto server over real HTTP on loopback, running in
this process so that the project's real handlers serve its Lambda invokes, with the synthesized
workflow deployed into it by the local engine (server mode) and a CloudFormation stack of the
real name whose Outputs carry the local ARNs, URLs and table names. Used by the tests
(``conftest.py``) and by ``transcript.py``."""

from __future__ import annotations

import json
import logging
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from moto.server import ThreadedMotoServer

from fanout_kit.local.engine import LocalEngine
from fanout_kit.local.moto_fixes import serialized_dynamodb_writes


def _is_lambda_invoke(environ: dict[str, Any]) -> bool:
    path = environ.get("PATH_INFO", "")
    return path.startswith("/2015-03-31/functions/") and path.rstrip("/").endswith("/invocations")


class SerializedApp:
    """moto is not thread-safe: one request at a time (as tests/ledger/conftest.py does).

    Except Lambda Invoke: its handler runs inside the request and calls DynamoDB/SQS on this
    same server, which would wait for the lock forever. The handlers' own calls are serialized
    like every other request, and DynamoDB writes are also serialized inside moto
    (``serialized_dynamodb_writes``), so state stays consistent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict, start_response: Any) -> Any:
        if _is_lambda_invoke(environ):
            return list(self.app(environ, start_response))
        with self.lock:
            return list(self.app(environ, start_response))


@contextmanager
def moto_server() -> Iterator[str]:
    """Start a threaded moto server on 127.0.0.1 (free port); yields its endpoint URL."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log line per request
    with ExitStack() as stack:
        stack.enter_context(serialized_dynamodb_writes())
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        stack.callback(server.stop)
        server._server.app = SerializedApp(server._server.app)
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"


def reset(endpoint: str) -> None:
    """Forget every resource of the server (between tests)."""
    request = urllib.request.Request(f"{endpoint}/moto-api/reset", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def create_stack(engine: LocalEngine, workflow: str) -> str:
    """A CloudFormation stack named like the deployed one, whose Outputs are the local values: the
    synthesized template's outputs as the engine resolved them (``engine.deployment``), one cheap
    SSM parameter as its resource (moto's CloudFormation supports it)."""
    name = engine.deployment(workflow).stack_name
    template = {
        "Resources": {
            "DeployedMarker": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {"Name": f"/fanout/{name}/deployed", "Type": "String", "Value": "moto"},
            }
        },
        "Outputs": {key: {"Value": value} for key, value in engine.deployment(workflow).outputs.items()},
    }
    engine.client("cloudformation").create_stack(StackName=name, TemplateBody=json.dumps(template))
    return name


@contextmanager
def deployed(
    app: Any, endpoint: str, workflow: str = "parallel", *, sleep_retries: bool = False
) -> Iterator[LocalEngine]:
    """A fresh server state with ``workflow`` of ``app`` deployed into it (stack included)."""
    reset(endpoint)
    with LocalEngine(
        app, workflows=(workflow,), sleep_retries=sleep_retries, endpoint_url=endpoint
    ) as engine:
        create_stack(engine, workflow)
        yield engine

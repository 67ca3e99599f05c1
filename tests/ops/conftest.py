"""Fixtures of the ops CLI tests: one moto server over HTTP on loopback per session (in this
process: the real handlers serve its Lambda invokes), a fresh "deployed" dev environment per test
(the synthesized workflow, plus a CloudFormation stack of the real name with the local outputs),
and the CLI run in-process against that endpoint."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from fanout_kit.cli.main import main
from tests.ops.harness import deployed, moto_server

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "batch.json").read_text())


@pytest.fixture(scope="session")
def ops_endpoint() -> Iterator[str]:
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def deployment(dev_app, ops_endpoint) -> Iterator[SimpleNamespace]:
    """The dev Parallel workflow "deployed" into the server (a fresh server state per test)."""
    with deployed(dev_app, ops_endpoint, "parallel") as engine:
        yield SimpleNamespace(engine=engine, endpoint=ops_endpoint, sfn=engine.sfn)


@pytest.fixture
def map_deployment(dev_app, ops_endpoint) -> Iterator[SimpleNamespace]:
    with deployed(dev_app, ops_endpoint, "map") as engine:
        yield SimpleNamespace(engine=engine, endpoint=ops_endpoint, sfn=engine.sfn)


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, ops_endpoint):
    """``cli("start", FILE)`` runs ``python -m fanout_kit --endpoint-url URL start FILE`` in-process."""

    def run(*argv: str, endpoint: str | None = ops_endpoint) -> Run:
        capsys.readouterr()
        prefix = ["--endpoint-url", endpoint] if endpoint else []
        code = main([*prefix, *argv])
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run


@pytest.fixture
def batch_file(tmp_path):
    """``batch_file("b-1", NotifyCustomer={"mode": "permanent"})`` -> path of an input file."""

    def make(batch_id: str, **faults) -> str:
        data = copy.deepcopy(EXAMPLE)
        data["batchId"] = batch_id
        for task, switch in faults.items():
            data["tasks"][task]["simulateFailure"] = switch
        path = tmp_path / f"{batch_id}.json"
        path.write_text(json.dumps(data, indent=2))
        return str(path)

    return make


@pytest.fixture
def fix_downstream(monkeypatch):
    """Call it to "fix" what made the tasks fail: the handlers' fault switch is turned off (the
    DLQ messages, and so the redrive, still carry the original input with its switch)."""

    def fix() -> None:
        import fanout_runtime.faults as faults  # the module the example functions call it from

        monkeypatch.setattr(faults, "raise_simulated_failure", lambda payload, name, attempt: None)

    return fix

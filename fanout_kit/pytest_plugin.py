"""The kit's pytest plugin (entry point ``pytest11``: active once ``fanout-kit[local]`` is
installed): test your own CDK app's fan-out workflows on the local engine.

    def test_a_permanent_failure_is_dead_lettered(fanout_app):
        result = fanout_app.run({"batchId": "b-1", "tasks": {...}}, faults={"SendWelcome": "permanent"})
        assert result.status == "FAILED"
        assert result.dlq_messages[0]["task"] == "SendWelcome"

``fanout_app`` synthesizes the app once per test session: the folder given by ``--fanout-app``
or the ini option ``fanout_app`` (relative to the rootdir), else the rootdir itself (the folder
with your ``cdk.json``); a synthesized cloud assembly works too. Each ``run`` deploys the stack
on a fresh local engine (moto; the app's own functions in sandboxes as strict as Lambda,
``fanout_kit/local/sandbox.py``), runs one execution to its end and returns a ``RunResult``.
``fanout_app.ledger(children=..., fail=[...])`` runs a batch through a CompletionLedger.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass
class RunResult:
    """One execution of a workflow on the local engine, once it ended."""

    status: str  # SUCCEEDED, FAILED, TIMED_OUT, ABORTED
    error: str | None
    cause: str | None
    output: Any
    execution_arn: str
    status_record: dict[str, Any] | None  # the batch's final status record (None: never written)
    dlq_messages: list[Any]  # the dead-letter queue's message bodies (parsed JSON)
    attempts: dict[str, int]  # task state -> attempts in this execution's history ("Run " dropped)
    map_run_counts: dict[str, int] | None  # the Map run's item counts (map workflows)
    history: list[dict[str, Any]]  # the execution's history events
    invocations: dict[str, int] = field(default_factory=dict)  # function logical id -> invocations
    logs: list[Any] = field(default_factory=list)  # the app's own functions' logs, one per invocation

    def logs_of(self, function_prefix: str) -> str:
        """The log text of every invocation of the functions whose logical id starts with it."""
        return "".join(entry.text for entry in self.logs if entry.function.startswith(function_prefix))


def _faults(faults: Mapping[Any, str] | None) -> tuple[dict, dict]:
    """{"TASK": "transient:2", 7: "permanent"} -> (task faults, item faults) of the engine."""
    from fanout_kit.cli.faults import parse_item_fault, parse_task_fault
    from fanout_kit.local.moto_lambda import InjectedFault

    tasks: dict[str, InjectedFault] = {}
    items: dict[int, InjectedFault] = {}
    for key, mode in (faults or {}).items():
        if isinstance(key, int):
            index, fault = parse_item_fault(f"{key}={mode}")
            items[index] = InjectedFault(fault.mode, fault.times)
        else:
            fault = parse_task_fault(f"{key}={mode}")
            tasks[fault.task] = InjectedFault(fault.mode, fault.times)
    return tasks, items


class FanoutApp:
    """A synthesized CDK app: run its workflows on the local engine (``run``, ``ledger``)."""

    def __init__(self, assembly: Path, *, stack: str | None = None):
        self.assembly = Path(assembly)
        self.stack = stack

    def load(self, workflow: str | None = None, stack: str | None = None) -> tuple[Any, Any]:
        from fanout_kit.local.app_source import load_app

        return load_app(self.assembly, stack=stack or self.stack, kind=workflow)

    def run(
        self,
        execution_input: Any,
        *,
        faults: Mapping[Any, str] | None = None,
        workflow: str | None = None,
        stack: str | None = None,
        manifest: tuple[str, bytes] | None = None,
        sleep_retries: bool = False,
        timeout_seconds: float = 600,
    ) -> RunResult:
        """Run one execution. ``faults``: task name -> mode and/or Map item index -> mode
        (``transient:N``, ``permanent``, ``fatal``, ``hang``), injected into the app's own
        functions without touching their code. ``manifest``: (file name, body) uploaded to the
        Map's batch bucket and set as the input's ``manifest``. Retry waits are recorded, not
        slept, unless ``sleep_retries``."""
        from fanout_kit.local.engine import LocalEngine
        from fanout_kit.local.history import task_attempts
        from fanout_kit.ops.watch import batch_id_of

        app, found = self.load(workflow, stack)
        kind = found.kind
        if kind == "ledger":
            raise ValueError(f"{found.path} is a CompletionLedger: use fanout_app.ledger(...)")
        task_faults, item_faults = _faults(faults)
        with LocalEngine(app, workflows=(kind,), sleep_retries=sleep_retries) as engine:
            engine.router.task_faults.update(task_faults)
            engine.router.item_faults.update(item_faults)
            if manifest is not None:
                name, body = manifest
                execution_input = {**execution_input,
                                   "manifest": engine.upload_manifest(f"manifests/{name}", body, kind)}
            result = engine.run(kind, execution_input, timeout_seconds=timeout_seconds)
            batch_id = batch_id_of(result.described, result.history)
            return RunResult(
                status=result.status,
                error=result.error,
                cause=result.cause,
                output=result.output,
                execution_arn=result.arn,
                status_record=engine.status_record(batch_id, kind) if batch_id else None,
                dlq_messages=engine.dlq_messages(kind),
                attempts={state.removeprefix("Run "): n for state, n in task_attempts(result.history).items()},
                map_run_counts=engine.map_run_counts(result.arn) if kind == "map" else None,
                history=result.history,
                invocations={fid: engine.router.count(fid) for fid in engine.router.functions},
                logs=list(engine.sandboxes.logs) if engine.sandboxes is not None else [],
            )

    def ledger(self, *, children: int, fail: Sequence[int] = (), stack: str | None = None,
               concurrency: int = 4, duplicate: bool = False, source: str = "sqs",
               batch_id: str | None = None, visibility_timeout: int = 1) -> dict[str, Any]:
        """Send ``children`` child messages of one batch through the app's CompletionLedger (its
        SQS or Kinesis intake, the consumers as Lambda's event source mappings run them); the
        outcome: ``ledger_status``, ``status_record``, ``update_final_status_invocations``,
        ``processing_invocations``, ... ``visibility_timeout``: the queues' (seconds; 1 by default
        for a fast redelivery of failed children)."""
        from fanout_kit.local.ledger_run import run_ledger_batch

        app, _found = self.load("ledger", stack)
        return run_ledger_batch(app, children=children, fail=list(fail), concurrency=concurrency,
                               duplicate=duplicate, source=source, batch_id=batch_id,
                               visibility_timeout=visibility_timeout)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fanout", "fan-out kit: your CDK app on the local engine")
    group.addoption("--fanout-app", metavar="PATH", default=None,
                    help="the CDK app (folder with cdk.json, or a cloud assembly) for the fanout_app fixture")
    parser.addini("fanout_app", "the CDK app folder for the fanout_app fixture (default: the rootdir)", default="")
    parser.addini("fanout_stack", "the stack holding the workflow, when several do", default="")


def _app_folder(starts: list[Path]) -> Path:
    for start in starts:
        for folder in (start, *start.parents):
            if (folder / "cdk.json").is_file():
                return folder
    raise pytest.UsageError(
        f"fanout_app: no cdk.json in {starts[0]} or above; pass --fanout-app PATH or set the ini option fanout_app"
    )


@pytest.fixture(scope="session")
def fanout_app(request: pytest.FixtureRequest) -> Iterator[FanoutApp]:
    """Your CDK app, synthesized once per test session (see the module doc)."""
    from fanout_kit.local.app_source import synth_app

    config = request.config
    given = config.getoption("fanout_app") or config.getini("fanout_app")
    if given:
        path = Path(given) if Path(given).is_absolute() else config.rootpath / given
    else:  # the app folder around the tests: the nearest folder with a cdk.json
        path = _app_folder([config.rootpath, Path(config.invocation_params.dir)])
    stack = config.getini("fanout_stack") or None
    if (path / "manifest.json").is_file():
        yield FanoutApp(path, stack=stack)
        return
    with tempfile.TemporaryDirectory(prefix="fanout-app-") as outdir:
        synth_app(path, outdir, env={**os.environ})
        yield FanoutApp(Path(outdir), stack=stack)


__all__ = ["FanoutApp", "RunResult", "fanout_app"]

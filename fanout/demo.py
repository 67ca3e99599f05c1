"""``fanout run``: the main job, on the embedded engine. Synthesizes the app, runs one batch on the
synthesized state machine with the real handlers, shows each task live, prints the outcome."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from fanout.faults import apply_task_faults, parse_lambda_fault, parse_task_fault
from fanout.local.history import ProgressTracker, state_transitions, task_attempts

STYLE = {
    "pending": "dim",
    "running": "cyan",
    "retrying": "yellow",
    "succeeded": "green",
    "dead-lettering": "magenta",
    "dead-lettered": "red",
    "failed (DLQ send failed)": "bold red",
    "skipped": "dim",
}


def _table(tracker: ProgressTracker, title: str) -> Table:
    table = Table(title=title, expand=False)
    for column in ("task", "status", "attempts", "last error"):
        table.add_column(column)
    for view in tracker.tasks.values():
        table.add_row(
            view.name,
            f"[{STYLE.get(view.status, '')}]{view.status}[/]",
            str(view.attempts),
            view.last_error or "",
        )
    if tracker.final_state:
        table.caption = f"now: {tracker.final_state}"
    return table


def load_input(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text() if path != "-" else os.sys.stdin.read()
    except OSError as exc:
        raise SystemExit(f"input file {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"input file {path}: not valid JSON: {exc.msg} at line {exc.lineno}") from None


def run_demo(args: Any) -> int:
    console = Console()
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")  # keep handler logs out of the view
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")  # no X-Ray daemon locally
    logging.getLogger("aws_lambda_powertools").setLevel(logging.WARNING)
    task_faults = [parse_task_fault(f) for f in args.fail or []]
    lambda_faults = [parse_lambda_fault(f) for f in args.lambda_fault or []]
    execution_input = apply_task_faults(load_input(args.input), task_faults)

    from fanout.local.engine import LocalEngine
    from fanout.local.template import synthesize

    started = time.monotonic()
    with console.status(f"synthesizing the CDK app ({args.env}) with cdk-nag..."):
        app = synthesize(args.env)
    synth_seconds = time.monotonic() - started
    template = app.template("parallel")
    task_names = [
        name
        for name in (execution_input.get("tasks") or {})
        if isinstance(execution_input.get("tasks"), dict)
    ]
    with LocalEngine(app, sleep_retries=not args.no_sleep) as engine:
        for function, codes in lambda_faults:
            engine.inject_lambda_service_faults(function, codes)
        if args.dlq_send_failures:
            (queue_id,) = engine.stacks["parallel"].queues
            engine.inject_sqs_send_failures(queue_id, args.dlq_send_failures)
        configured = [
            n for lid, n in engine.stacks["parallel"].functions.items() if lid.startswith("Task")
        ]
        tracker = ProgressTracker(configured or task_names)
        arn = engine.start("parallel", execution_input, name=args.name)
        title = f"batch {execution_input.get('batchId', '(from execution name)')} on {args.env}"
        with Live(_table(tracker, title), console=console, refresh_per_second=8) as live:

            def on_event(event: dict[str, Any]) -> None:
                tracker.feed(event)
                live.update(_table(tracker, title))

            result = engine.wait(arn, on_event=on_event)
        batch_id = _batch_id(result.history) or execution_input.get("batchId")
        record = engine.status_record(batch_id) if batch_id else None
        dlq = engine.dlq_messages()
        invocations = len(engine.router.invocations)
        waits = list(engine.retry_clock.waits)

    color = "green" if result.status == "SUCCEEDED" else "red"
    console.print(f"\nexecution [bold {color}]{result.status}[/]  {result.arn}")
    if result.error:
        console.print(f"  error: [bold]{result.error}[/]\n  cause: {result.cause}")
    console.print(f"final status record: {json.dumps(record, sort_keys=True) if record else 'none'}")
    attempts = task_attempts(result.history)
    console.print(
        "attempts: "
        + ", ".join(f"{state.removeprefix('Run ')}={n}" for state, n in sorted(attempts.items()))
    )
    console.print(f"dead-letter queue: {len(dlq)} message(s)")
    for message in dlq:
        cause = message.get("cause", "")
        try:
            cause = json.loads(cause).get("errorMessage", cause)
        except (ValueError, AttributeError):
            pass
        console.print(
            f"  - task={message['task']} batch={message['batchId']} error={message['error']} "
            f"cause={cause!r}\n    input={json.dumps(message['input'])}\n"
            f"    execution={message['executionArn']}"
        )
    verb = "slept" if not args.no_sleep else "recorded, not slept"
    console.print(
        f"retry waits ({verb}): {', '.join(f'{w:.2f}s' for w in waits) or 'none'}\n"
        f"state transitions: {state_transitions(result.history)}, history events: "
        f"{len(result.history)}, Lambda invocations: {invocations}\n"
        f"wall time: synth {synth_seconds:.1f}s, execution {result.seconds:.2f}s "
        f"(template {len(json.dumps(template)) // 1024} KiB)"
    )
    return 0 if result.status == "SUCCEEDED" else 1


def _batch_id(history: list[dict[str, Any]]) -> str | None:
    for event in history:
        if event["type"] == "TaskStateExited" and event["stateExitedEventDetails"]["name"] == "ValidateInput":
            return json.loads(event["stateExitedEventDetails"]["output"]).get("batchId")
    return None

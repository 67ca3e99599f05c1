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

from fanout.faults import (
    apply_item_faults,
    apply_task_faults,
    parse_item_fault,
    parse_lambda_fault,
    parse_task_fault,
)
from fanout.local.history import ProgressTracker, state_transitions, task_attempts
from fanout.ops.watch import counts_line
from fanout.views import task_table


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
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")  # no EMF lines in the view
    logging.getLogger("aws_lambda_powertools").setLevel(logging.WARNING)
    lambda_faults = [parse_lambda_fault(f) for f in args.lambda_fault or []]
    execution_input = load_input(args.input)
    if args.workflow == "parallel":
        execution_input = apply_task_faults(execution_input, [parse_task_fault(f) for f in args.fail or []])
    else:
        execution_input = apply_item_faults(execution_input, [parse_item_fault(f) for f in args.fail_item or []])

    from fanout.local.engine import LocalEngine
    from fanout.local.template import synthesize

    started = time.monotonic()
    with console.status(f"synthesizing the CDK app ({args.env}) with cdk-nag..."):
        app = synthesize(args.env)
    synth_seconds = time.monotonic() - started
    workflow = args.workflow
    with LocalEngine(app, workflows=(workflow,), sleep_retries=not args.no_sleep) as engine:
        for function, codes in lambda_faults:
            engine.inject_lambda_service_faults(function, codes, workflow=workflow)
        if args.dlq_send_failures:
            (queue_id,) = engine.stacks[workflow].queues
            engine.inject_sqs_send_failures(queue_id, args.dlq_send_failures, workflow=workflow)
        if getattr(args, "manifest", None):
            path = Path(args.manifest)
            execution_input["manifest"] = engine.upload_manifest(f"manifests/{path.name}", path.read_bytes())
        arn = engine.start(workflow, execution_input, name=args.name)
        title = f"batch {execution_input.get('batchId', '(from execution name)')} on {args.env}"
        if workflow == "parallel":
            result = _follow_tasks(console, engine, arn, title)
        else:
            result = _follow_items(console, engine, arn, title, execution_input.get("batchId"))
        batch_id = _batch_id(result.history) or execution_input.get("batchId")
        record = engine.status_record(batch_id, workflow) if batch_id else None
        map_run = engine.map_run_counts(result.arn) if workflow == "map" else None
        dlq = engine.dlq_messages(workflow)
        invocations = len(engine.router.invocations)
        waits = list(engine.retry_clock.waits)
        adaptations = list(engine.adaptations)

    color = "green" if result.status == "SUCCEEDED" else "red"
    console.print(f"\nexecution [bold {color}]{result.status}[/]  {result.arn}")
    if result.error:
        console.print(f"  error: [bold]{result.error}[/]\n  cause: {result.cause}")
    console.print(f"final status record: {json.dumps(record, sort_keys=True) if record else 'none'}")
    if map_run:
        console.print(counts_line(map_run))
    attempts = task_attempts(result.history)
    console.print(
        "attempts (this execution's history): "
        + ", ".join(f"{state.removeprefix('Run ')}={n}" for state, n in sorted(attempts.items()))
    )
    console.print(f"dead-letter queue: {len(dlq)} message(s)")
    for message in dlq[:10]:
        console.print("  - " + describe_dlq_message(message))
    if len(dlq) > 10:
        console.print(f"  ... and {len(dlq) - 10} more")
    verb = "slept" if not args.no_sleep else "recorded, not slept"
    console.print(
        f"retry waits ({verb}): {', '.join(f'{w:.2f}s' for w in waits[:20]) or 'none'}"
        + (" ..." if len(waits) > 20 else "")
    )
    for note in adaptations:
        console.print(f"[dim]local adaptation: {note}[/]")
    console.print(
        f"state transitions (parent): {state_transitions(result.history)}, history events: "
        f"{len(result.history)}, Lambda invocations: {invocations}\n"
        f"wall time: synth {synth_seconds:.1f}s, execution {result.seconds:.2f}s"
    )
    return 0 if result.status == "SUCCEEDED" else 1


def describe_dlq_message(message: dict[str, Any]) -> str:
    """One line (two for a task) per DLQ message, for people."""
    cause = message.get("cause", "")
    try:
        cause = json.loads(cause).get("errorMessage", cause)
    except (ValueError, AttributeError):
        pass
    head = f"task={message.get('task')} batch={message.get('batchId')} error={message.get('error')} cause={cause!r}"
    if "items" in message:
        indexes = [i.get("index") for i in message["items"]]
        return f"{head}\n    items={indexes} execution={message.get('executionArn')}"
    return f"{head}\n    input={json.dumps(message.get('input'))}\n    execution={message.get('executionArn')}"


def _follow_tasks(console: Console, engine: Any, arn: str, title: str) -> Any:
    configured = [n for lid, n in engine.stacks["parallel"].functions.items() if lid.startswith("Task")]
    tracker = ProgressTracker(configured)
    with Live(task_table(tracker, title), console=console, refresh_per_second=8) as live:

        def on_event(event: dict[str, Any]) -> None:
            tracker.feed(event)
            live.update(task_table(tracker, title))

        return engine.wait(arn, on_event=on_event)


def _follow_items(console: Console, engine: Any, arn: str, title: str, batch_id: str | None) -> Any:
    """A progress bar of items done / failed / total: the map run's own counts while it runs."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("failed {task.fields[failed]}"), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task(title, total=None, failed=0)

        def on_event(event: dict[str, Any]) -> None:
            counts = engine.map_run_counts(arn)
            if counts:
                failed = counts["failed"] + counts["timedOut"] + counts["aborted"]
                progress.update(bar, total=counts["total"] or None, completed=counts["succeeded"] + failed,
                                failed=failed)

        result = engine.wait(arn, on_event=on_event, poll_seconds=0.2)
        on_event({})
        return result


def _batch_id(history: list[dict[str, Any]]) -> str | None:
    for event in history:
        if event["type"] == "TaskStateExited" and event["stateExitedEventDetails"]["name"] in ("ValidateInput", "PrepareBatch"):
            return json.loads(event["stateExitedEventDetails"]["output"]).get("batchId")
    return None

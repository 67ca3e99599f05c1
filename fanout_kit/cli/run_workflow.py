"""``fanout run``: the main job, on the embedded engine. Synthesizes the app, runs one batch on the
synthesized state machine with the real handlers, shows each task live, prints the outcome."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from fanout_kit.shared.errors import CliError
from fanout_kit.cli.handler_logs import quiet_handler_logs
from fanout_kit.cli.faults import (
    apply_item_faults,
    apply_task_faults,
    parse_item_fault,
    parse_lambda_fault,
    parse_task_fault,
)
from fanout_kit.local.moto_lambda import InjectedFault
from fanout_kit.local.history import ProgressTracker, state_transitions, task_attempts
from fanout_kit.ops.watch import batch_id_of, counts_line
from fanout_kit.ops.results import parallel_outcomes, save_local_batch, summary_line
from fanout_runtime.faults import AMBIGUOUS_MODES
from fanout_kit.cli.views import PlainTaskLog, describe, error_line, make_console, task_table


# --dlq-send-failures makes the DLQ's SendMessage fail; only a task that ends dead-lettered sends.
DEAD_LETTERING_MODES = ("permanent", "fatal", *AMBIGUOUS_MODES)  # ambiguous: unless retry.ambiguous retries them
MANIFEST_PLACEHOLDER_BUCKET = "local-batch-bucket"  # validated before synth; the real one after


@dataclass
class RunPlan:
    """Everything ``fanout run`` checks before it synthesizes (a bad flag, environment or input
    file is answered in well under a second, with one line)."""

    cfg: Any
    workflow: str
    name: str
    execution_input: Any
    lambda_faults: list[tuple[str, list[str]]]
    manifest: tuple[str, bytes] | None = None  # (S3 key, body) to upload, with --manifest
    # --app: faults the engine injects into the app's own functions (fanout_kit.local.moto_lambda)
    task_faults: dict[str, Any] = field(default_factory=dict)
    item_faults: dict[int, Any] = field(default_factory=dict)


def plan_run(args: Any) -> RunPlan:
    from fanout_kit.ops.inputs import check_size, label_of, read_input, validate
    from fanout_kit.ops.aws import environment
    from fanout_kit.ops.start import check_name

    if getattr(args, "app", None):
        return _plan_app_run(args)
    if getattr(args, "stack", None):
        raise CliError(f"--stack {args.stack}: needs --app PATH (a stack of your own CDK app)")
    workflow = args.workflow = args.workflow or "parallel"
    if workflow == "ledger":
        raise CliError("--workflow ledger: run a completion-ledger batch with fanout ledger")
    if workflow == "parallel" and args.fail_item:
        raise CliError(
            f"--fail-item {args.fail_item[0]}: applies to the Map workflow's items (--workflow map); "
            "make a Parallel task fail with --fail TASK=MODE"
        )
    if workflow == "parallel" and args.manifest:
        raise CliError(f"--manifest {args.manifest}: needs --workflow map (a manifest lists Map items)")
    if workflow == "map" and args.fail:
        raise CliError(
            f"--fail {args.fail[0]}: applies to the Parallel workflow's tasks; make a Map item fail "
            "with --fail-item INDEX=MODE"
        )
    example = ", e.g. --fail NotifyCustomer=permanent" if workflow == "parallel" else ", e.g. --fail-item 7=permanent"
    task_faults, item_faults, lambda_faults = _parse_faults(args, example)

    cfg = environment(args.env)
    name = check_name(args.name) if args.name else f"local-{uuid.uuid4().hex[:12]}"
    label = label_of(args.input)
    execution_input = read_input(args.input)
    manifest = None
    if args.manifest:
        manifest = _read_manifest(args.manifest, cfg)
        if isinstance(execution_input, dict):
            execution_input = {
                **execution_input,
                "manifest": {"bucket": MANIFEST_PLACEHOLDER_BUCKET, "key": manifest[0]},
            }
    validate(workflow, execution_input, cfg, name, label)
    if workflow == "parallel":
        execution_input = apply_task_faults(execution_input, task_faults)
    else:
        execution_input = apply_item_faults(execution_input, item_faults)
    check_size(execution_input, label)  # the fault switches add a few bytes
    return RunPlan(cfg, workflow, name, execution_input, lambda_faults, manifest)


def _parse_faults(args: Any, example: str) -> tuple[list, list, list]:
    """--fail, --fail-item and --lambda-fault parsed (one line each when wrong), and
    --dlq-send-failures checked against them (``example``: the message's end, a fault that dead-letters)."""
    if args.dlq_send_failures < 0:
        raise CliError(f"--dlq-send-failures {args.dlq_send_failures}: must be 0 or more")
    task_faults = [parse_task_fault(f) for f in args.fail or []]
    item_faults = [parse_item_fault(f) for f in args.fail_item or []]
    lambda_faults = [parse_lambda_fault(f) for f in args.lambda_fault or []]
    faults = task_faults + [fault for _, fault in item_faults]
    if args.dlq_send_failures and not any(f.mode in DEAD_LETTERING_MODES for f in faults):
        raise CliError(
            f"--dlq-send-failures {args.dlq_send_failures}: nothing is dead-lettered in this run, so "
            f"no DLQ send can fail; add a permanent or fatal failure{example}"
        )
    return task_faults, item_faults, lambda_faults


def _plan_app_run(args: Any) -> RunPlan:
    """``fanout run --app PATH``: the checks that need no synth (flags, input file, manifest
    format); the faults are injected by the engine into the app's own functions (any code), the
    input is validated by the workflow's own first state."""
    from fanout_kit.ops.inputs import check_size, label_of, read_input
    from fanout_kit.ops.start import check_name

    task_faults, item_faults, lambda_faults = _parse_faults(args, " (--fail TASK=permanent or --fail-item 7=permanent)")
    if args.workflow == "parallel" and (args.fail_item or args.manifest):
        flag = "--fail-item" if args.fail_item else "--manifest"
        raise CliError(f"{flag}: applies to a Map workflow's items (--workflow map)")
    if args.workflow in ("map", "ledger") and args.fail:
        raise CliError(f"--fail {args.fail[0]}: applies to a Parallel workflow's tasks; make a Map item fail with --fail-item INDEX=MODE")
    if args.workflow == "ledger":
        raise CliError("--workflow ledger: run a ledger batch with fanout ledger --app PATH")
    name = check_name(args.name) if args.name else f"local-{uuid.uuid4().hex[:12]}"
    label = label_of(args.input)
    execution_input = read_input(args.input)
    manifest = None
    if args.manifest:
        manifest = _read_app_manifest(args.manifest)
    if task_faults:
        apply_task_faults(execution_input, task_faults)  # checks each TASK is in the input; no payload change
    if item_faults and not args.manifest:
        apply_item_faults(execution_input, item_faults)  # checks each INDEX is an inline item
    check_size(execution_input, label)
    plan = RunPlan(None, args.workflow, name, execution_input, lambda_faults, manifest)
    plan.task_faults = {f.task: InjectedFault(f.mode, f.times) for f in task_faults}
    plan.item_faults = {index: InjectedFault(f.mode, f.times) for index, f in item_faults}
    return plan


def _read_app_manifest(path_text: str) -> tuple[str, bytes]:
    """(S3 key, body) of a --manifest file for another app (its PrepareBatch Lambda checks the
    items, with the app's own limits)."""
    from fanout_kit.patterns.distributed_map.manifest import _format_from_key

    path = Path(path_text)
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise CliError(f"--manifest {path_text}: {exc.strerror or exc}") from None
    if _format_from_key(path.name) is None:
        raise CliError(f"--manifest {path_text}: name a .json (array of items) or .csv (header row) file")
    return f"manifests/{path.name}", body


def _read_manifest(path_text: str, cfg: Any) -> tuple[str, bytes]:
    """(S3 key, body) of a --manifest file, checked with the PrepareBatch Lambda's own parser."""
    from fanout_runtime.errors import InvalidInput
    from fanout_kit.patterns.distributed_map.manifest import _format_from_key, count_items, parse_manifest

    path = Path(path_text)
    try:
        body = path.read_bytes()
    except OSError as exc:
        raise CliError(f"--manifest {path_text}: {exc.strerror or exc}") from None
    fmt = _format_from_key(path.name)
    if fmt is None:
        raise CliError(f"--manifest {path_text}: name a .json (array of items) or .csv (header row) file")
    try:
        where = f"--manifest {path_text}"
        items = parse_manifest(body, fmt, where, max_item_bytes=cfg.map.max_item_bytes)
        count_items(items, max_item_bytes=cfg.map.max_item_bytes, where=where)
    except InvalidInput as exc:
        raise CliError(str(exc)) from None
    return f"manifests/{path.name}", body


def run_demo(args: Any, console: Console | None = None) -> int:
    quiet_handler_logs()
    console = console or make_console()
    plan = plan_run(args)
    execution_input, workflow = plan.execution_input, plan.workflow

    from fanout_kit.local.engine import LocalEngine
    from fanout_kit.local.template import synthesize

    started = time.monotonic()
    if getattr(args, "app", None):
        from fanout_kit.local.app_source import load_app

        with console.status(f"synthesizing the CDK app {args.app}..."):
            app, found = load_app(args.app, stack=args.stack, kind=args.workflow)
        workflow = found.kind
        if workflow == "ledger":
            raise CliError(f"--app {args.app}: the workflow found is a CompletionLedger ({found.path}); "
                           "run it with fanout ledger --app PATH")
        if workflow == "parallel" and (plan.item_faults or plan.manifest):
            raise CliError(f"--fail-item/--manifest: the workflow of {found.stack} is a Parallel one ({found.path})")
        if workflow == "map" and plan.task_faults:
            raise CliError(f"--fail: the workflow of {found.stack} is a Distributed Map ({found.path}); use --fail-item")
        where = f"stack {found.stack}"
    else:
        with console.status(f"synthesizing the CDK app ({args.env}) with cdk-nag..."):
            app = synthesize(args.env)
        where = args.env
    synth_seconds = time.monotonic() - started
    with LocalEngine(app, workflows=(workflow,), sleep_retries=not args.no_sleep) as engine:
        engine.router.task_faults.update(plan.task_faults)
        engine.router.item_faults.update(plan.item_faults)
        for function, codes in plan.lambda_faults:
            try:
                engine.inject_lambda_service_faults(function, codes, workflow=workflow)
            except KeyError:
                known = ", ".join(sorted(engine.stacks[workflow].functions.values()))
                raise CliError(
                    f"--lambda-fault {function}=...: no function {function} in the {workflow} "
                    f"workflow; functions: {known}"
                ) from None
        if args.dlq_send_failures:
            (queue_id,) = engine.stacks[workflow].queues
            engine.inject_sqs_send_failures(queue_id, args.dlq_send_failures, workflow=workflow)
        if plan.manifest:
            execution_input = {**execution_input, "manifest": engine.upload_manifest(*plan.manifest)}
        arn = engine.start(workflow, execution_input, name=plan.name)
        title = f"batch {execution_input.get('batchId', plan.name)} on {where}"
        if workflow == "parallel":
            result = _follow_tasks(console, engine, arn, title)
        else:
            result = _follow_items(console, engine, arn, title, execution_input.get("batchId") or plan.name)
        batch_id = batch_id_of(result.described, result.history)
        record = engine.status_record(batch_id, workflow) if batch_id else None
        # for `fanout results BATCH_ID --local`, once this engine (and its state) is gone
        saved = save_local_batch(engine.client, engine.deployment(workflow), batch_id) if record else None
        map_run = engine.map_run_counts(result.arn) if workflow == "map" else None
        dlq = engine.dlq_peek(workflow)
        invocations = len(engine.router.invocations)
        measured = engine.measured_cost([result])
        waits = list(engine.retry_clock.waits)
        adaptations = list(engine.adaptations)

    color = "green" if result.status == "SUCCEEDED" else "red"
    console.print(f"\nexecution [bold {color}]{result.status}[/]  {result.arn}")
    if result.error:
        console.print(f"  error: {escape(error_line(result.error, result.cause))}")
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
        first, *rest = describe(message)
        console.print("  - " + escape(first))
        for line in rest:
            console.print("    " + escape(line))
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
        f"wall time: synth {synth_seconds:.1f}s{' (cached: app inputs unchanged)' if app.cached else ''}, "
        f"execution {result.seconds:.2f}s"
    )
    console.print(escape(measured.line()) + " [dim](fanout estimate for the forecast)[/]")
    if batch_id:
        total = map_run["total"] if map_run else len(parallel_outcomes([result.history], result.arn)) or None
        console.print(escape(summary_line(batch_id, workflow, record, f"fanout results {batch_id} --local", total)))
        if saved:
            console.print(f"[dim]results saved in {escape(str(saved))}[/]")
    return 0 if result.status == "SUCCEEDED" else 1


def _follow_tasks(console: Console, engine: Any, arn: str, title: str) -> Any:
    configured = [n for lid, n in engine.stacks["parallel"].functions.items() if lid.startswith("Task")] or [
        n for n in engine.stacks["parallel"].environment.get("TASK_NAMES", "").split(",") if n]  # another app
    tracker = ProgressTracker(configured)
    if not console.is_terminal:  # a pipe or a CI log: plain lines, then the final table
        log = PlainTaskLog(console)

        def on_plain_event(event: dict[str, Any]) -> None:
            tracker.feed(event)
            log.update(tracker)

        result = engine.wait(arn, on_event=on_plain_event)
        console.print(task_table(tracker, title))
        return result
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

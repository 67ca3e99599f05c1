"""``fanout ledger`` (and ``python -m fanout_kit.cli.run_ledger``): one completion-ledger batch
(SQS or Kinesis) on the embedded engine, on the terminal: the flags, the synthesis, a progress bar
of the ledger's counts while ``fanout_kit.local.ledger_run.run_ledger_batch`` runs the batch, then
its outcome printed (the ledger counts and status, whether UpdateFinalStatus ran, the status record,
what is left in the queues, the local adaptations, the wall time) and the exit code."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from rich.console import Console
from rich.markup import escape

from fanout_kit.shared.errors import CliError
from fanout_kit.cli.handler_logs import quiet_env, quiet_handler_logs
from fanout_kit.local.ledger_run import (
    DEFAULT_CONTENTION_WINDOW_MS,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_VISIBILITY_TIMEOUT,
    SOURCES,
    WORKFLOW,
    run_ledger_batch,
)
from fanout_kit.ops.results import summary_line

QUIET_ENV = quiet_env("WARNING")  # handler logs out of the view (fanout_kit.cli.handler_logs)


@contextmanager
def progress_bar(console: Console, batch_id: str, children: int) -> Iterator[Callable[[Mapping[str, Any]], None]]:
    """The run's progress view on ``console``: a bar of the ledger's counts."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("done, failed {task.fields[failed]}, status {task.fields[status]}"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task(f"batch {batch_id}", total=children, failed=0, status="-")

        def show(counts: Mapping[str, Any]) -> None:
            progress.update(bar, completed=counts.get("done", 0), failed=counts.get("failed", 0),
                            status=counts.get("status", "-"))

        yield show


def run_and_print(app: Any, console: Console, **options: Any) -> dict[str, Any]:
    """``run_ledger_batch(app, **options)`` with its progress bar on ``console``, then its outcome
    printed there; returns the outcome (the facts)."""
    facts = run_ledger_batch(app, progress=partial(progress_bar, console), **options)
    print_outcome(console, facts)
    return facts


def print_outcome(console: Console, facts: Mapping[str, Any]) -> None:
    ledger = facts["ledger"]
    status = facts["ledger_status"]
    color = "green" if status == "COMPLETED" else "red"
    kinesis = facts["source"] == "kinesis"
    console.print(
        f"\nledger batch {facts['batch_id']} ({facts['source']}, counter shards {facts['counter_shards']}): "
        f"[bold {color}]{status}[/]  "
        + ", ".join(f"{k}={ledger.get(k)}" for k in ("total", "succeeded", "failed", "done"))
        + (f"  (decided by {facts['finished_by']})" if facts.get("finished_by") else "")
    )
    copies = " (every message sent twice)" if facts["duplicate"] else ""
    recorder = "on-failure recorder" if kinesis else "DLQ recorder"
    what = "record(s)" if kinesis else "message(s)"
    console.print(f"sent {facts['sent']} {what}{copies}; consumer invocations: "
                  f"{facts['consumer_invocations']}, {recorder} invocations: {facts['recorder_invocations']}")
    if kinesis:
        console.print(f"kinesis: {facts['shards']} shard(s), BatchSize {facts['batch_size']}; partial batch "
                      f"responses {facts['partial_failures']}, retries {facts['retries']}, bisections "
                      f"{facts['bisections']}, function errors {facts['function_errors']}; ranges sent to the "
                      f"on-failure queue: {len(facts['discarded_ranges'])}")
        for r in facts["discarded_ranges"]:
            console.print(f"  - {r['shardId']} {r['startSequenceNumber']}..{r['endSequenceNumber']} "
                          f"({r['batchSize']} record(s), after {r['attempts']} attempts)")
    ran = facts["update_final_status_invocations"]
    console.print(f"UpdateFinalStatus: {'ran' if ran else 'never invoked'} ({ran} invocation(s))")
    if facts.get("processing_function"):
        console.print(f"processing function {facts['processing_function']}: "
                      f"{facts['processing_invocations']} invocation(s)")
    record = facts["status_record"]
    if record:
        console.print(f"final status record: {json.dumps(record, sort_keys=True)}")
    else:
        console.print("final status record: none written (the batch was not decided)")
    console.print(escape(summary_line(facts["batch_id"], WORKFLOW, record, f"fanout results {facts['batch_id']} --local",
                                      facts["children"])))
    if facts.get("measured_cost_line"):
        console.print(escape(facts["measured_cost_line"]) + " [dim](fanout estimate --workflow ledger for the forecast)[/]")
    for index in facts["fail"]:
        delivered = facts["deliveries"].get(index, 0)
        if kinesis:
            console.print(f"child {index}: delivered {delivered} time(s) (MaximumRetryAttempts "
                          f"{facts['max_retry_attempts']}), in a range sent to the on-failure queue: "
                          f"{index in facts['dead_lettered']}")
        else:
            console.print(
                f"child {index}: delivered {delivered} time(s) (highest ApproximateReceiveCount "
                f"{facts['receive_counts'].get(index, 0)}, maxReceiveCount {facts['max_receive_count']}), "
                f"dead-lettered: {index in facts['dead_lettered']}"
            )
    repeated = sorted(i for i, n in facts["deliveries"].items() if n > 1 and i not in facts["fail"])
    if repeated:
        console.print(f"children delivered more than once (counted once): {len(repeated)}")
    if facts.get("contention") is not None:
        c = facts["contention"]
        console.print(f"DynamoDB contention model ({facts['contention_window_ms']:g} ms in flight): "
                      f"{c.get('transactions', 0)} transaction(s) committed, {c.get('transaction_conflicts', 0)} "
                      f"cancelled with TransactionConflict, {c.get('write_conflicts', 0)} plain write(s) refused"
                      + (f"; messages returned to the queue after the ledger's retries: {facts['returned_to_queue']}"
                         if not kinesis else ""))
    left = facts["failure_queue_messages_left"] if kinesis else facts["dlq_messages_left"]
    queue = "on-failure queue" if kinesis else "dead-letter queue"
    tail = "" if kinesis else f"; source queue: {facts['source_messages_left']} message(s) left"
    console.print(f"{queue}: {len(left)} message(s) left{tail}")
    for message in left[:10]:
        console.print(f"  - {json.dumps(message)[:200]}")
    if facts["timed_out"]:
        console.print("[bold red]timed out before the queues were drained[/]")
    for note in facts["notes"] + facts["extra_notes"]:
        console.print(f"[dim]local adaptation: {note}[/]")
    console.print(f"wall time: {facts['wall_seconds']:.2f}s (deploy + run, synth excluded)")
    console.print(f"exit code {exit_code(facts)}: {EXIT_CODES[exit_code(facts)]}")


EXIT_CODES = {
    0: "the batch COMPLETED and its SUCCEEDED status record is written",
    1: "the batch FAILED (a child failed beyond the threshold, e.g. --fail), or was not decided in time",
    2: "usage error (bad option value)",
}


def exit_code(facts: Mapping[str, Any]) -> int:
    record = facts.get("status_record") or {}
    return 0 if facts["ledger_status"] == "COMPLETED" and record.get("status") == "SUCCEEDED" else 1


# --------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.description = (
        "Run one completion-ledger batch locally: the synthesized ledger stack on moto, the real "
        "consumer/recorder/UpdateFinalStatus handlers in-process, local pollers standing in for "
        "Lambda's event source mappings, DynamoDB contention modelled. Prints the ledger counts, "
        "what the event sources did and the batch's final status record."
    )
    parser.epilog = "exit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in EXIT_CODES.items())
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--source", choices=SOURCES, default="sqs",
                        help="sqs (default): ChildQueue + its DLQ; kinesis: ChildStream + its on-failure queue")
    parser.add_argument("--children", type=int, default=25, help="child messages in the batch (default 25)")
    parser.add_argument("--fail", default="", metavar="I,J",
                        help="comma-separated child indexes that fail permanently (sqs: dead-lettered; "
                        "kinesis: retries exhausted, range sent to the on-failure queue)")
    parser.add_argument("--concurrency", type=int, default=10,
                        help="sqs: consumer pollers (default 10); kinesis: one poller per shard, as Lambda")
    parser.add_argument("--duplicate", action="store_true", help="send every message (record) twice")
    parser.add_argument("--env", default="dev", help="environment from cdk.json (default: dev)")
    from fanout_kit.local.app_source import add_app_options

    add_app_options(parser)
    parser.add_argument("--batch-id", help="batch id (default: generated)")
    parser.add_argument("--visibility-timeout", type=int, default=DEFAULT_VISIBILITY_TIMEOUT,
                        help=f"seconds, for a fast local redelivery (default {DEFAULT_VISIBILITY_TIMEOUT})")
    parser.add_argument("--contention-window", type=float, default=DEFAULT_CONTENTION_WINDOW_MS, metavar="MS",
                        help="DynamoDB contention model: how long a transaction holds its items "
                        f"(default {DEFAULT_CONTENTION_WINDOW_MS:g} ms; 0 turns the model off)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS,
                        help="give up after this many seconds")
    return parser


def run_from_args(args: argparse.Namespace, console: Console | None = None) -> int:
    """Synthesize, run, print; the exit code says how the batch ended (EXIT_CODES)."""
    quiet_handler_logs(QUIET_ENV["POWERTOOLS_LOG_LEVEL"])
    try:
        fail = sorted({int(i) for i in args.fail.split(",") if i.strip()})
    except ValueError:
        raise CliError(f"--fail {args.fail!r}: comma-separated whole numbers (child indexes) expected") from None
    from fanout_kit.local.template import synthesize

    console = console or Console()
    started = time.monotonic()
    if getattr(args, "app", None):
        from fanout_kit.local.app_source import load_app

        with console.status(f"synthesizing the CDK app {args.app}..."):
            app, found = load_app(args.app, stack=args.stack, kind="ledger")
        console.print(f"synthesized {args.app} in {time.monotonic() - started:.1f}s: {found.path} in stack {found.stack}")
    else:
        if getattr(args, "stack", None):
            raise CliError(f"--stack {args.stack}: needs --app PATH (a stack of your own CDK app)")
        from fanout_kit.ops.aws import environment

        environment(args.env)  # an unknown environment or a broken cdk.json: before synth
        with console.status(f"synthesizing the CDK app ({args.env}) with cdk-nag..."):
            app = synthesize(args.env)
        console.print(f"synthesized {args.env} in {time.monotonic() - started:.1f}s")
    try:
        facts = run_and_print(
            app,
            console,
            source=getattr(args, "source", "sqs"),
            children=args.children,
            fail=fail,
            concurrency=args.concurrency,
            duplicate=args.duplicate,
            batch_id=args.batch_id,
            visibility_timeout=args.visibility_timeout,
            timeout_seconds=args.timeout,
            contention_window_ms=getattr(args, "contention_window", DEFAULT_CONTENTION_WINDOW_MS),
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return exit_code(facts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(
        prog="python -m fanout_kit.cli.run_ledger", description=__doc__.splitlines()[0]
    ))
    try:
        return run_from_args(parser.parse_args(argv))
    except CliError as exc:  # (the fanout command prints these the same way)
        print(f"fanout ledger: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from fanout_kit.shared.jsii_node import use_venv_node

    use_venv_node()
    raise SystemExit(main())

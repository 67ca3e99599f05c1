"""``fanout dlq list`` and ``fanout dlq redrive`` on the terminal: prints what
``fanout_kit.ops.dlq.list_messages`` found and the redrive ``fanout_kit.ops.redrive.redrive_batch``
planned, started and cleaned up."""

from __future__ import annotations

from typing import Any

from fanout_kit.cli.views import describe
from fanout_kit.ops.aws import console_url
from fanout_kit.ops.dlq import list_messages
from fanout_kit.ops.redrive import redrive_batch


def cmd_list(args: Any, out: Any) -> int:
    listing = list_messages(args.env, args.workflow, args.batch, region=args.region, endpoint_url=args.endpoint_url)
    deployment, shown = listing.deployment, listing.messages
    which = f" of batch {args.batch}" if args.batch else ""
    kept = ", left in the queue" if shown else ""
    out.print(
        f"dead-letter queue of {deployment.stack_name} ({deployment.env.name}, {listing.region}): "
        f"{len(shown)} message(s){which}{kept}"
    )
    out.print(f"  {deployment.queue_url}")
    for message in shown:
        for line in describe(message):
            out.print(f"  {line}")
    if listing.in_flight:
        out.print(f"  (+{listing.in_flight} in flight: hidden by another reader right now, not shown)")
    return 0


def cmd_redrive(args: Any, out: Any) -> int:
    with redrive_batch(args.env, args.workflow, args.batch, region=args.region,
                       endpoint_url=args.endpoint_url) as redrive:
        record, plan = redrive.record, redrive.plan
        state = "SUCCEEDED (an earlier redrive finalized it)" if record and record.get("status") == "SUCCEEDED" else "FAILED"
        if redrive.deployment.workflow == "map":
            out.print(f"batch {args.batch}: {state}; recorded failed items: {record.get('failedItems')} of {record.get('totalItems')}")
            out.print(f"redrive of {plan.target}")
            what = "all of the batch's items" if plan.items is None else f"{len(plan.items)} item(s)"
            out.print(f"  items: {what} (from {len(plan.messages)} dead-letter message(s))")
        else:
            out.print(
                f"batch {args.batch}: {state}; recorded failed tasks: {', '.join(record.get('failedTasks', [])) or '-'}"
            )
            out.print(f"redrive of {plan.target}")
            out.print(
                f"  tasks: {', '.join(sorted(plan.tasks))} (from {len(plan.messages)} dead-letter message(s))"
            )
        for note in plan.notes:
            out.print(f"  note: {note}")
        if args.dry_run:
            out.print(f"dry run: would start {plan.name} with input {plan.input_json()}")
            return 0
        arn, reused = redrive.start()
        verb = "reusing the redrive execution started earlier" if reused else "started redrive execution"
        out.print(f"{verb} {arn}")
        out.print(f"  console: {console_url(redrive.aws.region, arn)}")
        # Only now, with the execution accepted, may the messages go.
        refused = redrive.delete_messages()
        deleted = len(plan.messages) - len(refused)
        out.print(f"deleted {deleted} dead-letter message(s) of batch {args.batch}")
        if refused:
            out.print(f"[red]SQS refused to delete {len(refused)} message(s): run the redrive again[/]")
        out.print(f"follow it: fanout watch {arn}")
        return 1 if refused else 0

"""Argument parsing and dispatch of the ops subcommands (``fanout_kit.cli.main`` adds them): each
subcommand's function (``fanout_kit.cli.start``, ``.watch``, ``.results``, ``.dlq``) calls the ops API
(``fanout_kit.ops``, which returns results and prints nothing) and prints on the console made here;
a CliError (OpsError included) is one line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

OPS_COMMANDS = ("start", "watch", "status", "dlq", "results")


def global_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """--region / --endpoint-url, accepted before the subcommand and after it."""
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--region",
        default=default,
        help="AWS region (default: the environment's region in cdk.json; for an "
        "execution ARN, the ARN's region)",
    )
    parser.add_argument(
        "--endpoint-url",
        default=default,
        metavar="URL",
        help="send every AWS call to this endpoint (tests, local emulators); AWS_ENDPOINT_URL works too",
    )


def add_parsers(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    global_options(common, suppress=True)

    env_help = "environment from cdk.json (default: dev)"
    start = sub.add_parser(
        "start",
        parents=[common],
        help="start an execution of a deployed workflow from a JSON file or stdin",
        description="Validates the input locally (the workflow's own rules), finds the state machine "
        "from the stack outputs, starts the execution, prints its ARN and console URL.",
    )
    start.add_argument(
        "input", help="execution input JSON file (- for stdin): what you would paste in the console"
    )
    start.add_argument("--env", default="dev", help=env_help)
    start.add_argument("--workflow", choices=("parallel", "map"), default="parallel")
    start.add_argument("--name", help="execution name (default: BATCHID-TIME-RANDOM)")

    for name, help_text in (
        ("watch", "follow an execution live until it ends, then print its final status record"),
        ("status", "show an execution's progress and final status record once"),
    ):
        cmd = sub.add_parser(
            name,
            parents=[common],
            help=help_text,
            description=help_text + ". Exit code 0 if it SUCCEEDED, else 1.",
        )
        cmd.add_argument("execution_arn", metavar="EXECUTION_ARN")
        cmd.add_argument("--env", help="environment from cdk.json (default: found from the state machine)")
        if name == "watch":
            cmd.add_argument(
                "--interval", type=float, default=2.0, metavar="SECONDS", help="poll interval (default 2)"
            )
            cmd.add_argument(
                "--timeout",
                type=float,
                default=0,
                metavar="SECONDS",
                help="stop watching after this long (default: until it ends)",
            )

    results = sub.add_parser(
        "results",
        parents=[common],
        help="a batch's results item by item (Map), task by task (Parallel) or child by child (ledger)",
        description="Finds the batch by its status record and lists its outcomes: index, item or task, "
        "status, error, cause, attempts and where it is (DLQ message, result file), read from the "
        "Map's ResultWriter files (streamed), the Parallel's execution history or the ledger's child "
        "marks. From a deployed stack (--env, or --app PATH for your own app's), or from what fanout "
        "run / fanout ledger saved locally (--local). Read-only. Exit code 0 once listed; 2 for a "
        "bad flag or an unknown batch.",
    )
    results.add_argument("batch_id", metavar="BATCH_ID", help="the batch id of the status record")
    results.add_argument("--env", help="environment from cdk.json (default: dev)")
    results.add_argument("--app", metavar="PATH", help="a stack of your own CDK app (its folder with "
                         "cdk.json, or its cdk.out), deployed; the workflow is found in its stacks")
    results.add_argument("--stack", metavar="NAME", help="with --app: the stack holding the workflow, when several do")
    results.add_argument("--local", action="store_true",
                         help="the batch as the last fanout run / fanout ledger of it left it (saved in "
                         ".fanout-cache/batches, or $FANOUT_STATE_DIR)")
    results.add_argument("--workflow", choices=("parallel", "map", "ledger"),
                         help="which workflow's batch (default: the one whose status table has it)")
    results.add_argument("--failed", action="store_true", help="only what did not succeed")
    results.add_argument("--format", choices=("table", "json", "csv"), default="table",
                         help="table (default), json (one array of objects) or csv (a header row)")

    dlq = sub.add_parser("dlq", help="the dead-letter queue: list (peek) or redrive a batch")
    dlq_sub = dlq.add_subparsers(dest="dlq_command", required=True)
    listing = dlq_sub.add_parser(
        "list", parents=[common], help="show dead-lettered tasks without removing them"
    )
    listing.add_argument("--env", default="dev", help=env_help)
    listing.add_argument("--workflow", choices=("parallel", "map"), default="parallel")
    listing.add_argument("--batch", metavar="BATCH_ID", help="only this batch")
    redrive = dlq_sub.add_parser(
        "redrive",
        parents=[common],
        help="re-run a batch's dead-lettered tasks (Parallel) or failed items (Map)",
        description="Starts one execution with the batch's dead-lettered tasks (Parallel) or failed items "
        "(Map: from the DLQ messages, completed from the map run's result files; the whole input "
        "again if the map run failed as a whole) and redriveOf = the failed execution named by the "
        "status record, under a name derived from that execution and what it re-runs (re-running "
        "after a crash reuses it), then deletes the messages. An execution that timed out or was "
        "stopped has nothing dead-lettered: resume it with RedriveExecution instead (exit 1 says so).",
    )
    redrive.add_argument("--env", default="dev", help=env_help)
    redrive.add_argument(
        "--workflow",
        choices=("parallel", "map"),
        default="parallel",
        help="which workflow's batch (default parallel)",
    )
    redrive.add_argument("--batch", required=True, metavar="BATCH_ID")
    redrive.add_argument("--dry-run", action="store_true", help="show the redrive input, start nothing")


def run(args: argparse.Namespace) -> int:
    from fanout_kit.shared.errors import CliError
    from fanout_kit.cli.views import make_console
    from fanout_kit.ops.aws import clear_errors

    for key in ("region", "endpoint_url"):
        if not hasattr(args, key):
            setattr(args, key, None)
    out = make_console(highlight=False)  # logs, pipes: no 80-column wrapping
    try:
        with clear_errors(args.region, args.endpoint_url):
            if args.command == "start":
                from fanout_kit.cli.start import cmd_start

                return cmd_start(args, out)
            if args.command == "results":
                from fanout_kit.cli.results import cmd_results

                return cmd_results(args, out)
            if args.command in ("watch", "status"):
                from fanout_kit.cli.watch import cmd_watch

                return cmd_watch(args, out, once=args.command == "status")
            from fanout_kit.cli.dlq import cmd_list, cmd_redrive

            return cmd_list(args, out) if args.dlq_command == "list" else cmd_redrive(args, out)
    except CliError as exc:  # OpsError included
        print(f"fanout: {exc}", file=sys.stderr)
        return exc.code

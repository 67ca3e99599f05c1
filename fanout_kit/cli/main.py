"""Command line of the kit: ``fanout --help`` (or ``python -m fanout_kit --help``).

Every mistake a user can make (a flag, the input file, the environment, cdk.json, an unreachable
AWS endpoint, Ctrl-C) ends in one line on stderr, ``fanout: ...``, and exit code 2 for usage
problems (130 for Ctrl-C); no traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from fanout_kit.shared.errors import CliError
from fanout_kit.local.app_source import add_app_options
from fanout_kit.cli.faults import FaultSpecError
from fanout_kit.cli import ops_commands
from fanout_kit._version import __version__

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for Ctrl-C


class OneLineParser(argparse.ArgumentParser):
    """argparse with its usage errors in one line (a bad flag or choice names itself and the
    fix, no usage block); the subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message}; see {self.prog} --help\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="fanout",
        description="The fan-out/fan-in kit: run a batch locally, or start, watch and redrive one in AWS.",
    )
    parser.add_argument("--version", action="version", version=f"fanout {__version__}")
    ops_commands.global_options(parser, suppress=False)  # for the deployed-environment commands
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="run a batch locally on the embedded engine (synthesized ASL, real handlers, moto)",
        description="Checks the flags, the environment and the input file (the workflow's own "
        "validation and the 256 KiB execution input limit) first, then synthesizes the CDK app and "
        "runs the batch locally. Exit code 0 if the execution SUCCEEDED, 1 if not, 2 for a usage "
        "problem.",
    )
    run.add_argument("input", help="execution input JSON file (or - for stdin)")
    run.add_argument("--workflow", choices=("parallel", "map", "ledger"), default=None,
                     help="parallel (fixed tasks; the default) or map (N items, Distributed Map); with "
                     "--app, which of the app's workflows (default: the one there is)")
    add_app_options(run)
    run.add_argument("--manifest", metavar="FILE",
                     help="map: upload this JSON/CSV manifest to the local bucket and use it")
    run.add_argument("--fail-item", action="append", metavar="INDEX=MODE",
                     help="map: make an inline item fail: INDEX=transient:K, INDEX=permanent, INDEX=fatal, "
                     "INDEX=timeout (runs to its timeout), INDEX=oom (out of memory), INDEX=crash (runtime exits)")
    run.add_argument("--env", default="dev", help="environment from cdk.json (default: dev)")
    run.add_argument("--name", help="execution name (default: generated)")
    run.add_argument(
        "--fail", action="append", metavar="TASK=MODE",
        help="parallel: make a task fail: TASK=transient:K (its first K attempts), TASK=permanent "
        "(every attempt: retries exhausted), TASK=fatal (not retryable), TASK=timeout (runs to its "
        "timeout), TASK=oom (out of memory), TASK=crash (runtime exits); the last three are retried only "
        "as retry.ambiguous says (default: dead-lettered after one attempt)",
    )
    run.add_argument(
        "--lambda-fault", action="append", metavar="FUNCTION=CODE[:K]",
        help="the Lambda service rejects the next K invokes of FUNCTION (e.g. UpdateFinalStatus="
        "ServiceException:2)",
    )
    run.add_argument("--dlq-send-failures", type=int, default=0, metavar="K",
                     help="the next K SendMessage calls to the DLQ fail (needs a permanent or fatal "
                     "--fail / --fail-item, so that something is dead-lettered)")
    run.add_argument("--no-sleep", action="store_true",
                     help="record Retry waits instead of sleeping them")
    from fanout_kit.cli import run_ledger

    run_ledger.add_arguments(
        sub.add_parser("ledger", help="run a completion-ledger batch locally (SQS consumers on moto)")
    )
    from fanout_kit.cli import estimate

    estimate.add_arguments(sub.add_parser(
        "estimate",
        help="what a batch would cost at AWS list prices, from the synthesized settings",
        description="Reads the synthesized template of the workflow (states on the success path, "
        "the Map's batching, Retry policies, memory sizes, the ledger's batch size) and prints the "
        "cost of a batch line by line with its assumptions. Prices: fanout_kit/shared/pricing.py.",
    ))
    iam = sub.add_parser(
        "iam-report",
        help="run the local scenarios, evaluate every AWS call against its role's synthesized "
        "policies; list denied calls and unused grants",
    )
    iam.add_argument("--env", default="dev", help="environment from cdk.json (default: dev)")
    iam.add_argument("--no-ledger", action="store_true", help="skip the completion-ledger scenario")
    add_app_options(iam)
    iam.add_argument("--input", metavar="FILE", help="with --app: a batch input of your app (its tasks' or "
                     "items' payloads) for the scenarios (default: empty task payloads, items {\"id\": ...})")
    ops_commands.add_parsers(sub)  # start, watch, status, dlq, results: a deployed environment (boto3)
    return parser


def main(argv: list[str] | None = None) -> int:
    from fanout_kit.cli.handler_logs import quiet_handler_logs

    quiet_handler_logs()  # before any handler module creates its logger
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("fanout: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CliError as exc:
        print(f"fanout: {exc}", file=sys.stderr)
        return exc.code
    except FaultSpecError as exc:
        print(f"fanout: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # `fanout run ... | head -3`: the reader left; say nothing more
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _dispatch(args: argparse.Namespace) -> int:
    from fanout_kit.shared.checks import ConfigError

    try:
        if args.command == "run":
            from fanout_kit.cli.run_workflow import run_demo

            return run_demo(args)
        if args.command == "ledger":
            from fanout_kit.cli.run_ledger import run_from_args
            from fanout_kit.cli.views import make_console

            return run_from_args(args, console=make_console())
        if args.command == "estimate":
            from fanout_kit.cli.estimate import run as run_estimate

            return run_estimate(args)
        if args.command == "iam-report":
            from fanout_kit.cli.iam_report import main as iam_report

            return iam_report(args)
        if args.command in ops_commands.OPS_COMMANDS:
            return ops_commands.run(args)
    except ConfigError as exc:
        message = str(exc)
        raise CliError(message if message.startswith("cdk.json") else f"cdk.json: {message}") from None
    return EXIT_USAGE


def console_main() -> None:
    """The ``fanout`` command (and ``python -m fanout_kit``)."""
    try:
        try:
            from fanout_kit.shared.jsii_node import use_venv_node
        except ImportError:  # the installed kit: the app's own Node/CDK setup synthesizes (--app)
            pass
        else:
            use_venv_node()
        code = main()
    except KeyboardInterrupt:  # Ctrl-C while the modules load
        print("fanout: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        # Ctrl-C reached the whole process group: jsii's Node is gone, and its exit hook would
        # print a BrokenPipeError traceback. Nothing else is left to clean up in this process.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)

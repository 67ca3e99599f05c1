"""Command line of the kit: ``python -m fanout --help``."""

from __future__ import annotations

import argparse
import sys

from fanout.faults import FaultSpecError
from fanout.ops import commands as ops_commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fanout", description=__doc__)
    ops_commands.global_options(parser, suppress=False)  # for the deployed-environment commands
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="run a batch locally on the embedded engine (synthesized ASL, real handlers, moto)",
    )
    run.add_argument("input", help="execution input JSON file (or - for stdin)")
    run.add_argument("--workflow", choices=("parallel", "map"), default="parallel",
                     help="parallel (fixed tasks) or map (N items, Distributed Map)")
    run.add_argument("--manifest", metavar="FILE",
                     help="map: upload this JSON/CSV manifest to the local bucket and use it")
    run.add_argument("--fail-item", action="append", metavar="INDEX=MODE",
                     help="map: make an inline item fail: INDEX=transient:K, INDEX=permanent, INDEX=fatal")
    run.add_argument("--env", default="dev", help="environment from cdk.json (default: dev)")
    run.add_argument("--name", help="execution name (default: generated)")
    run.add_argument(
        "--fail", action="append", metavar="TASK=MODE",
        help="make a task fail: TASK=transient:K (first K attempts), TASK=permanent, TASK=fatal",
    )
    run.add_argument(
        "--lambda-fault", action="append", metavar="FUNCTION=CODE[:K]",
        help="the Lambda service rejects the next K invokes of FUNCTION (e.g. UpdateFinalStatus="
        "ServiceException:2)",
    )
    run.add_argument("--dlq-send-failures", type=int, default=0, metavar="K",
                     help="the next K SendMessage calls to the DLQ fail")
    run.add_argument("--no-sleep", action="store_true",
                     help="record Retry waits instead of sleeping them")
    from fanout import ledger_demo

    ledger_demo.add_arguments(
        sub.add_parser("ledger", help="run a completion-ledger batch locally (SQS consumers on moto)")
    )
    iam = sub.add_parser(
        "iam-report",
        help="run the local scenarios, evaluate every AWS call against its role's synthesized "
        "policies; list denied calls and unused grants",
    )
    iam.add_argument("--env", default="dev", help="environment from cdk.json (default: dev)")
    iam.add_argument("--no-ledger", action="store_true", help="skip the completion-ledger scenario")
    ops_commands.add_parsers(sub)  # start, watch, status, dlq: a deployed environment (boto3)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            from fanout.demo import run_demo

            return run_demo(args)
        if args.command == "ledger":
            from fanout.ledger_demo import run_from_args

            return run_from_args(args)
        if args.command == "iam-report":
            from fanout.iam_report import main as iam_report

            return iam_report(args)
        if args.command in ops_commands.OPS_COMMANDS:
            return ops_commands.run(args)
    except FaultSpecError as exc:
        print(f"fanout: {exc}", file=sys.stderr)
        return 2
    return 2

"""``fanout estimate``: what a batch would cost, from the synthesized templates (``fanout_kit.local.cost_estimate``)."""

from __future__ import annotations

import argparse
import json
import math
import sys

from fanout_kit.shared.errors import CliError

WORKFLOWS = ("parallel", "map", "ledger")
MAX_ITEMS = 10**10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Numbers are read as text and checked here: a bad value is one line naming the flag.
    parser.add_argument("--workflow", default=None, metavar="|".join(WORKFLOWS),
                        help="the pattern: parallel (an item is one task run), map, ledger (an item is a "
                        "child); default: with --app, the one workflow of the stack; else map")
    parser.add_argument("--items", required=True, metavar="N", help="items in the batch")
    parser.add_argument("--env", default="dev", help="environment from cdk.json (default: dev)")
    from fanout_kit.local.app_source import add_app_options

    add_app_options(parser)  # --app PATH [--stack NAME]: another CDK app's settings
    parser.add_argument("--work-seconds", default="0.1", metavar="S",
                        help="the worker's own time per item, in seconds (default: 0.1)")
    parser.add_argument("--failure-rate", default="0", metavar="R",
                        help="fraction of items that fail on every attempt, 0..1 (default: 0)")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: each component and total_usd")


def _number(flag: str, text: str, *, integer: bool = False, low: float = 0.0, high: float = math.inf,
            what: str) -> float:
    try:
        value = int(text) if integer else float(text)
    except (TypeError, ValueError):
        raise CliError(f"{flag} {text!r}: expected {what}") from None
    if not (low <= value <= high) or (not integer and not math.isfinite(value)):
        raise CliError(f"{flag} {text!r}: expected {what}")
    return value


def parse(args: argparse.Namespace) -> tuple[str | None, int, float, float]:
    if args.workflow is not None and args.workflow not in WORKFLOWS:
        raise CliError(f"--workflow {args.workflow!r}: expected one of {', '.join(WORKFLOWS)}")
    items = int(_number("--items", args.items, integer=True, low=1, high=MAX_ITEMS,
                        what=f"a whole number of items from 1 to {MAX_ITEMS:,}"))
    work = _number("--work-seconds", args.work_seconds, low=0.0, high=900.0,
                   what="seconds of work per item, from 0 to 900 (Lambda's longest timeout)")
    rate = _number("--failure-rate", args.failure_rate, low=0.0, high=1.0,
                   what="a fraction from 0 to 1 (0.001 = one item in a thousand)")
    return args.workflow, items, work, rate


def run(args: argparse.Namespace) -> int:
    workflow, items, work, rate = parse(args)  # before the environment and the synth
    from fanout_kit.local.cost_estimate import Assumptions, estimate, iter_lines

    if getattr(args, "app", None):
        from fanout_kit.local.app_source import load_app

        app, found = load_app(args.app, stack=args.stack, kind=workflow)  # None: the stack's one workflow
        workflow = found.kind
        where = f"--app {args.app}: stack {found.stack} ({found.path})"
    else:
        if getattr(args, "stack", None):
            raise CliError("--stack NAME goes with --app PATH (this repository's app: --env)")
        from fanout_kit.local.template import synthesize
        from fanout_kit.ops.aws import environment

        workflow = workflow or "map"
        environment(args.env)  # an unknown environment or a broken cdk.json: one line, before synth
        app = synthesize(args.env)
        where = f"environment {args.env}"
    try:
        result = estimate(app.template(workflow), workflow, items, app.region,
                          Assumptions(work_seconds=work, failure_rate=rate))
    except ValueError as exc:  # a template without what the workflow needs
        raise CliError(f"{where}: {exc}") from None
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=1)
        print()
    else:
        print(f"{where} (its settings as synthesized)")
        for line in iter_lines(result):
            print(line)
    return 0

"""The cost table of the docs' cost page: what one million items cost with each of the kit's
patterns and with what a user would build instead, computed by ``fanout_kit.shared.cost`` from the synthesized
templates of one environment (default prod) at the list prices of ``fanout_kit.shared.pricing``.

    python -m tools.cost_table            # print the table (Markdown)
    python -m tools.cost_table --write    # and put it in docs/cost.md between its markers

``tests/test_cost.py`` checks that docs/cost.md holds exactly what this prints, and that the
README's table of patterns quotes the same totals per million items.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fanout_kit.local.cost_estimate import Assumptions, Estimate, estimate, estimate_sqs_per_item

ITEMS = 1_000_000
START, END = "<!-- cost-table: start (python -m tools.cost_table --write) -->", "<!-- cost-table: end -->"
COST_PAGE = Path(__file__).resolve().parents[1] / "docs" / "cost.md"

# column -> the Usage fields it sums
COLUMNS: dict[str, tuple[str, ...]] = {
    "Step Functions": ("transitions", "express_requests", "express_gb_seconds"),
    "Lambda": ("lambda_requests", "lambda_gb_seconds_x86_64", "lambda_gb_seconds_arm64"),
    "DynamoDB": ("dynamodb_read_units", "dynamodb_write_units"),
    "SQS, S3": ("sqs_requests", "s3_put_requests", "s3_get_requests"),
    "logs, X-Ray": ("log_bytes", "xray_traces"),
}


def rows(app: Any, a: Assumptions | None = None) -> list[tuple[str, Estimate]]:
    """(what, its estimate for ITEMS items) per pattern and alternative."""
    a = a or Assumptions()
    region = app.region
    map_t, ledger_t, parallel_t = app.template("map"), app.template("ledger"), app.template("parallel")
    kit_map = estimate(map_t, "map", ITEMS, region, a)
    ledger = estimate(ledger_t, "ledger", ITEMS, region, a)
    return [
        ("Parallel workflow (an item = one task of a 3-task batch)", estimate(parallel_t, "parallel", ITEMS, region, a)),
        (f"Map workflow ({kit_map.shape['items_per_batch']} items per "
         f"{kit_map.shape['child_execution_type'].title()} child)", kit_map),
        (f"Completion ledger (SQS batches of {ledger.shape['batch_size']}, "
         f"{ledger.shape['counter_shards']} counter shards)", ledger),
        ("instead: Map without batching (one Express child per item)",
         estimate(map_t, "map", ITEMS, region, a, map_changes={"items_per_batch": None})),
        ("instead: one Standard child execution per item",
         estimate(map_t, "map", ITEMS, region, a, map_changes={"items_per_batch": None, "execution_type": "STANDARD"})),
        ("instead: one Lambda invocation per item via SQS (nothing tracks completion)",
         estimate_sqs_per_item(ledger_t, ITEMS, a)),
    ]


def _column_usd(e: Estimate, names: tuple[str, ...]) -> float:
    return sum(line.usd for line in e.lines if line.component in names)


def table(app: Any, a: Assumptions | None = None) -> str:
    a = a or Assumptions()
    head = "| per 1,000,000 items | " + " | ".join(COLUMNS) + " | total |"
    out = [head, "|---|" + "---:|" * (len(COLUMNS) + 1)]
    for what, e in rows(app, a):
        cells = [f"${_column_usd(e, names):,.2f}" for names in COLUMNS.values()]
        out.append(f"| {what} | " + " | ".join(cells) + f" | **${e.total_usd:,.2f}** |")
    out.append("")
    out.append(f"Environment `{app.env_name}` as synthesized; " + "; ".join(a.lines()).replace("|", "/") + ".")
    return "\n".join(out)


def replace_block(text: str, block: str) -> str:
    if START not in text or END not in text:
        raise ValueError(f"{COST_PAGE.name} has no {START} ... {END} block")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{block}\n{END}{tail}"


def page_block(text: str) -> str:
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.cost_table", description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="prod", help="environment from cdk.json (default: prod)")
    parser.add_argument("--write", action="store_true", help="also put the table in docs/cost.md")
    args = parser.parse_args(argv)
    from fanout_kit.local.template import synthesize

    block = table(synthesize(args.env))
    print(block)
    if args.write:
        COST_PAGE.write_text(replace_block(COST_PAGE.read_text(), block))
        print(f"written to {COST_PAGE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A batch's outcomes as text: a table, JSON lines or CSV (``write_outcomes``), and the one-line
verdict ``fanout run`` / ``fanout watch`` / ``fanout ledger`` end with (``summary_line``). Writes to
the stream it is given; the command line chooses it."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from typing import IO, Any

from fanout_kit.ops.outcomes import FIELDS, SUCCEEDED, Outcome


def _one_line(text: Any, width: int) -> str:
    from fanout_kit.ops.causes import cause_message

    flat = " ".join(str(cause_message(text) if text is not None else "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


_encode = json.JSONEncoder(sort_keys=True, default=str).encode  # one encoder for every outcome
ITEM_COLUMN = FIELDS.index("item")


def write_outcomes(outcomes: Iterable[Outcome], fmt: str, out: IO[str]) -> tuple[int, int]:
    """Write the outcomes as they come (nothing is collected); returns (shown, failed)."""
    shown = failed = 0
    if fmt == "json":
        out.write("[")
        for shown, outcome in enumerate(outcomes, 1):
            failed += outcome.failed
            out.write(("\n" if shown == 1 else ",\n") + _encode(outcome.to_dict()))
        out.write("\n]\n" if shown else "]\n")
        return shown, failed
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(FIELDS)
        for shown, outcome in enumerate(outcomes, 1):
            failed += outcome.failed
            row = [getattr(outcome, name) for name in FIELDS]
            row[ITEM_COLUMN] = _encode(row[ITEM_COLUMN]) if row[ITEM_COLUMN] is not None else ""
            writer.writerow(["" if value is None else value for value in row])
        return shown, failed
    header = f"{'INDEX':>7}  {'TASK/ITEM':<28}  {'STATUS':<12}  {'ATTEMPTS':>8}  ERROR / CONTEXT"
    out.write(header + "\n")
    for shown, outcome in enumerate(outcomes, 1):
        failed += outcome.failed
        what = outcome.task if outcome.task is not None else json.dumps(outcome.item, sort_keys=True, default=str)
        index = "-" if outcome.index is None else str(outcome.index)
        attempts = "-" if outcome.attempts is None else str(outcome.attempts)
        line = f"{index:>7}  {_one_line(what, 28):<28}  {outcome.status:<12}  {attempts:>8}"
        details = []
        if outcome.error or outcome.cause:
            details.append(_one_line(f"{outcome.error}: {_one_line(outcome.cause, 200)}", 120))
        if outcome.dlq_message_id:
            details.append(f"dlq message {outcome.dlq_message_id}")
        if outcome.failed and outcome.result_file:
            details.append(f"file {outcome.result_file}")
        out.write(line + ("  " + "; ".join(details) if details else "") + "\n")
    return shown, failed


# --------------------------------------------------------------------------- summary line
def summary_line(batch_id: str, workflow: str, record: dict[str, Any] | None, results_command: str,
                 total: int | None = None) -> str:
    """One line for the end of ``fanout watch`` / ``fanout run``: the verdict, how many failed of
    how many, and the command that lists them."""
    if record is None:
        return f"batch {batch_id}: no status record yet (still running, or it could not record one)"
    status = record.get("status")
    unit = "tasks" if workflow == "parallel" else "children" if workflow == "ledger" else "items"
    if status == SUCCEEDED:
        count = f"all {total:,} {unit} succeeded" if total else f"every {unit[:-1] if unit != 'children' else 'child'} succeeded"
        return f"batch {batch_id}: SUCCEEDED — {count}; list them: {results_command}"
    if workflow == "parallel" and record.get("failedTasks") is not None:
        failed = len(record.get("failedTasks") or [])
        of = f" of {total:,}" if total else ""
        what = f"{failed:,}{of} {unit} failed ({', '.join(record.get('failedTasks') or [])})"
    elif record.get("failedItems") is not None:
        what = f"{int(record['failedItems']):,} of {int(record.get('totalItems', 0)):,} {unit} failed"
    else:
        what = f"the execution ended {record.get('failedExecutionStatus', 'FAILED')} ({record.get('failedExecutionError')})"
    return f"batch {batch_id}: {status} — {what}; list them: {results_command} --failed"


# --------------------------------------------------------------------------- local state

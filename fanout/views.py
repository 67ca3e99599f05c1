"""Terminal views shared by the local demo and the ops CLI."""

from __future__ import annotations

from rich.table import Table

from fanout.local.history import (
    DEAD_LETTERED,
    DEAD_LETTERING,
    FAILED,
    PENDING,
    RETRYING,
    RUNNING,
    SKIPPED,
    SUCCEEDED,
    ProgressTracker,
)

STYLE = {
    PENDING: "dim",
    RUNNING: "cyan",
    RETRYING: "yellow",
    SUCCEEDED: "green",
    DEAD_LETTERING: "magenta",
    DEAD_LETTERED: "red",
    FAILED: "bold red",
    SKIPPED: "dim",
}


def task_table(tracker: ProgressTracker, title: str) -> Table:
    table = Table(title=title, expand=False)
    for column in ("task", "status", "attempts", "last error"):
        table.add_column(column)
    for view in tracker.tasks.values():
        table.add_row(
            view.name,
            f"[{STYLE.get(view.status, '')}]{view.status}[/]",
            str(view.attempts),
            view.last_error or "",
        )
    done, failed, total = task_counts(tracker)
    table.caption = f"done {done} / failed {failed} / total {total}" + (
        f"  (now: {tracker.final_state})" if tracker.final_state else ""
    )
    return table


def task_counts(tracker: ProgressTracker) -> tuple[int, int, int]:
    views = tracker.tasks.values()
    done = sum(v.status in (SUCCEEDED, SKIPPED) for v in views)
    failed = sum(v.status in (DEAD_LETTERING, DEAD_LETTERED, FAILED) for v in views)
    return done, failed, len(tracker.tasks)

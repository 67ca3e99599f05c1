"""Terminal views shared by the local demo and the ops CLI: the task table, the console, a
dead-letter message's lines (``describe``: ``fanout dlq list`` and ``fanout run`` show them alike)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from fanout_kit.ops.causes import cause_message, error_line  # noqa: F401  (the views print them)
from fanout_kit.local.history import (
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

if TYPE_CHECKING:
    from fanout_kit.ops.dlq import Message

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


def describe(message: Message) -> list[str]:
    """A dead-letter message as lines: its batch, task and error, cause, input or items, execution."""
    body = message.body
    if body is None:
        return [f"message {message.message_id}: not a workflow message: {message.raw[:200]!r}"]
    head = f"batch={body.get('batchId')} task={body.get('task')} error={body.get('error')}"
    lines = [head, f"  cause:     {cause_message(body.get('cause'))}"]
    if "items" in body:
        lines.append(f"  items:     {[i.get('index') for i in body['items'] if isinstance(i, dict)]}")
    else:
        lines.append(f"  input:     {json.dumps(body.get('input'), sort_keys=True)}")
    lines.append(f"  execution: {body.get('executionArn')}")
    if body.get("redriveOf"):
        lines.append(f"  redrive of: {body['redriveOf']}")
    if body.get("failedAt"):
        lines.append(f"  failed at: {body['failedAt']}")
    return lines



def make_console(**kwargs: Any) -> Console:
    """A console for the CLI: on a terminal, rich's normal one; in a pipe or a CI log, no wrapping
    at 80 columns (execution ARNs and JSON records stay whole on one line) and no colours."""
    console = Console(soft_wrap=True, **kwargs)
    if not console.is_terminal:
        console = Console(soft_wrap=True, width=max(console.width, 200), **kwargs)
    return console


class PlainTaskLog:
    """The task table's changes as plain lines, for a pipe or a CI log (no redraws): one line
    each time a task's status or attempt count changes."""

    def __init__(self, console: Console):
        self.console = console
        self.seen: dict[str, tuple[str, int]] = {}

    def update(self, tracker: ProgressTracker) -> None:
        for view in tracker.tasks.values():
            key = (view.status, view.attempts)
            if self.seen.get(view.name, (PENDING, 0)) == key:
                continue
            self.seen[view.name] = key
            line = f"{view.name}: {view.status}, attempt {view.attempts}"
            if view.last_error and view.status != SUCCEEDED:
                line += f", last error {view.last_error}"
            self.console.print(line, markup=False, highlight=False)

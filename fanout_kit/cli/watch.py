"""``fanout watch`` / ``fanout status`` on the terminal: the view of an execution that
``fanout_kit.ops.watch.Watcher`` reads (a live table on a terminal, the final one in a pipe), then
its final status record and the commands that follow."""

from __future__ import annotations

import json
import time
from typing import Any

from rich.live import Live
from rich.markup import escape
from rich.table import Table

from fanout_kit.cli.views import error_line, task_table
from fanout_kit.ops.aws import Aws, OpsError, console_url, parse_execution_arn
from fanout_kit.ops.watch import Watcher, counts_line, locate


def item_table(map_run: dict[str, int] | None, title: str) -> Table:
    table = Table(title=title, expand=False)
    for column in ("items", "succeeded", "failed", "timed out", "aborted", "running", "total"):
        table.add_column(column)
    if map_run:
        table.add_row("map run", *(str(map_run.get(k, 0)) for k in ("succeeded", "failed", "timedOut", "aborted", "running", "total")))
    else:
        table.add_row("map run", "-", "-", "-", "-", "-", "not started yet")
    return table


def render(watcher: Watcher) -> Any:
    """The execution's current view: the task table (Parallel) or the Map run's item counts."""
    if watcher.deployment.workflow == "parallel":
        return task_table(watcher.tracker, watcher.title())
    return item_table(watcher.map_run, watcher.title())


def cmd_watch(args: Any, out: Any, *, once: bool = False) -> int:
    match = parse_execution_arn(args.execution_arn)
    if args.region and args.region != match["region"]:
        raise OpsError(
            f"the execution is in {match['region']} (see its ARN), not {args.region}: drop --region"
        )
    aws = Aws(match["region"], args.endpoint_url)
    deployment, described = locate(aws, args.execution_arn, args.env)
    watcher = Watcher(aws, deployment, described)
    if once:
        watcher.poll()
        out.print(render(watcher))
    else:
        follow(watcher, out, args.interval, args.timeout)
    return summarize(out, watcher)


def follow(watcher: Watcher, out: Any, interval: float, timeout: float) -> None:
    """Poll until the execution ends (or ``timeout`` seconds, 0: no limit): a live view on a
    terminal, the final view only otherwise (logs, pipes)."""
    deadline = time.monotonic() + timeout if timeout else None

    def running() -> bool:
        if watcher.poll() != "RUNNING":
            return False
        if deadline and time.monotonic() > deadline:
            return False
        time.sleep(interval)
        return True

    if not out.is_terminal:
        while running():
            pass
        out.print(render(watcher))
    else:
        with Live(render(watcher), console=out, refresh_per_second=4) as live:
            while running():
                live.update(render(watcher))
            live.update(render(watcher))
    if watcher.described["status"] == "RUNNING":
        out.print(f"still RUNNING after {timeout:g}s: stopped watching (fanout watch again to resume)")


def summarize(out: Any, watcher: Watcher) -> int:
    from fanout_kit.shared.final_status import read_status

    d, status = watcher.described, watcher.described["status"]
    color = {"SUCCEEDED": "green", "RUNNING": "cyan"}.get(status, "red")
    out.print(f"execution [bold {color}]{status}[/]  {watcher.arn}")
    out.print(f"  console: {console_url(watcher.aws.region, watcher.arn)}")
    if d.get("error") or d.get("cause"):
        out.print(f"  error: {escape(error_line(d.get('error'), d.get('cause')))}")
    record = None
    if watcher.batch_id:
        record = read_status(
            watcher.aws.client("dynamodb"), watcher.deployment.status_table, watcher.batch_id
        )
    out.print(f"final status record: {json.dumps(record, sort_keys=True) if record else 'none'}")
    if watcher.deployment.workflow == "map" and watcher.map_run:
        out.print(counts_line(watcher.map_run))
    if status == "FAILED" and watcher.batch_id:
        env = watcher.deployment.env.name
        flag = "" if watcher.deployment.workflow == "parallel" else " --workflow map"
        out.print(
            f"dead-lettered tasks: fanout dlq list --env {env}{flag} --batch {watcher.batch_id}"
        )
        out.print(
            f"redrive them:        fanout dlq redrive --env {env}{flag} --batch {watcher.batch_id}"
        )
    if watcher.batch_id and status != "RUNNING":
        out.print(escape(_summary(watcher, record)))
    return 0 if status == "SUCCEEDED" else 1


def _summary(watcher: Watcher, record: dict[str, Any] | None) -> str:
    """The last line: the verdict, how many failed of how many, the command that lists them."""
    from fanout_kit.ops.result_formats import summary_line

    d = watcher.deployment
    total = (watcher.map_run or {}).get("total") if d.workflow == "map" else len(watcher.tracker.tasks)
    return summary_line(watcher.batch_id, d.workflow, record, f"fanout results {watcher.batch_id} --env {d.env.name}", total)

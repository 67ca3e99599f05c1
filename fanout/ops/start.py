"""``fanout start``: start an execution of a deployed workflow from a JSON file (or stdin)."""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from fanout.ops.aws import Aws, OpsError, console_url, environment, find_deployment

NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def read_input(path: str) -> Any:
    """Parse the execution input; a missing or malformed file is an OpsError naming the file,
    the line and the column."""
    label = "stdin" if path == "-" else path
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise OpsError(f"input file {label}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise OpsError(f"input file {label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OpsError(
            f"input file {label}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None


def validate(workflow: str, execution_input: Any, cfg: Any, name: str | None, label: str) -> dict[str, Any]:
    """The workflow's own input validation (the same pure code its first state runs), so a bad
    input is refused here instead of failing an execution."""
    from lambdas.fanout_common.errors import InvalidInput

    try:
        if workflow == "parallel":
            from lambdas.fanout_common.validation import validate_batch_input

            return validate_batch_input(execution_input, cfg.task_names, execution_name=name)
        from lambdas.fanout_common.manifest import validate_map_input

        return validate_map_input(
            execution_input, execution_name=name, max_inline_items=cfg.map.max_inline_items
        )
    except InvalidInput as exc:
        raise OpsError(f"input file {label}: {exc}") from None


def execution_name(batch_id: str | None) -> str:
    """Readable and unique: ``{batchId}-{UTC time}-{random}``, within the 80-character limit."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    head = NAME_UNSAFE.sub("-", batch_id or "batch")[:50]
    return f"{head}-{stamp}-{uuid.uuid4().hex[:8]}"


def check_name(name: str) -> str:
    if not 1 <= len(name) <= 80 or NAME_UNSAFE.search(name):
        raise OpsError(f"--name {name!r}: 1-80 of letters, digits, '-', '_' and '.'")
    return name


def cmd_start(args: Any, out: Any) -> int:
    cfg = environment(args.env)
    label = "stdin" if args.input == "-" else args.input
    execution_input = read_input(args.input)
    batch_id = execution_input.get("batchId") if isinstance(execution_input, dict) else None
    name = (
        check_name(args.name)
        if args.name
        else execution_name(batch_id if isinstance(batch_id, str) else None)
    )
    normalized = validate(args.workflow, execution_input, cfg, name, label)
    aws = Aws(args.region or cfg.region, args.endpoint_url)
    deployment = find_deployment(aws, cfg, args.workflow)
    started = aws.client("stepfunctions").start_execution(
        stateMachineArn=deployment.state_machine_arn, name=name, input=json.dumps(execution_input)
    )
    arn = started["executionArn"]
    out.print(f"started {args.workflow} workflow of {cfg.name} ({deployment.stack_name}, {aws.region})")
    out.print(f"  batch:     {normalized['batchId']}")
    out.print(f"  execution: {arn}")
    out.print(f"  console:   {console_url(aws.region, arn)}")
    out.print(f"follow it:   python -m fanout watch {arn}")
    return 0

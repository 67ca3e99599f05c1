"""``fanout start``: start an execution of a deployed workflow from a JSON file (or stdin)."""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from fanout_kit.ops.inputs import label_of, read_input, validate
from fanout_kit.ops.aws import Aws, OpsError, console_url, environment, find_deployment

NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


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
    label = label_of(args.input)
    execution_input = read_input(args.input)
    batch_id = execution_input.get("batchId") if isinstance(execution_input, dict) else None
    name = (
        check_name(args.name)
        if args.name
        else execution_name(batch_id if isinstance(batch_id, str) else None)
    )
    normalized = validate(args.workflow, execution_input, cfg, name, label)  # incl. the 256 KiB limit
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
    out.print(f"follow it:   fanout watch {arn}")
    return 0

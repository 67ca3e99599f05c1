"""``fanout start``: start an execution of a deployed workflow from a JSON file (or stdin); the
execution name rules. No printing here: ``fanout_kit.cli.start`` prints what ``start_batch`` returns."""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import dataclass

from fanout_kit.ops.inputs import label_of, read_input, validate
from fanout_kit.ops.aws import Aws, OpsError, environment, find_deployment

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


@dataclass(frozen=True)
class Started:
    """An execution ``start_batch`` started."""

    workflow: str
    env_name: str
    stack_name: str
    region: str
    batch_id: str  # as the workflow will see it (validated, defaulted)
    execution_arn: str


def start_batch(
    input_path: str, *, env: str, workflow: str, name: str | None = None, region: str | None = None,
    endpoint_url: str | None = None,
) -> Started:
    """Start an execution of the deployed ``workflow`` of ``env`` with the input in ``input_path``
    (``-``: stdin), validated locally first; ``name``: the execution's (default: generated)."""
    cfg = environment(env)
    label = label_of(input_path)
    execution_input = read_input(input_path)
    batch_id = execution_input.get("batchId") if isinstance(execution_input, dict) else None
    name = (
        check_name(name)
        if name
        else execution_name(batch_id if isinstance(batch_id, str) else None)
    )
    normalized = validate(workflow, execution_input, cfg, name, label)  # incl. the 256 KiB limit
    aws = Aws(region or cfg.region, endpoint_url)
    deployment = find_deployment(aws, cfg, workflow)
    started = aws.client("stepfunctions").start_execution(
        stateMachineArn=deployment.state_machine_arn, name=name, input=json.dumps(execution_input)
    )
    return Started(workflow, cfg.name, deployment.stack_name, aws.region, normalized["batchId"], started["executionArn"])

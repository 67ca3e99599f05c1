"""``fanout start`` on the terminal: prints the execution ``fanout_kit.ops.start.start_batch``
started (its ARN, console URL and the command that follows it)."""

from __future__ import annotations

from typing import Any

from fanout_kit.ops.aws import console_url
from fanout_kit.ops.start import start_batch


def cmd_start(args: Any, out: Any) -> int:
    started = start_batch(args.input, env=args.env, workflow=args.workflow, name=args.name,
                          region=args.region, endpoint_url=args.endpoint_url)
    arn = started.execution_arn
    out.print(f"started {started.workflow} workflow of {started.env_name} ({started.stack_name}, {started.region})")
    out.print(f"  batch:     {started.batch_id}")
    out.print(f"  execution: {arn}")
    out.print(f"  console:   {console_url(started.region, arn)}")
    out.print(f"follow it:   fanout watch {arn}")
    return 0

"""Execution input checks shared by ``fanout run`` (before synth) and ``fanout start`` (before any
AWS call): read the file, apply the workflow's own pure validation (the code its ValidateInput /
PrepareBatch Lambda runs), and the Step Functions execution input size limit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fanout_kit.shared.errors import CliError

# StartExecution ``input``: "Length constraints apply to the payload size, and are expressed as
# bytes in UTF-8 encoding. Maximum length of 262144" (Step Functions API reference,
# ExecutionStartedEventDetails / StartExecution; the service quota page says 256 KiB for state and
# execution input). A larger input ends in States.DataLimitExceeded, so it is refused here.
MAX_EXECUTION_INPUT_BYTES = 256 * 1024


def label_of(path: str) -> str:
    return "stdin" if path == "-" else path


def read_input(path: str) -> Any:
    """Parse the execution input; a missing or malformed file is a CliError naming the file,
    the line and the column."""
    label = label_of(path)
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as exc:
        raise CliError(f"input file {label}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise CliError(f"input file {label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"input file {label}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None


def check_size(execution_input: Any, label: str) -> str:
    """The input as it will be sent (JSON text); refused when over the Step Functions limit."""
    text = json.dumps(execution_input)
    size = len(text.encode("utf-8"))
    if size > MAX_EXECUTION_INPUT_BYTES:
        raise CliError(
            f"input file {label}: {size} bytes of JSON, more than the {MAX_EXECUTION_INPUT_BYTES} "
            "bytes (256 KiB) Step Functions accepts as execution input; put the items in an S3 "
            "manifest (Map workflow) or pass large payloads by reference"
        )
    return text


def validate(workflow: str, execution_input: Any, cfg: Any, name: str | None, label: str) -> dict[str, Any]:
    """The size limit and the workflow's own input validation (the same pure code its first state
    runs, with the workflow's input cap, ``fanout_kit.shared.limits``), so a bad input is refused here
    instead of failing an execution."""
    from fanout_runtime.errors import InvalidInput

    check_size(execution_input, label)  # AWS's own limit first; the workflow's cap is below it
    try:
        if workflow == "parallel":
            from fanout_kit.patterns.parallel.validation import validate_batch_input

            normalized = validate_batch_input(execution_input, cfg.task_names, execution_name=name)
        else:
            from fanout_kit.patterns.distributed_map.manifest import validate_map_input

            normalized = validate_map_input(
                execution_input, execution_name=name, max_inline_items=cfg.map.max_inline_items
            )
    except InvalidInput as exc:
        raise CliError(f"input file {label}: {exc}") from None
    return normalized

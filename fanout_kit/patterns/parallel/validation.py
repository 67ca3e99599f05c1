"""Validation of a Parallel-workflow execution input (pure logic, no AWS calls).

Accepted input (what a user pastes into the Step Functions console)::

    {
      "batchId": "order-1001",            # optional; defaults to the execution name
      "tasks": {                          # one JSON object payload per configured task
        "ReserveInventory": {...},
        "ChargePayment": {...},
        "NotifyCustomer": {...}
      },
      "redriveOf": "arn:aws:states:...:execution:...:..."   # optional, set by `fanout dlq redrive`
    }

A normal run must name every configured task (so a typo cannot silently skip one). A redrive
(``redriveOf`` set) names only the tasks to run again; the final-status rules then check that
they cover every task the redriven execution recorded as failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from fanout_runtime.errors import InvalidInput

from fanout_kit.shared.batch_input import BATCH_ID_PATTERN, EXECUTION_ARN_PATTERN, json_type_name
from fanout_kit.shared.limits import PARALLEL_INPUT_MAX_BYTES, over_cap_message, payload_size

ALLOWED_FIELDS = ("batchId", "tasks", "redriveOf")


def validate_batch_input(
    event: Any, task_names: Iterable[str], execution_name: str | None = None
) -> dict[str, Any]:
    """Return the normalized input, or raise InvalidInput naming every bad field and its fix."""
    known = list(task_names)
    if not isinstance(event, Mapping):
        raise InvalidInput(
            f"execution input must be a JSON object like "
            f'{{"tasks": {{"{known[0] if known else "TaskName"}": {{}}}}}}, got {json_type_name(event)}'
        )
    problems: list[str] = []
    size = payload_size(event)
    if size > PARALLEL_INPUT_MAX_BYTES:
        problems.append(
            over_cap_message(
                "input", size, PARALLEL_INPUT_MAX_BYTES,
                "a failed task's error must still fit next to its payload in 256 KiB: pass large "
                "payloads by reference (an S3 key)",
            )
        )
    for field in event:
        if field not in ALLOWED_FIELDS:
            problems.append(f"{field}: unknown field; allowed fields are {', '.join(ALLOWED_FIELDS)}")

    batch_id = event.get("batchId")
    if batch_id is None:
        batch_id = execution_name or f"batch-{uuid.uuid4()}"
    elif not isinstance(batch_id, str):
        problems.append(f"batchId: must be a string, got {json_type_name(batch_id)}")
    elif not BATCH_ID_PATTERN.match(batch_id):
        problems.append(
            "batchId: must be 1-80 characters of letters, digits, '.', '_', ':' or '-', "
            f"starting with a letter or digit; got {batch_id!r}"
        )

    redrive_of = event.get("redriveOf")
    if redrive_of is not None and (
        not isinstance(redrive_of, str) or not EXECUTION_ARN_PATTERN.match(redrive_of)
    ):
        problems.append(
            "redriveOf: must be the ARN of the failed execution being redriven "
            "(arn:aws:states:REGION:ACCOUNT:execution:STATE_MACHINE:NAME)"
        )

    tasks = event.get("tasks")
    if tasks is None:
        problems.append(
            "tasks: missing; give one payload object per task: "
            + ", ".join(f'"{name}": {{...}}' for name in known)
        )
    elif not isinstance(tasks, Mapping):
        problems.append(f"tasks: must be an object keyed by task name, got {json_type_name(tasks)}")
    else:
        for name, payload in tasks.items():
            if name not in known:
                problems.append(f"tasks.{name}: unknown task; configured tasks are {', '.join(known)}")
            elif not isinstance(payload, Mapping):
                problems.append(
                    f"tasks.{name}: payload must be a JSON object ({{}} if the task needs none), "
                    f"got {json_type_name(payload)}"
                )
        if redrive_of is None:
            for name in known:
                if name not in tasks:
                    problems.append(
                        f"tasks.{name}: missing; every configured task needs a payload object "
                        "({} if it needs none); only a redrive (redriveOf) may run a subset"
                    )
        elif not tasks:
            problems.append("tasks: a redrive must name at least one task to run again")

    if problems:
        raise InvalidInput("; ".join(problems))
    return {"batchId": batch_id, "tasks": dict(tasks), "redriveOf": redrive_of}

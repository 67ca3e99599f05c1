"""Fault switches of the demo, parsed from the command line.

``--fail TASK=transient:K`` the task raises RetryableTaskError on its first K attempts;
``--fail TASK=permanent``   it fails every attempt (retries exhaust, DLQ);
``--fail TASK=fatal``       it raises NonRetryableTaskError (no retry, DLQ);
``--fail TASK=timeout``     it runs past its function's timeout (Sandbox.Timedout; ``hang`` is the
                            older name); ``TASK=oom`` it runs out of memory (Runtime.OutOfMemory);
                            ``TASK=crash`` its runtime exits (Runtime.ExitError). The Step Functions
                            guide documents all three as Lambda.Unknown. Not retried by default
                            (the ``ambiguous`` retry setting), so dead-lettered after one attempt;
``--lambda-fault FUNCTION=ServiceException:K`` the Lambda service itself rejects the next K
invokes of that function (TASK name, ValidateInput or UpdateFinalStatus);
``--dlq-send-failures K``   the next K SendMessage calls to the DLQ fail.

``fanout run`` refuses a switch that cannot apply (``--fail`` on the Map workflow, ``--fail-item`` on
the Parallel one, ``--dlq-send-failures`` without a task that is dead-lettered).

Task faults travel in the task's payload (``simulateFailure``), so they work on a deployed stack
too; service faults exist only in the local engine.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from fanout_runtime.faults import SIMULATE_KEY

LAMBDA_FAULT_CODES = (
    "ServiceException",
    "AWSLambdaException",
    "SdkClientException",
    "TooManyRequestsException",
)


class FaultSpecError(ValueError):
    pass


@dataclass(frozen=True)
class TaskFault:
    task: str
    mode: str
    times: int = 1

    def payload_switch(self) -> dict[str, Any]:
        return {"mode": self.mode, "times": self.times} if self.mode == "transient" else {"mode": self.mode}


_MODES = r"transient(?::(\d+))?|permanent|fatal|timeout|oom|crash|hang"
_MODES_TEXT = "transient:K, {0}=permanent, {0}=fatal, {0}=timeout, {0}=oom or {0}=crash"


def parse_task_fault(text: str) -> TaskFault:
    m = re.fullmatch(rf"([A-Za-z0-9]+)=({_MODES})", text)
    if not m:
        raise FaultSpecError(f"--fail {text!r}: expected TASK=" + _MODES_TEXT.format("TASK"))
    mode = m.group(2).split(":")[0]
    return TaskFault(m.group(1), mode, int(m.group(3) or 1))


def parse_lambda_fault(text: str) -> tuple[str, list[str]]:
    m = re.fullmatch(r"([A-Za-z0-9]+)=([A-Za-z]+)(?::(\d+))?", text)
    if not m or m.group(2) not in LAMBDA_FAULT_CODES:
        raise FaultSpecError(
            f"--lambda-fault {text!r}: expected FUNCTION=CODE[:K] with CODE one of "
            + ", ".join(LAMBDA_FAULT_CODES)
        )
    return m.group(1), [m.group(2)] * int(m.group(3) or 1)


def apply_task_faults(execution_input: dict[str, Any], faults: list[TaskFault]) -> dict[str, Any]:
    """A copy of the input with each fault's switch added to its task's payload."""
    out = copy.deepcopy(execution_input)
    tasks = out.get("tasks")
    for fault in faults:
        if not isinstance(tasks, dict) or fault.task not in tasks:
            known = ", ".join(tasks) if isinstance(tasks, dict) else "none"
            raise FaultSpecError(f"--fail {fault.task}: no such task in the input (tasks: {known})")
        tasks[fault.task] = {**tasks[fault.task], SIMULATE_KEY: fault.payload_switch()}
    return out


def parse_item_fault(text: str) -> tuple[int, TaskFault]:
    """``INDEX=MODE`` for a Map item: ``7=permanent``, ``3=transient:2``, ``0=fatal``, ``5=timeout``."""
    m = re.fullmatch(rf"(\d+)=({_MODES})", text)
    if not m:
        raise FaultSpecError(f"--fail-item {text!r}: expected INDEX=" + _MODES_TEXT.format("INDEX"))
    return int(m.group(1)), TaskFault(f"item-{m.group(1)}", m.group(2).split(":")[0], int(m.group(3) or 1))


def apply_item_faults(execution_input: dict[str, Any], faults: list[tuple[int, TaskFault]]) -> dict[str, Any]:
    """A copy of a Map input with each fault's switch added to the item at that index."""
    out = copy.deepcopy(execution_input)
    items = out.get("items")
    for index, fault in faults:
        if not isinstance(items, list) or not 0 <= index < len(items) or not isinstance(items[index], dict):
            raise FaultSpecError(
                f"--fail-item {index}: needs inline items (objects) in the input with that index"
            )
        items[index] = {**items[index], SIMULATE_KEY: fault.payload_switch()}
    return out

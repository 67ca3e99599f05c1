"""A fault switch to rehearse failures on a deployed stack (standard library only).

A payload carrying ``{"simulateFailure": {"mode": MODE, "times": N}}`` makes
``raise_simulated_failure`` fail on purpose, so Retry, Catch and the dead-letter queue can be
watched on AWS as locally. The kit's example work calls it (this repository's example tasks and
Map worker, the completion ledger's default work), and ``fanout run`` / ``fanout start`` put the
switch into the input (``--fail TASK=MODE``, ``--fail-item I=MODE``); your functions may call it
too. (Locally, ``fanout run --app --fail`` injects faults into any function without it.)

Modes: ``transient`` fails the first N attempts (``times``, default 1) with ``RetryableTaskError``;
``permanent`` fails every attempt with it (retries exhaust, DLQ); ``fatal`` raises
``NonRetryableTaskError`` (no retry, DLQ); ``timeout`` (or ``hang``) runs past the function's
timeout, ``oom`` runs out of memory, ``crash`` exits the runtime, on every attempt (AWS reports
``Sandbox.Timedout``, ``Runtime.OutOfMemory``, ``Runtime.ExitError``, or ``Lambda.Unknown``). The
local engine replaces ``hang``, ``exhaust_memory`` and ``crash`` with its stand-ins.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from fanout_runtime.errors import NonRetryableTaskError, RetryableTaskError

SIMULATE_KEY = "simulateFailure"
MODES = ("transient", "permanent", "fatal", "timeout", "oom", "crash", "hang")
# The modes whose outcome is ambiguous (the function ran, then Lambda stopped it): AWS reports them
# as Lambda.Unknown, or by the runtime's names Sandbox.Timedout / Runtime.OutOfMemory /
# Runtime.ExitError. "hang" is the older name of "timeout".
AMBIGUOUS_MODES = ("timeout", "oom", "crash", "hang")
HANG_SECONDS = 900  # Lambda's maximum timeout: a "hang" outlives any function's timeout


def hang(seconds: float) -> None:
    """Mode "timeout" (or "hang"): keep running until Lambda stops the function at its timeout."""
    time.sleep(seconds)


def exhaust_memory() -> None:
    """Mode "oom": allocate until Lambda stops the function at its memory size."""
    hoard = []
    while True:
        hoard.append(bytearray(64 * 1024 * 1024))


def crash() -> None:
    """Mode "crash": the runtime process exits mid-invocation."""
    os._exit(1)


def raise_simulated_failure(payload: Any, name: str, attempt: int) -> None:
    """Fail on purpose when ``payload`` (a task's input, a Map item, a ledger child's payload)
    carries the switch; ``name`` (the task or item) and the 0-based ``attempt`` go into the
    message. A malformed switch is a ``NonRetryableTaskError`` naming the field."""
    spec = payload.get(SIMULATE_KEY) if isinstance(payload, Mapping) else None
    if not spec:
        return
    if not isinstance(spec, Mapping) or spec.get("mode") not in MODES:
        modes = "|".join(f'"{m}"' for m in MODES)
        raise NonRetryableTaskError(f'input.{SIMULATE_KEY} must be {{"mode": {modes}, "times": N}}, got {spec!r}')
    mode = spec["mode"]
    if mode in ("timeout", "hang"):
        hang(HANG_SECONDS)
    if mode == "oom":
        exhaust_memory()
    if mode == "crash":
        crash()
    where = f"{name} (attempt {attempt + 1})"
    if mode == "fatal":
        raise NonRetryableTaskError(f"simulated non-retryable failure of {where}")
    if mode == "permanent":
        raise RetryableTaskError(f"simulated permanent failure of {where}")
    if attempt < int(spec.get("times", 1)):
        raise RetryableTaskError(f"simulated transient failure of {where}")

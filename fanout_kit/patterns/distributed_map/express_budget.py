"""Worst-case duration of an EXPRESS child workflow, computed from its ASL (pure logic).

AWS stops an Express execution after 5 minutes (the Express workflow quota, "Maximum execution
duration: 5 minutes"), with no Catch running: a Distributed Map child that is still retrying then
never reaches its dead-letter step. So the kit refuses, at synth, any EXPRESS child whose longest
path can outlast that limit, with every Retrier exhausted:

* a Task state costs ``attempts x TimeoutSeconds + the backoff ceilings`` where attempts is
  1 + the sum of its Retriers' MaxAttempts (each Retrier keeps its own count, so a task can in the
  worst case exhaust every one of them) and each wait is the Retrier's backoff ceiling
  ``min(IntervalSeconds x BackoffRate^n, MaxDelaySeconds)`` (full jitter only draws below it);
* a Task without TimeoutSeconds has no bound (AWS's default is 99,999,999 s): refused;
* Pass, Choice, Succeed and Fail cost nothing; a Wait costs its Seconds;
* the path may go through Next, Choice branches, Default and Catch; the longest one counts.

The same module gives the local engine its limit (``EXPRESS_LIMIT_SECONDS``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fanout_kit.shared.checks import ConfigError

EXPRESS_LIMIT_SECONDS = 300  # AWS: Express workflows run at most 5 minutes
DEFAULT_RETRY = {"IntervalSeconds": 1, "MaxAttempts": 3, "BackoffRate": 2.0}  # ASL defaults


class ExpressBudgetError(ConfigError):
    """The child definition cannot be bounded, or is over the Express limit. ``problem``: what;
    the message adds ``fix``, which settings to change."""

    def __init__(self, problem: str, fix: str = "") -> None:
        super().__init__(problem + (f"; {fix}" if fix else ""))
        self.problem = problem


@dataclass(frozen=True)
class StateCost:
    state: str
    seconds: float
    detail: str


def retrier_ceilings(retrier: Mapping[str, Any]) -> list[float]:
    interval = retrier.get("IntervalSeconds", DEFAULT_RETRY["IntervalSeconds"])
    attempts = retrier.get("MaxAttempts", DEFAULT_RETRY["MaxAttempts"])
    rate = retrier.get("BackoffRate", DEFAULT_RETRY["BackoffRate"])
    cap = retrier.get("MaxDelaySeconds")
    waits = [interval * rate**n for n in range(attempts)]
    return [min(w, cap) if cap else w for w in waits]


def state_cost(name: str, state: Mapping[str, Any]) -> StateCost:
    kind = state.get("Type")
    if kind == "Task":
        timeout = state.get("TimeoutSeconds")
        if not isinstance(timeout, (int, float)):
            raise ExpressBudgetError(
                f"state {name!r} has no TimeoutSeconds, so nothing bounds it below the Express limit; "
                "give every Task of an EXPRESS child a timeout"
            )
        retriers = state.get("Retry", [])
        attempts = 1 + sum(r.get("MaxAttempts", DEFAULT_RETRY["MaxAttempts"]) for r in retriers)
        waits = sum(sum(retrier_ceilings(r)) for r in retriers)
        return StateCost(
            name, attempts * timeout + waits, f"{attempts} attempt(s) x {timeout} s + {waits:g} s backoff"
        )
    if kind == "Wait":
        seconds = state.get("Seconds")
        if not isinstance(seconds, (int, float)):
            raise ExpressBudgetError(f"state {name!r}: a Wait in an EXPRESS child needs fixed Seconds")
        return StateCost(name, float(seconds), f"waits {seconds} s")
    if kind in ("Pass", "Choice", "Succeed", "Fail"):
        return StateCost(name, 0.0, "no time")
    raise ExpressBudgetError(f"state {name!r}: a {kind} state inside an EXPRESS child is not budgeted")


def _successors(state: Mapping[str, Any]) -> list[str]:
    nxt = [state["Next"]] if "Next" in state else []
    nxt += [c["Next"] for c in state.get("Choices", [])]
    nxt += [state["Default"]] if "Default" in state else []
    nxt += [c["Next"] for c in state.get("Catch", [])]
    return nxt


def longest_path(processor: Mapping[str, Any]) -> tuple[float, list[StateCost]]:
    """(worst-case seconds, the states of the longest path with their costs)."""
    states = processor["States"]
    memo: dict[str, tuple[float, list[StateCost]]] = {}
    visiting: set[str] = set()

    def walk(name: str) -> tuple[float, list[StateCost]]:
        if name in memo:
            return memo[name]
        if name in visiting:
            raise ExpressBudgetError(f"state {name!r} is on a cycle: an EXPRESS child's duration cannot be bounded")
        visiting.add(name)
        cost = state_cost(name, states[name])
        best: tuple[float, list[StateCost]] = (0.0, [])
        for successor in _successors(states[name]):
            candidate = walk(successor)
            if candidate[0] > best[0]:
                best = candidate
        visiting.discard(name)
        memo[name] = (cost.seconds + best[0], [cost, *best[1]])
        return memo[name]

    return walk(processor["StartAt"])


def express_children(asl: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Map state name -> its ItemProcessor, for every Map whose children run as EXPRESS."""
    found: dict[str, Mapping[str, Any]] = {}
    for name, state in asl.get("States", {}).items():
        processor = state.get("ItemProcessor")
        if processor and processor.get("ProcessorConfig", {}).get("ExecutionType") == "EXPRESS":
            found[name] = processor
        for branch in state.get("Branches", []):
            found.update(express_children(branch))
    return found


def check_express_children(asl: Mapping[str, Any], *, limit: float = EXPRESS_LIMIT_SECONDS, fix: str = "") -> dict[str, float]:
    """Worst case per EXPRESS Map state; raises ExpressBudgetError naming the path if one is over
    ``limit``. ``fix`` is appended to the message (which settings to change)."""
    worst: dict[str, float] = {}
    for name, processor in express_children(asl).items():
        seconds, path = longest_path(processor)
        worst[name] = seconds
        if seconds > limit:
            steps = "; ".join(f"{c.state}: {c.detail}" for c in path if c.seconds)
            raise ExpressBudgetError(
                f"{name}: an EXPRESS child can run {seconds:g} s in the worst case ({steps}), over the "
                f"{limit:g} s Express limit, after which AWS stops it without running its Catch",
                fix,
            )
    return worst

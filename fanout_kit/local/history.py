"""Reading a Step Functions execution history (GetExecutionHistory events): which state each
event belongs to, attempts per task, retries, state transitions, and a live per-task status.

Works on the history of a real execution too (same event shapes), so the ops CLI reuses it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Event = Mapping[str, Any]


def _entered_name(event: Event) -> str | None:
    if event["type"].endswith("StateEntered"):
        return event["stateEnteredEventDetails"]["name"]
    return None


def state_of_events(history: Iterable[Event]) -> dict[int, str]:
    """Event id -> the name of the state it happened in (following previousEventId)."""
    owner: dict[int, str] = {}
    for event in history:
        name = _entered_name(event) or owner.get(event.get("previousEventId", 0))
        if name and not event["type"].endswith("StateExited"):
            owner[event["id"]] = name
        elif event["type"].endswith("StateExited"):
            owner[event["id"]] = event["stateExitedEventDetails"]["name"]
    return owner


def task_attempts(history: list[Event]) -> Counter:
    """State name -> how many times its task was scheduled (first try + retries)."""
    owner = state_of_events(history)
    return Counter(owner[e["id"]] for e in history if e["type"] == "TaskScheduled")


def task_errors(history: list[Event]) -> dict[str, list[str]]:
    """State name -> the error name of each failed attempt, in order."""
    owner = state_of_events(history)
    errors: dict[str, list[str]] = {}
    for e in history:
        if e["type"] == "TaskFailed":
            errors.setdefault(owner[e["id"]], []).append(e["taskFailedEventDetails"]["error"])
    return errors


def states_entered(history: list[Event]) -> list[str]:
    return [n for n in (_entered_name(e) for e in history) if n]


def state_transitions(history: list[Event]) -> int:
    """Billable state transitions: every state entered, plus every retry of a task."""
    entered = Counter(states_entered(history))
    retries = sum(max(0, n - entered[s]) for s, n in task_attempts(history).items())
    return sum(entered.values()) + retries


# ----------------------------------------------------------------- live task status
PENDING, RUNNING, RETRYING, SUCCEEDED, DEAD_LETTERING, DEAD_LETTERED, FAILED, SKIPPED = (
    "pending",
    "running",
    "retrying",
    "succeeded",
    "dead-lettering",
    "dead-lettered",
    "failed (DLQ send failed)",
    "skipped",
)


@dataclass
class TaskView:
    name: str
    status: str = PENDING
    attempts: int = 0
    last_error: str | None = None


@dataclass
class ProgressTracker:
    """Feed it history events one by one; it keeps each task's status for a live display."""

    task_names: list[str]
    tasks: dict[str, TaskView] = field(default_factory=dict)
    _owner: dict[int, str] = field(default_factory=dict)
    final_state: str | None = None

    def __post_init__(self) -> None:
        self.tasks = {n: TaskView(n) for n in self.task_names}

    def _task_of_state(self, state: str) -> tuple[str | None, str]:
        for name in self.task_names:
            if state == f"Run {name}":
                return name, "run"
            if state == f"DeadLetter {name}":
                return name, "dlq"
            if state == f"{name} dead-lettered":
                return name, "dead"
            if state == f"{name} failed, DLQ send failed":
                return name, "lost"
            if state == f"Skip {name}":
                return name, "skip"
        return None, ""

    def feed(self, event: Event) -> None:
        name = _entered_name(event) or self._owner.get(event.get("previousEventId", 0))
        if name:
            self._owner[event["id"]] = name
        if not name:
            return
        task, part = self._task_of_state(name)
        kind = event["type"]
        if task is None:
            if kind.endswith("StateEntered"):
                self.final_state = name
            return
        view = self.tasks[task]
        if part == "run":
            if kind == "TaskScheduled":
                view.attempts += 1
                view.status = RUNNING if view.attempts == 1 else RETRYING
            elif kind == "TaskFailed":
                view.last_error = event["taskFailedEventDetails"]["error"]
            elif kind == "TaskSucceeded":
                view.status = SUCCEEDED
        elif part == "dlq" and kind.endswith("StateEntered"):
            view.status = DEAD_LETTERING
        elif part == "dead" and kind.endswith("StateEntered"):
            view.status = DEAD_LETTERED
        elif part == "lost" and kind.endswith("StateEntered"):
            view.status = FAILED
        elif part == "skip" and kind.endswith("StateEntered"):
            view.status = SKIPPED

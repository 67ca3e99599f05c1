"""The state graph of an ASL definition (pure; used by tests, docs and the graph picture)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

State = Mapping[str, Any]


def iter_states(asl: Mapping[str, Any], scope: str = "") -> Iterator[tuple[str, str, State]]:
    """(scope, name, state) of every state, nested branches and Map processors included."""
    for name, state in asl["States"].items():
        yield scope, name, state
        for i, branch in enumerate(state.get("Branches", [])):
            yield from iter_states(branch, f"{scope}{name}/branch{i}/")
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            yield from iter_states(processor, f"{scope}{name}/items/")


def all_states(asl: Mapping[str, Any]) -> dict[str, State]:
    return {name: state for _, name, state in iter_states(asl)}


def edges(state: State) -> list[tuple[str, str]]:
    """(label, target) of every transition out of a state (Next, Choice rules, Default, Catch)."""
    out: list[tuple[str, str]] = []
    if "Next" in state:
        out.append(("next", state["Next"]))
    for i, choice in enumerate(state.get("Choices", [])):
        out.append((f"choice{i}", choice["Next"]))
    if "Default" in state:
        out.append(("default", state["Default"]))
    for catcher in state.get("Catch", []):
        out.append(("catch " + ",".join(catcher["ErrorEquals"]), catcher["Next"]))
    return out


def reachable(asl: Mapping[str, Any], start: str, *, skip_edges: set[tuple[str, str]] = frozenset()) -> set[str]:
    """Top-level states reachable from ``start`` (not entering branches), ignoring given
    (state, label) edges."""
    states = asl["States"]
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for label, target in edges(states[name]):
            if (name, label) not in skip_edges:
                todo.append(target)
    return seen


def happy_path(asl: Mapping[str, Any]) -> list[str]:
    """Follow Next / the first Choice rule from StartAt to the end: the all-succeeded path."""
    states = asl["States"]
    path, name = [], asl["StartAt"]
    while name:
        path.append(name)
        state = states[name]
        name = state["Choices"][0]["Next"] if state["Type"] == "Choice" else state.get("Next")
    return path


def happy_path_transitions(asl: Mapping[str, Any]) -> int:
    """State transitions of one execution in which nothing fails and nothing is skipped: every
    state on the happy path, plus every state on each Parallel branch's happy path."""
    total = 0
    for name in happy_path(asl):
        total += 1
        for branch in asl["States"][name].get("Branches", []):
            total += happy_path_transitions(branch)
    return total

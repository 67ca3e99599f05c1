"""Draw an ASL state machine as a Mermaid flowchart (text; the layout is Mermaid's own).

Why Mermaid and not a layout of our own or Graphviz: Mermaid lays the graph out itself (dagre:
edges are routed around the nodes, never through them), GitHub renders a ```mermaid block in the
README and in a pull request's diff view, and mkdocs-material renders the same block on the docs
site (``pymdownx.superfences`` custom fence, mkdocs.yml). Graphviz ``dot`` would have done the
layout as well, but it is a system package every contributor and CI machine would need to
regenerate or check a picture; a Mermaid block is text that a test compares byte for byte.

What is drawn: every state (nested Parallel branches and Map item processors as subgraphs), Next
and Choice edges as solid arrows ("if" / "otherwise"), Catch edges dashed and labelled with the
caught errors' count, "up to N retries" inside a Task with Retry rules (N: the largest MaxAttempts
of its rules), a green "succeeded" end after every top-level End state, Fail states red.
"""

from __future__ import annotations

import re
from typing import Any

SUCCEEDED = "succeeded"
CLASSES = {
    "Task": "fill:#dbeafe,stroke:#1e40af",
    "Choice": "fill:#fef3c7,stroke:#92400e",
    "Pass": "fill:#f1f5f9,stroke:#475569",
    "Wait": "fill:#f1f5f9,stroke:#475569",
    "Fail": "fill:#fee2e2,stroke:#b91c1c",
    "Succeed": "fill:#dcfce7,stroke:#15803d",
    "Succeeded": "fill:#dcfce7,stroke:#15803d",
}


def retries(state: dict[str, Any]) -> int:
    """The largest MaxAttempts of the state's Retry rules (retries after the first attempt)."""
    return max((r.get("MaxAttempts", 3) for r in state.get("Retry", [])), default=0)


def retry_label(state: dict[str, Any]) -> str:
    n = retries(state)
    return f"up to {n} retr{'y' if n == 1 else 'ies'}" if n else ""


def _label(text: str) -> str:
    """A node or edge label in Mermaid's quoted form (quotes and markup escaped)."""
    return '"' + text.replace("&", "#amp;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;") + '"'


class _Drawing:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.ids: dict[tuple[str, str], str] = {}
        self.links: list[str] = []  # "solid" / "catch", one per edge in order (linkStyle indices)
        self.classes: dict[str, list[str]] = {}

    def node_id(self, scope: str, name: str) -> str:
        key = (scope, name)
        if key not in self.ids:
            base = re.sub(r"[^A-Za-z0-9]", "_", f"{scope}{name}").strip("_") or "state"
            node = base
            while node in self.ids.values():
                node += "_"
            self.ids[key] = node
        return self.ids[key]

    def edge(self, source: str, target: str, label: str, kind: str, depth: int) -> None:
        arrow = "-.->" if kind == "catch" else "-->"
        text = f"|{_label(label)}|" if label else ""
        self.lines.append(f"{'    ' * depth}{source} {arrow}{text} {target}")
        self.links.append(kind)

    def states(self, asl: dict[str, Any], scope: str, depth: int, *, top: bool) -> None:
        pad = "    " * depth
        for name, state in asl["States"].items():
            node = self.node_id(scope, name)
            kind = state["Type"]
            if kind in ("Parallel", "Map"):
                title = name if kind == "Map" else f"{name} (branches run at the same time)"
                self.lines.append(f"{pad}subgraph {node} [{_label(title)}]")
                if kind == "Parallel":
                    for i, branch in enumerate(state["Branches"]):
                        lane = f"{node}_branch{i}"
                        self.lines.append(f"{pad}    subgraph {lane} [{_label(f'branch {i + 1}')}]")
                        self.lines.append(f"{pad}        direction LR")
                        self.states(branch, f"{scope}{name}/branch{i}/", depth + 2, top=False)
                        self.lines.append(f"{pad}    end")
                else:
                    processor = state.get("ItemProcessor") or state["Iterator"]
                    self.states(processor, f"{scope}{name}/items/", depth + 1, top=False)
                self.lines.append(f"{pad}end")
            else:
                text = name if not retry_label(state) else f"{name}\n{retry_label(state)}"
                shape = "{{%s}}" if kind == "Choice" else "([%s])" if kind in ("Fail", "Succeed") else "[%s]"
                self.lines.append(pad + node + shape % _label(text).replace("\n", "<br/>"))
                self.classes.setdefault(kind if kind in CLASSES else "Task", []).append(node)
        for name, state in asl["States"].items():
            self.transitions(asl, scope, name, state, depth, top=top)

    def transitions(self, asl: dict[str, Any], scope: str, name: str, state: dict[str, Any], depth: int,
                    *, top: bool) -> None:
        source = self.node_id(scope, name)
        catches: dict[str, list[str]] = {}
        for catcher in state.get("Catch", []):
            catches.setdefault(catcher["Next"], []).extend(catcher["ErrorEquals"])
        if "Next" in state:
            both = state["Next"] in catches
            self.edge(source, self.node_id(scope, state["Next"]), "", "solid", depth)
            if both:  # the same target by Next and by Catch: both lines are drawn
                errors = catches.pop(state["Next"])
                self.edge(source, self.node_id(scope, state["Next"]), _catch_text(errors), "catch", depth)
        for choice in state.get("Choices", []):
            self.edge(source, self.node_id(scope, choice["Next"]), "if", "solid", depth)
        if "Default" in state:
            self.edge(source, self.node_id(scope, state["Default"]), "otherwise", "solid", depth)
        for target, errors in catches.items():
            self.edge(source, self.node_id(scope, target), _catch_text(errors), "catch", depth)
        if top and state.get("End"):
            self.edge(source, SUCCEEDED, "", "solid", depth)


def _catch_text(errors: list[str]) -> str:
    return f"catch {errors[0]}" if len(errors) == 1 else f"catch {len(errors)} errors"


def to_mermaid(asl: dict[str, Any]) -> str:
    """The ```mermaid block (fences included) drawing ``asl``; the same definition always gives the
    same text."""
    drawing = _Drawing()
    drawing.lines.append("flowchart TD")
    drawing.ids[("", SUCCEEDED)] = SUCCEEDED
    drawing.states(asl, "", 1, top=True)
    if any(state.get("End") for state in asl["States"].values()):
        drawing.lines.insert(1, f"    {SUCCEEDED}(({_label(SUCCEEDED)}))")
        drawing.classes.setdefault("Succeeded", []).append(SUCCEEDED)
    for kind, nodes in sorted(drawing.classes.items()):
        drawing.lines.append(f"    classDef {kind.lower()} {CLASSES[kind]}")
        drawing.lines.append(f"    class {','.join(nodes)} {kind.lower()}")
    catch = [str(i) for i, kind in enumerate(drawing.links) if kind == "catch"]
    if catch:
        drawing.lines.append(f"    linkStyle {','.join(catch)} stroke:#dc2626")
    return "```mermaid\n" + "\n".join(drawing.lines) + "\n```\n"

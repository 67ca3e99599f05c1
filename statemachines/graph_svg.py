"""Draw an ASL state machine as an SVG picture (pure Python, deterministic output).

Layout: states are placed in rows by their longest distance from StartAt; a Parallel state or a
Map state is a frame holding its branches (or item processor) side by side, laid out the same
way. Edges: solid for Next / Choice rules / Default, dashed red for Catch. The same definition
always gives the same bytes, so a test can regenerate the README picture and compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from statemachines.asl_graph import edges

BOX_H = 34
CHAR_W = 7.2
PAD = 16
ROW_GAP = 34
FRAME_HEAD = 26
COLORS = {
    "Task": "#dbeafe",
    "Choice": "#fef3c7",
    "Pass": "#f1f5f9",
    "Fail": "#fee2e2",
    "Succeed": "#dcfce7",
    "Parallel": "#ffffff",
    "Map": "#ffffff",
    "Wait": "#f1f5f9",
}


@dataclass
class Node:
    name: str
    state: dict[str, Any]
    w: float = 0
    h: float = BOX_H
    x: float = 0
    y: float = 0
    inner: list["Layout"] = field(default_factory=list)


@dataclass
class Layout:
    nodes: dict[str, Node]
    w: float
    h: float
    x: float = 0
    y: float = 0


def _rows(asl: dict[str, Any]) -> list[list[str]]:
    states = asl["States"]
    depth = {asl["StartAt"]: 0}
    order = [asl["StartAt"]]
    changed = True
    while changed:  # longest-path layering (the graphs are small and acyclic)
        changed = False
        for name in list(depth):
            for _, target in edges(states[name]):
                if target in states and depth.get(target, -1) < depth[name] + 1 and target not in order[: order.index(name) + 1]:
                    depth[target] = depth[name] + 1
                    if target not in order:
                        order.append(target)
                    changed = True
    rows: dict[int, list[str]] = {}
    for name in order:
        rows.setdefault(depth[name], []).append(name)
    return [rows[d] for d in sorted(rows)]


def layout(asl: dict[str, Any]) -> Layout:
    nodes: dict[str, Node] = {}
    rows = _rows(asl)
    for row in rows:
        for name in row:
            state = asl["States"][name]
            node = Node(name, state)
            subs = state.get("Branches") or ([state["ItemProcessor"]] if "ItemProcessor" in state else [])
            if subs:
                node.inner = [layout(s) for s in subs]
                node.w = max(sum(l.w for l in node.inner) + PAD * (len(node.inner) + 1), len(_frame_label(node)) * CHAR_W + 2 * PAD)
                node.h = FRAME_HEAD + max(l.h for l in node.inner) + PAD
            else:
                node.w = len(name) * CHAR_W + 2 * PAD
            nodes[name] = node
    width = max(sum(nodes[n].w for n in row) + PAD * (len(row) - 1) for row in rows)
    y = 0.0
    for row in rows:
        row_w = sum(nodes[n].w for n in row) + PAD * (len(row) - 1)
        x = (width - row_w) / 2
        for name in row:
            node = nodes[name]
            node.x, node.y = x, y
            x += node.w + PAD
            if node.inner:
                ix = node.x + PAD + (node.w - 2 * PAD - sum(l.w for l in node.inner) - PAD * (len(node.inner) - 1)) / 2
                for sub in node.inner:
                    sub.x, sub.y = ix, node.y + FRAME_HEAD
                    ix += sub.w + PAD
        y += max(nodes[n].h for n in row) + ROW_GAP
    return Layout(nodes, width, y - ROW_GAP)


def _frame_label(node: Node) -> str:
    kind = node.state["Type"]
    if kind == "Map":
        mode = node.state["ItemProcessor"].get("ProcessorConfig", {}).get("Mode", "INLINE")
        return f"{node.name} (Map, {mode})"
    return f"{node.name} ({kind})"


def _draw(lay: Layout, ox: float, oy: float, out: list[str]) -> None:
    for node in lay.nodes.values():
        x, y = ox + node.x, oy + node.y
        kind = node.state["Type"]
        fill = COLORS.get(kind, "#ffffff")
        if node.inner:
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{node.w:.1f}" height="{node.h:.1f}" rx="8" fill="{fill}" stroke="#64748b" stroke-dasharray="4 3"/>')
            out.append(f'<text x="{x + 8:.1f}" y="{y + 17:.1f}" class="frame">{escape(_frame_label(node))}</text>')
            for sub in node.inner:
                _draw(sub, ox + sub.x, oy + sub.y, out)
        else:
            rx = 17 if kind in ("Succeed", "Fail") else 4
            out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{node.w:.1f}" height="{node.h:.1f}" rx="{rx}" fill="{fill}" stroke="#334155"/>')
            out.append(f'<text x="{x + node.w / 2:.1f}" y="{y + 21:.1f}" text-anchor="middle">{escape(node.name)}</text>')
    for node in lay.nodes.values():
        for label, target in edges(node.state):
            if target not in lay.nodes:
                continue
            dest = lay.nodes[target]
            x1, y1 = ox + node.x + node.w / 2, oy + node.y + node.h
            x2, y2 = ox + dest.x + dest.w / 2, oy + dest.y
            catch = label.startswith("catch")
            style = 'stroke="#dc2626" stroke-dasharray="5 3"' if catch else 'stroke="#475569"'
            if y2 <= y1:  # same row or upward: route around the right side
                xr = max(ox + node.x + node.w, ox + dest.x + dest.w) + 10
                path = f"M{x1:.1f},{y1:.1f} L{x1:.1f},{y1 + 8:.1f} L{xr:.1f},{y1 + 8:.1f} L{xr:.1f},{y2 - 8:.1f} L{x2:.1f},{y2 - 8:.1f} L{x2:.1f},{y2:.1f}"
            else:
                path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{(y1 + y2) / 2:.1f} {x2:.1f},{(y1 + y2) / 2:.1f} {x2:.1f},{y2:.1f}"
            out.append(f'<path d="{path}" fill="none" {style} marker-end="url(#arrow)"/>')
            if label not in ("next",):
                text = "catch" if catch else ("otherwise" if label == "default" else "if")
                out.append(f'<text x="{(x1 + x2) / 2 + 4:.1f}" y="{(y1 + y2) / 2:.1f}" class="edge">{text}</text>')


def to_svg(asl: dict[str, Any], title: str) -> str:
    lay = layout(asl)
    margin = 20
    w, h = lay.w + 2 * margin + 40, lay.h + 2 * margin + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" font-family="Helvetica, Arial, sans-serif" font-size="12">',
        "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#475569\"/></marker>"
        "<style>.frame{font-weight:bold;fill:#334155}.edge{font-size:10px;fill:#64748b}</style></defs>",
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        f'<text x="{margin}" y="{margin + 4}" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    _draw(lay, margin, margin + 30, out)
    out.append("</svg>")
    return "\n".join(out) + "\n"

"""Draw an ASL state machine as an SVG picture (pure Python, deterministic output).

Sized for the README (at most ~880 px wide, drawn at 1:1, 13 px text): long state names wrap
inside their boxes. The top level flows top to bottom, states in rows by their longest distance
from StartAt. A Parallel state is a frame whose branches are lanes stacked inside it, each flowing
left to right (the branches run at the same time; stacking keeps them readable); a Map state is a
frame holding its item processor(s), top to bottom.

Edges: solid grey for Next, Choice rules ("if" / "otherwise"); dashed red for Catch; a transition
that is both a Next and a Catch is drawn as both (a solid and a dashed line side by side,
"next + catch"). A Task with Retry rules carries a loop marked "up to N retries" (N: the largest
MaxAttempts of its rules, i.e. retries after the first attempt). A green "succeeded" end follows
every top-level state with End; a Fail state is red. The same definition always gives the same
bytes, so a test can regenerate the README picture and compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Any

from fanout_kit.shared.asl_graph import edges

FONT = 13
CHAR_W = 7.3  # average width of a 13 px Helvetica/Arial character, a little generous
SMALL = 11
SMALL_CHAR_W = 5.8
LINE_H = 17
WRAP = 18  # characters per line inside a box
BOX_PAD_X = 10
BOX_PAD_Y = 9
PAD = 14
ROW_GAP = 40
COL_GAP = 28  # between the columns of a Parallel branch's lane (five states wide)
LANE_GAP = 10
FRAME_HEAD = 28
RETRY_TOP = 16  # room above a box for its retry loop in a left-to-right lane
SUCCEEDED = "succeeded"
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
GREY, RED, GREEN = "#475569", "#dc2626", "#15803d"


def wrap(text: str, width: int = WRAP) -> list[str]:
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def retries(state: dict[str, Any]) -> int:
    """The largest MaxAttempts of the state's Retry rules (retries after the first attempt)."""
    return max((r.get("MaxAttempts", 3) for r in state.get("Retry", [])), default=0)


def retry_label(state: dict[str, Any]) -> str:
    n = retries(state)
    return f"up to {n} retr{'y' if n == 1 else 'ies'}" if n else ""


@dataclass
class Node:
    name: str
    state: dict[str, Any]
    lines: list[str] = field(default_factory=list)
    w: float = 0
    h: float = 0
    x: float = 0
    y: float = 0
    inner: list["Layout"] = field(default_factory=list)
    lanes: bool = False  # Parallel: branches stacked as left-to-right lanes

    @property
    def kind(self) -> str:
        return self.state["Type"]


@dataclass
class Layout:
    nodes: dict[str, Node]
    w: float
    h: float
    across: bool  # True: left to right
    x: float = 0
    y: float = 0


def _depths(asl: dict[str, Any]) -> list[list[str]]:
    """States grouped by their longest distance from StartAt (a topological order of the graph;
    an edge back to a state still being visited, were there one, is ignored)."""
    states = asl["States"]
    order: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        seen.add(name)
        for _, target in reversed(list(edges(states[name]))):  # (reversed: the first rule stays first)
            if target in states and target not in seen:
                visit(target)
        order.append(name)

    visit(asl["StartAt"])
    order.reverse()
    position = {name: i for i, name in enumerate(order)}
    depth = {name: 0 for name in order}
    for name in order:
        for _, target in edges(states[name]):
            if target in position and position[target] > position[name]:
                depth[target] = max(depth[target], depth[name] + 1)
    groups: dict[int, list[str]] = {}
    for name in order:
        groups.setdefault(depth[name], []).append(name)
    return [groups[d] for d in sorted(groups)]


def _with_success_end(asl: dict[str, Any]) -> dict[str, Any]:
    """A copy whose top-level End states lead to a drawn "succeeded" end."""
    states = dict(asl["States"])
    ends = [n for n, s in states.items() if s.get("End") and s["Type"] not in ("Fail", "Succeed")]
    if not ends:
        return asl
    for name in ends:
        states[name] = {**states[name], "Next": SUCCEEDED}
    states[SUCCEEDED] = {"Type": "Succeed", "Synthetic": True}
    return {**asl, "States": states}


def _size(node: Node, across: bool) -> None:
    state = node.state
    subs = state.get("Branches") or ([state["ItemProcessor"]] if "ItemProcessor" in state else [])
    if subs:
        node.lanes = state["Type"] == "Parallel"
        node.inner = [layout(s, across=node.lanes) for s in subs]
        label_w = len(_frame_label(node)) * (CHAR_W + 0.6) + 2 * PAD
        if node.lanes:
            node.w = max(max(sub.w for sub in node.inner) + 2 * PAD, label_w)
            node.h = FRAME_HEAD + sum(sub.h for sub in node.inner) + LANE_GAP * (len(subs) - 1) + PAD
        else:
            node.w = max(sum(sub.w for sub in node.inner) + PAD * (len(subs) + 1), label_w)
            node.h = FRAME_HEAD + max(sub.h for sub in node.inner) + PAD
        return
    node.lines = wrap(node.name)
    node.w = max(len(line) for line in node.lines) * CHAR_W + 2 * BOX_PAD_X
    node.h = len(node.lines) * LINE_H + 2 * BOX_PAD_Y - 4


def _extent(node: Node, across: bool) -> tuple[float, float]:
    """Room a node takes in its layout: its box plus its retry label (right of it going down,
    above it going across)."""
    label = retry_label(node.state)
    if not label or node.inner:
        return node.w, node.h
    if across:
        return max(node.w, len(label) * SMALL_CHAR_W + 24), node.h + RETRY_TOP
    return node.w + 2 * (len(label) * SMALL_CHAR_W + 26), node.h  # both sides: the box stays centred


LANE_FREE = 170  # room left in the middle of a row that an edge passes over
MAX_ROW_W = 850  # the README shows pictures at most ~880 px wide (with the margins)


def _wrap_rows(groups: list[list[str]], extents: dict[str, tuple[float, float]]) -> list[list[str]]:
    rows: list[list[str]] = []
    for group in groups:
        row: list[str] = []
        for name in group:
            if row and sum(extents[n][0] for n in row) + PAD * len(row) + extents[name][0] > MAX_ROW_W:
                rows.append(row)
                row = []
            row.append(name)
        rows.append(row)
    return rows


def _crossed_rows(asl: dict[str, Any], rows: list[list[str]]) -> set[int]:
    """Rows that an edge passes over on its way down (it skips them)."""
    row_of = {name: i for i, row in enumerate(rows) for name in row}
    crossed: set[int] = set()
    for name, state in asl["States"].items():
        for _, target in edges(state):
            if name in row_of and target in row_of and row_of[target] - row_of[name] > 1:
                crossed.update(range(row_of[name] + 1, row_of[target]))
    return crossed


def layout(asl: dict[str, Any], *, across: bool = False) -> Layout:
    nodes: dict[str, Node] = {}
    groups = _depths(asl)
    for group in groups:
        for name in group:
            node = Node(name, asl["States"][name])
            _size(node, across)
            nodes[name] = node
    extents = {name: _extent(node, across) for name, node in nodes.items()}
    if across:  # columns left to right, the states of a column stacked
        height = max(sum(extents[n][1] for n in g) + PAD * (len(g) - 1) for g in groups)
        x = 0.0
        for group in groups:
            col_h = sum(extents[n][1] for n in group) + PAD * (len(group) - 1)
            col_w = max(extents[n][0] for n in group)
            y = (height - col_h) / 2
            for name in group:
                node = nodes[name]
                ew, eh = extents[name]
                node.x, node.y = x + (col_w - node.w) / 2, y + (eh - node.h)
                y += eh + PAD
            x += col_w + COL_GAP
        width = x - COL_GAP
    else:  # rows top to bottom, the states of a row side by side; a row too wide goes on in the next
        groups = _wrap_rows(groups, extents)
        plain_widths = [sum(extents[n][0] for n in g) + PAD * (len(g) - 1) for g in groups]
        crossed = {  # a row that an edge passes over keeps a lane free in the middle, if it fits
            i for i in _crossed_rows(asl, groups) if plain_widths[i] + LANE_FREE <= MAX_ROW_W and len(groups[i]) > 1
        }
        row_widths = [
            sum(extents[n][0] for n in g) + PAD * (len(g) - 1) + (LANE_FREE if i in crossed else 0)
            for i, g in enumerate(groups)
        ]
        width = max(row_widths)
        y = 0.0
        for i, group in enumerate(groups):
            x = (width - row_widths[i]) / 2
            half = (len(group) + 1) // 2 if i in crossed else len(group)
            for k, name in enumerate(group):
                if k == half:
                    x += LANE_FREE
                node = nodes[name]
                node.x, node.y = x + (extents[name][0] - node.w) / 2, y
                x += extents[name][0] + PAD
            y += max(nodes[n].h for n in group) + ROW_GAP
        height = y - ROW_GAP
    for node in nodes.values():
        _place_inner(node)
    return Layout(nodes, width, height, across)


def _place_inner(node: Node) -> None:
    if not node.inner:
        return
    if node.lanes:
        y = node.y + FRAME_HEAD
        for sub in node.inner:
            sub.x, sub.y = node.x + (node.w - sub.w) / 2, y
            y += sub.h + LANE_GAP
        return
    total = sum(sub.w for sub in node.inner) + PAD * (len(node.inner) - 1)
    x = node.x + (node.w - total) / 2
    for sub in node.inner:
        sub.x, sub.y = x, node.y + FRAME_HEAD
        x += sub.w + PAD


def _frame_label(node: Node) -> str:
    if node.kind == "Map":
        mode = node.state["ItemProcessor"].get("ProcessorConfig", {}).get("Mode", "INLINE")
        return f"{node.name} (Map, {mode})"
    if node.kind == "Parallel":
        return f"{node.name} (Parallel: {len(node.state['Branches'])} branches at the same time)"
    return f"{node.name} ({node.kind})"


def _text(x: float, y: float, text: str, cls: str = "", anchor: str = "middle") -> str:
    klass = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}>{escape(text)}</text>'


def _label(x: float, y: float, text: str, color: str, beside: bool = False) -> list[str]:
    """A small edge label on a white background, centred on (x, y), or just right of it."""
    w = len(text) * SMALL_CHAR_W + 6
    if beside:
        x += w / 2 + 4
    return [
        f'<rect x="{x - w / 2:.1f}" y="{y - 9:.1f}" width="{w:.1f}" height="14" rx="3" fill="#ffffff" fill-opacity="0.9"/>',
        f'<text x="{x:.1f}" y="{y + 2:.1f}" text-anchor="middle" class="edge" fill="{color}">{escape(text)}</text>',
    ]


def _draw_node(node: Node, x: float, y: float, across: bool, out: list[str]) -> None:
    fill = COLORS.get(node.kind, "#ffffff")
    if node.inner:
        out.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{node.w:.1f}" height="{node.h:.1f}" rx="8" '
            f'fill="{fill}" stroke="#64748b" stroke-dasharray="5 3"/>'
        )
        out.append(_text(x + 10, y + 19, _frame_label(node), "frame", "start"))
        return
    end = node.kind in ("Succeed", "Fail")
    rx = node.h / 2 if end else 5
    stroke = {"Succeed": GREEN, "Fail": RED}.get(node.kind, "#334155")
    out.append(f"<g><title>{escape(node.name)}</title>")  # the full name, also as a tooltip
    out.append(
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{node.w:.1f}" height="{node.h:.1f}" rx="{rx:.1f}" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="{2 if end else 1}"/>'
    )
    top = y + BOX_PAD_Y + 9.5
    for i, line in enumerate(node.lines):
        out.append(_text(x + node.w / 2, top + i * LINE_H, line))
    out.append("</g>")
    label = retry_label(node.state)
    if label:  # a loop back onto the box, and its count
        if across:  # above the box, right-aligned
            lx, ly = x + node.w - 10, y
            out.append(
                f'<path d="M{lx - 16:.1f},{ly:.1f} C{lx - 16:.1f},{ly - 13:.1f} {lx:.1f},{ly - 13:.1f} '
                f'{lx:.1f},{ly:.1f}" fill="none" stroke="{GREY}" marker-end="url(#arrow)"/>'
            )
            out.append(_text(lx - 20, ly - 4, label, "retry", "end"))
        else:  # right of the box
            lx, ly = x + node.w, y + node.h / 2
            out.append(
                f'<path d="M{lx:.1f},{ly - 7:.1f} C{lx + 16:.1f},{ly - 9:.1f} {lx + 16:.1f},{ly + 9:.1f} '
                f'{lx:.1f},{ly + 7:.1f}" fill="none" stroke="{GREY}" marker-end="url(#arrow)"/>'
            )
            out.append(_text(lx + 20, ly + 4, label, "retry", "start"))


def _edge_kinds(state: dict[str, Any]) -> dict[str, list[str]]:
    """Target -> the kinds of transition to it: next, if, otherwise, catch."""
    kinds: dict[str, list[str]] = {}
    for label, target in edges(state):
        kind = "catch" if label.startswith("catch") else {"next": "next", "default": "otherwise"}.get(label, "if")
        if kind not in kinds.setdefault(target, []):
            kinds[target].append(kind)
    return kinds


def _draw(lay: Layout, ox: float, oy: float, out: list[str]) -> None:
    for node in lay.nodes.values():
        _draw_node(node, ox + node.x, oy + node.y, lay.across, out)
        for sub in node.inner:
            _draw(sub, ox + sub.x, oy + sub.y, out)
    for node in lay.nodes.values():
        for target, kinds in _edge_kinds(node.state).items():
            if target in lay.nodes:
                _draw_edge(node, lay.nodes[target], kinds, lay.across, ox, oy, out)


def _draw_edge(
    node: Node, dest: Node, kinds: list[str], across: bool, ox: float, oy: float, out: list[str]
) -> None:
    if across:
        x1, y1 = ox + node.x + node.w, oy + node.y + node.h / 2
        x2, y2 = ox + dest.x, oy + dest.y + dest.h / 2
        mx = (x1 + x2) / 2
        path = f"M{x1:.1f},{y1:.1f} C{mx:.1f},{y1:.1f} {mx:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
        shift = (0.0, 3.0)
        label_at = (x1 + (x2 - x1) * 0.5, y1 + (y2 - y1) * 0.5 - 9)
    else:
        x1, y1 = ox + node.x + node.w / 2, oy + node.y + node.h
        x2, y2 = ox + dest.x + dest.w / 2, oy + dest.y
        if y2 <= y1:  # same row or upward: round the right side
            xr = max(ox + node.x + node.w, ox + dest.x + dest.w) + 12
            path = (
                f"M{x1:.1f},{y1:.1f} L{x1:.1f},{y1 + 10:.1f} L{xr:.1f},{y1 + 10:.1f} "
                f"L{xr:.1f},{y2 - 10:.1f} L{x2:.1f},{y2 - 10:.1f} L{x2:.1f},{y2:.1f}"
            )
        else:
            my = (y1 + y2) / 2
            path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{my:.1f} {x2:.1f},{my:.1f} {x2:.1f},{y2:.1f}"
        shift = (3.0, 0.0)
        label_at = ((x1 + x2) / 2, (y1 + y2) / 2)
    normal = [k for k in kinds if k != "catch"]
    both = bool(normal) and "catch" in kinds
    dx, dy = shift if both else (0.0, 0.0)
    if normal:
        out.append(
            f'<path d="{path}" transform="translate({-dx:.1f},{-dy:.1f})" fill="none" stroke="{GREY}" '
            'stroke-width="1.3" marker-end="url(#arrow)"/>'
        )
    if "catch" in kinds:
        out.append(
            f'<path d="{path}" transform="translate({dx:.1f},{dy:.1f})" fill="none" stroke="{RED}" '
            'stroke-width="1.3" stroke-dasharray="6 3" marker-end="url(#arrow-red)"/>'
        )
    text = " + ".join(k for k in kinds if k != "next" or both)
    if text:
        out.extend(_label(*label_at, text, RED if "catch" in kinds else "#475569", beside=not across))


LEGEND = (
    "solid grey: the next state, or a Choice rule (if / otherwise)",
    "dashed red: a Catch; a transition that is both is drawn twice (next + catch)",
    "up to N retries: the state's Retry rules, N = their largest MaxAttempts (retries after the first attempt)",
)


def to_svg(asl: dict[str, Any], title: str) -> str:
    lay = layout(_with_success_end(asl))
    margin = 16
    legend = LEGEND
    w = lay.w + 2 * margin
    h = lay.h + 2 * margin + 34 + 10 + LINE_H * len(legend)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0f}" height="{h:.0f}" viewBox="0 0 {w:.0f} {h:.0f}" '
        f'font-family="Helvetica, Arial, sans-serif" font-size="{FONT}" fill="#0f172a">',
        "<defs>"
        f'<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{GREY}"/></marker>'
        f'<marker id="arrow-red" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="{RED}"/></marker>'
        f"<style>.frame{{font-weight:bold;fill:#334155}}.edge{{font-size:{SMALL}px}}"
        f".retry{{font-size:{SMALL}px;fill:#475569}}.legend{{font-size:{SMALL}px;fill:#475569}}</style></defs>",
        '<rect width="100%" height="100%" fill="#ffffff"/>',
        f'<text x="{margin}" y="{margin + 8}" font-size="17" font-weight="bold">{escape(title)}</text>',
    ]
    _draw(lay, margin, margin + 34, out)
    for i, line in enumerate(legend):
        out.append(_text(margin, margin + 34 + lay.h + 24 + i * LINE_H, line, "legend", "start"))
    out.append("</svg>")
    return "\n".join(out) + "\n"

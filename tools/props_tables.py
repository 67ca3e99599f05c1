"""Each construct's prop table on its pattern page, generated from the ``Args:`` sections of the
construct's docstring and of the shared props it takes (``fanout_kit.shared.props``), so a prop is
described once, where it is defined. Written by ``python -m tools.workflows`` between the
``<!-- props:NAME -->`` markers; tests/test_props.py checks the tables current and every
documented default equal to the code's."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import griffe

from tools.markers import replace_marked

ROOT = Path(__file__).resolve().parents[1]
# page -> the construct whose props it shows
PAGES = {
    "docs/patterns/parallel.md": "ParallelFanOut",
    "docs/patterns/distributed-map.md": "DistributedMapFanOut",
    "docs/patterns/completion-ledger.md": "CompletionLedger",
}
NOT_PROPS = ("scope", "construct_id", "props", "**props")
# "Default X." / "Default: X." (a period inside ``...`` does not end it); "Required."
DEFAULT = re.compile(r"\s*\b(?:Default:? ((?:``[^`]*``|[^.`])+)\.|(Required)\.)")


@dataclass(frozen=True)
class Prop:
    name: str
    description: str  # the Args text without its default sentence
    default: str  # the documented default ("required" for a required prop)
    shared: bool  # one of the shared props (fanout_kit.shared.props)


def args(obj: object) -> dict[str, str]:
    """The ``Args:`` (or, for a TypedDict, ``Attributes:``) of ``obj``'s docstring: name -> text
    (one line)."""
    doc = griffe.Docstring(inspect.getdoc(obj) or "", parser="google", parser_options={"warn_missing_types": False})
    found: dict[str, str] = {}
    for section in doc.parsed:
        if section.kind.value in ("parameters", "attributes"):
            found.update({p.name: " ".join(p.description.split()) for p in section.value})
    return found


def split_default(text: str) -> tuple[str, str]:
    """(description, default) of one Args text; the default as written (``...`` kept)."""
    match = DEFAULT.search(text)
    if not match:
        return text, ""
    default = "required" if match.group(2) else match.group(1).strip()
    return (text[: match.start()] + text[match.end():]).strip(), default


def construct_class(name: str) -> type:
    import fanout_kit

    return getattr(fanout_kit, name)


def shared_kinds(construct: type) -> tuple[type, ...]:
    """The TypedDicts documenting the construct's ``**props``: WorkflowProps and the SharedProps
    it extends, or SharedProps."""
    from fanout_kit.shared.props import SharedProps, WorkflowProps

    workflow = "WorkflowProps" in str(inspect.signature(construct.__init__).parameters["props"])
    return (WorkflowProps, SharedProps) if workflow else (SharedProps,)


def documented_props(construct: type) -> list[Prop]:
    """The construct's own props, then the shared ones, each with its description and default."""
    props = []
    for shared, source in ((False, construct.__init__), *((True, kind) for kind in shared_kinds(construct))):
        for name, text in args(source).items():
            if name not in NOT_PROPS:
                description, default = split_default(text)
                props.append(Prop(name, description, default, shared))
    return props


def _markdown(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|")


def table(construct: type) -> str:
    lines = ["| prop | what it is | default |", "|---|---|---|"]
    for prop in documented_props(construct):
        lines.append(f"| `{prop.name}` | {_markdown(prop.description)} | {_markdown(prop.default)} |")
    return "\n".join(lines) + "\n"


def props_pages(files: dict[Path, str]) -> dict[Path, str]:
    """Each page of PAGES -> its text (from ``files`` when already generated) with its table."""
    out = {}
    for page, name in PAGES.items():
        path = ROOT / page
        text = files.get(path) or path.read_text()
        out[path] = replace_marked(text, f"props:{name}", table(construct_class(name)), page)
    return out

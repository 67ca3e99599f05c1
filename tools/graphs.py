"""Draw each workflow's state machine (from the synthesized ASL) as an SVG for its pattern page
in docs/ (the README shows the Parallel one).

    .venv/bin/python -m tools.graphs            # writes docs/<workflow>-workflow.svg (dev)

tests/test_graphs.py regenerates the pictures and fails when a committed one is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fanout_kit.local.template import SynthesizedApp, state_machine_definitions
from tools.graph_svg import to_svg

DOCS = Path(__file__).resolve().parents[1] / "docs"
WORKFLOWS = {"parallel": "Parallel workflow", "map": "Distributed Map workflow"}


def render(app: SynthesizedApp) -> dict[str, str]:
    """File name -> SVG text, one per workflow."""
    out = {}
    for workflow, title in WORKFLOWS.items():
        (definition,) = state_machine_definitions(app.template(workflow), app.region).values()
        out[f"{workflow}-workflow.svg"] = to_svg(definition, f"{title} ({app.env_name})")
    return out


def main(argv: list[str] | None = None) -> int:
    from fanout_kit.shared.jsii_node import use_venv_node

    use_venv_node()
    from fanout_kit.local.template import synthesize

    env_name = (argv or sys.argv[1:] or ["dev"])[0]
    DOCS.mkdir(exist_ok=True)
    for name, svg in render(synthesize(env_name)).items():
        (DOCS / name).write_text(svg)
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

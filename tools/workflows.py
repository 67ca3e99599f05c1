"""Regenerate what is derived from this app's synthesized workflows, for review in a diff:

- ``statemachines/<env>/<workflow>.asl.json``: each workflow's ASL as it deploys, per environment
  of cdk.json (references to other resources shown as ``${LogicalId.Arn}``; see
  ``fanout_kit.local.template.deployed_definitions``);
- the Mermaid picture of each workflow (dev) between the ``<!-- workflow-graph:NAME -->`` markers
  of README.md, docs/index.md and the pattern pages (tools/mermaid.py);
- each construct's prop table on its pattern page, from the ``Args:`` of its docstring and of the
  props it shares (tools/props_tables.py).

    .venv/bin/python -m tools.workflows            # rewrite them
    .venv/bin/python -m tools.workflows --check    # exit 1 naming what is out of date

tests/test_statemachines.py fails when any of them is out of date.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tools.markers import replace_marked
from tools.mermaid import to_mermaid
from tools.props_tables import props_pages

ROOT = Path(__file__).resolve().parents[1]
STATEMACHINES = ROOT / "statemachines"
WORKFLOWS = ("parallel", "map")  # the workflows with a state machine (the ledger has none)
GRAPH_ENV = "dev"
# file -> the workflows whose picture it shows
PICTURES = {
    "README.md": ("parallel",),
    "docs/index.md": ("parallel",),
    "docs/patterns/parallel.md": ("parallel",),
    "docs/patterns/distributed-map.md": ("map",),
}


def asl_files(apps: dict) -> dict[Path, str]:
    """statemachines/ path -> its text, from {env: SynthesizedApp}."""
    from fanout_kit.local.template import deployed_definitions

    out: dict[Path, str] = {}
    for env_name, app in apps.items():
        for workflow in WORKFLOWS:
            (definition,) = deployed_definitions(app.template(workflow)).values()
            out[STATEMACHINES / env_name / f"{workflow}.asl.json"] = json.dumps(definition, indent=2) + "\n"
    return out


def pictures(app) -> dict[str, str]:
    """workflow -> its Mermaid block, drawn from ``app``'s definitions."""
    from fanout_kit.local.template import deployed_definitions

    return {wf: to_mermaid(next(iter(deployed_definitions(app.template(wf)).values()))) for wf in WORKFLOWS}


def page_files(app) -> dict[Path, str]:
    """Each page of PICTURES -> its text with the pictures between its markers brought up to date."""
    drawn = pictures(app)
    out: dict[Path, str] = {}
    for name, workflows in PICTURES.items():
        path = ROOT / name
        text = path.read_text()
        for workflow in workflows:
            text = replace_marked(text, f"workflow-graph:{workflow}", drawn[workflow], name)
        out[path] = text
    return out


def generated(apps: dict) -> dict[Path, str]:
    files = {**asl_files(apps), **page_files(apps[GRAPH_ENV])}
    return {**files, **props_pages(files)}


def stale(apps: dict) -> list[Path]:
    """What is out of date (or an .asl.json no workflow renders any more)."""
    files = generated(apps)
    out = [path for path, text in files.items() if not path.exists() or path.read_text() != text]
    return out + sorted(set(STATEMACHINES.rglob("*.asl.json")) - set(files))


def main(argv: list[str] | None = None) -> int:
    from fanout_kit.shared.jsii_node import use_venv_node

    use_venv_node()
    from fanout_kit.local.template import synthesize
    from fanout_kit.shared.app_config import environment_names

    check = "--check" in (argv if argv is not None else sys.argv[1:])
    apps = {name: synthesize(name) for name in environment_names()}
    if check:
        for path in stale(apps):
            print(f"out of date: {path.relative_to(ROOT)} (run .venv/bin/python -m tools.workflows)")
        return 1 if stale(apps) else 0
    for path in sorted(set(STATEMACHINES.rglob("*.asl.json")) - set(generated(apps))):
        path.unlink()
        print(f"removed {path.relative_to(ROOT)}")
    for path, text in generated(apps).items():
        if not path.exists() or path.read_text() != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

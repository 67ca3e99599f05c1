"""The README is the newcomer's first page: at most 200 lines (what the kit is, the two commands, a
taste of the own-app path, the table of patterns, links into the docs site, issue 21), and every
relative link in it leads somewhere: to a file of this repository and, for a ``page.md#anchor``
link, to a heading of that page (the site's anchors: mkdocs' toc slugs)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 200
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


def prose(text: str) -> str:
    """The text outside fenced code blocks (a link-like string in code is not a link)."""
    out, fence = [], None
    for line in text.splitlines():
        match = FENCE.match(line)
        if match and fence is None:
            fence = match.group(1)
        elif match and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            out.append(line)
    return "\n".join(out)


def slug(heading: str) -> str:
    """Python-Markdown's toc slug (mkdocs' anchors): lowercase, drop what is not a word character,
    space or hyphen, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {slug(line.lstrip("#").strip()) for line in prose(page.read_text()).splitlines()
            if re.match(r"#{1,6} ", line)}


def broken_links(text: str, base: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # http(s):, mailto:, and the README's own anchors (GitHub's, not checked here)
        path, _, anchor = target.partition("#")
        file = (base / path).resolve()
        if not file.exists() or ROOT not in file.parents:
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {path}")
    return broken


def test_the_readme_has_at_most_200_lines():
    """Its prose: the generated workflow picture (between its markers, tools/workflows.py) is not counted."""
    text = re.sub(r"<!-- workflow-graph:(\w+) -->.*?<!-- /workflow-graph:\1 -->", "", README.read_text(), flags=re.S)
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines, at most {MAX_LINES}: move the detail to its page in docs/")


def test_every_relative_link_in_the_readme_points_at_an_existing_file():
    assert broken_links(README.read_text(), ROOT) == []


def test_the_readme_links_into_every_page_of_the_site():
    linked = {target.partition("#")[0] for target in LINK.findall(prose(README.read_text()))}
    pages = {"docs/getting-started.md", "docs/patterns/parallel.md", "docs/patterns/distributed-map.md",
             "docs/patterns/completion-ledger.md", "docs/operations.md", "docs/cost.md", "docs/testing.md",
             "docs/local-engine.md", "docs/design.md", "docs/benchmarks.md"}
    assert pages <= linked, pages - linked


def test_a_broken_link_or_anchor_is_reported():
    text = ("[ok](docs/cost.md) [ok](docs/cost.md#per-million-items) ![pic](docs/design.md)\n"
            "[gone](docs/no-such-page.md) [bad anchor](docs/cost.md#no-such-heading) [web](https://aws.amazon.com)\n"
            "```\n[in code](not/a/link.md)\n```\n")
    assert broken_links(text, ROOT) == [
        "docs/no-such-page.md: no such file", "docs/cost.md#no-such-heading: no heading #no-such-heading in docs/cost.md"]
    assert slug("Your own CDK app") == "your-own-cdk-app"
    assert slug("Final status rules (DynamoDB, one item per `batchId`)") == "final-status-rules-dynamodb-one-item-per-batchid"


def test_the_readme_taste_of_your_own_app_synthesizes(tmp_path):
    """The README's own-app snippet is a complete CDK app: run as written (with a functions/ folder),
    it synthesizes a Parallel workflow of the two tasks and the outputs the `fanout` command reads."""
    import json
    import os
    import subprocess
    import sys

    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.MULTILINE | re.DOTALL)
    assert blocks, "README.md shows no Python block"
    (tmp_path / "app.py").write_text(blocks[0])
    (tmp_path / "functions").mkdir()
    (tmp_path / "functions" / "work.py").write_text("def handler(event, context):\n    return {}\n")
    done = subprocess.run([sys.executable, "app.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CDK_OUTDIR": str(tmp_path / "cdk.out")})
    assert done.returncode == 0, done.stderr[-3000:]
    template = json.loads((tmp_path / "cdk.out" / "Orders.template.json").read_text())
    (machine,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    definition = json.dumps(machine["Properties"]["DefinitionString"])
    assert "Run Reserve" in definition and "Run Charge" in definition
    for output in ("StateMachineArn", "DeadLetterQueueUrl", "StatusTableName"):  # add_outputs()
        assert any(key.startswith(f"Orders{output}") for key in template["Outputs"]), (output, list(template["Outputs"]))

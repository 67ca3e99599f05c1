"""The documentation site (mkdocs.yml, docs/) builds with ``mkdocs build --strict`` (a broken link,
anchor, API reference or docstring fails it), shows the kit's version, and every ``fanout ...``
command the docs and the README show is one the CLI's parser accepts, so they cannot drift apart."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fanout_kit.cli.main import build_parser
from fanout_kit import __version__

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
SOURCES = [*PAGES, ROOT / "README.md"]
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
INLINE = re.compile(r"`(fanout [^`]+)`")
SHELL_STOPS = {"|", "||", "&&", ";", ">", ">>", "2>&1", "<"}
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console"}
DEMO_INPUT = ["run", "examples/batch.json"]  # ./setup.sh ARGS runs `fanout run examples/batch.json ARGS`


def build_site(tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def test_the_site_builds_strictly_and_shows_the_version(tmp_path):
    done = build_site(tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    site = tmp_path / "site"
    assert f"Fan-out kit {__version__}" in (site / "index.html").read_text()
    # the workflow pictures: Mermaid blocks that mkdocs-material draws (custom fence in mkdocs.yml)
    assert '<pre class="mermaid"><code>flowchart TD' in (site / "patterns" / "parallel.html").read_text()
    constructs = (site / "reference" / "constructs.html").read_text()
    for name in ("patterns.parallel.construct.ParallelFanOut", "patterns.distributed_map.construct.DistributedMapFanOut",
                 "patterns.completion_ledger.construct.CompletionLedger", "patterns.parallel.construct.FanOutTask"):
        assert f'id="fanout_kit.{name}"' in constructs, name
    assert "fanout dlq redrive" in (site / "reference" / "cli.html").read_text()  # drawn from the parser
    assert f"[{__version__}]" in (site / "changelog.html").read_text()


def test_the_build_treats_a_broken_link_or_anchor_as_an_error():
    """mkdocs fails a strict build on warnings; these settings make a broken link, anchor or nav
    entry a warning (checked by hand: a link to a missing page or anchor aborts the build). --quiet
    would hide the warnings from the strict count, so the test above builds without it."""
    import yaml

    class Loader(yaml.SafeLoader):  # mkdocs.yml names a Python function (!!python/name:...): keep its name
        pass

    Loader.add_multi_constructor("tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)  # noqa: S506 (a safe loader)
    assert config["strict"] is True
    assert config["validation"]["links"] == {
        "not_found": "warn", "anchors": "warn", "absolute_links": "warn", "unrecognized_links": "warn"}
    assert config["validation"]["nav"]["not_found"] == "warn"


def shown_commands(path: Path) -> list[tuple[int, str]]:
    """(line number, command) for each command line in a shell code block (bash, sh, console or
    none; in a block with ``$`` prompts only the prompted lines), each ``./setup.sh ...`` demo line,
    and each inline `fanout ...` code span."""
    found = []
    block: list[tuple[int, str]] | None = None
    fence = language = ""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        match = FENCE.match(line)
        if match and block is None:
            block, fence, language = [], match.group(2), match.group(3).strip()
            continue
        if match and block is not None and match.group(2).startswith(fence) and not match.group(3).strip():
            if language in SHELL_BLOCKS:
                prompted = any(text.startswith("$ ") for _, text in block)
                for n, text in block:
                    if prompted and not text.startswith("$ "):
                        continue
                    text = text.removeprefix("$ ")
                    if text.startswith("fanout ") or (text.startswith("./setup.sh ") and "--no-demo" not in text):
                        found.append((n, text))
            block = None
            continue
        if block is not None:
            block.append((number, line.strip()))
        else:
            found.extend((number, span) for span in INLINE.findall(line))
    return found


def as_argv(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    for i, word in enumerate(words):
        if word in SHELL_STOPS:
            words = words[:i]
            break
    program, args = words[0], words[1:]
    return DEMO_INPUT + args if program == "./setup.sh" else args


def command_path_error(words: list[str]) -> str | None:
    """For a mention such as `fanout dlq redrive`: the error if it is not a command of the CLI."""
    parser = build_parser()
    for word in words:
        choices = next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})
        if word not in choices:
            return f"{word!r} is not a command here (choose from {', '.join(choices)})"
        parser = choices[word]
    return None


def parse_error(argv: list[str]) -> str | None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            if exc.code:
                return err.getvalue().strip().splitlines()[-1]
    return None


COMMANDS = [(path, number, command) for path in SOURCES for number, command in shown_commands(path)]


def test_the_docs_show_commands_of_every_kind():
    kinds = {as_argv(command)[0] for _, _, command in COMMANDS if as_argv(command)}
    assert {"run", "ledger", "start", "watch", "status", "dlq", "--version"} <= kinds, kinds


@pytest.mark.parametrize(
    "path, number, command", COMMANDS, ids=[f"{p.relative_to(ROOT)}:{n}" for p, n, _ in COMMANDS]
)
def test_every_command_shown_is_one_the_cli_accepts(path, number, command):
    argv = as_argv(command)
    mention = all(re.fullmatch(r"[a-z][a-z-]*", word) for word in argv)  # `fanout dlq redrive`
    error = command_path_error(argv) if mention else parse_error(argv)
    assert error is None, f"{path.relative_to(ROOT)}:{number}: `{command}`: {error}"


def test_a_command_the_cli_refuses_is_caught():
    assert parse_error(as_argv("fanout run examples/batch.json --no-such-flag")) is not None
    assert parse_error(as_argv("fanout dlq redrive --env dev")) is not None  # --batch is required
    assert parse_error(as_argv("./setup.sh --fail ChargePayment=transient:2")) is None
    assert command_path_error(["dlq", "resend"]) is not None
    assert command_path_error(["dlq", "redrive"]) is None

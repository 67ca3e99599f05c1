"""mkdocs hooks: the kit's one version number (fanout_kit/_version.py) in the site's title, and the
command-line reference drawn from the CLI's own argparse parser (``<!-- fanout-help -->`` in a
page becomes the ``--help`` of every command), so the reference cannot drift from the CLI."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

HELP_MARKER = "<!-- fanout-help -->"


def on_config(config, **kwargs):
    source = (Path(config["config_file_path"]).parent / "fanout_kit" / "_version.py").read_text()
    version = re.search(r'^__version__ = "([^"]+)"$', source, flags=re.MULTILINE).group(1)
    config["site_name"] = f"{config['site_name']} {version}"
    config["extra"]["version"] = version
    return config


def on_page_markdown(markdown, page, config, files, **kwargs):
    if HELP_MARKER not in markdown:
        return markdown
    return markdown.replace(HELP_MARKER, cli_help_markdown())


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:  # argparse keeps subparsers only there
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def cli_help_markdown() -> str:
    from fanout_kit.cli.main import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help at the terminal width: fix it
    parser = build_parser()
    sections = [("fanout", parser)]
    for name, sub in _subcommands(parser):
        sections.append((f"fanout {name}", sub))
        sections.extend((f"fanout {name} {inner}", p) for inner, p in _subcommands(sub))
    out = []
    for title, sub in sections:
        out.append(f"### `{title}`\n\n```text\n{sub.format_help().rstrip()}\n```\n")
    return "\n".join(out)

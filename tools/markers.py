"""Generated text inside a hand-written page: what lies between ``<!-- KEY -->`` and
``<!-- /KEY -->`` is replaced, the rest of the page is left as it is."""

from __future__ import annotations

import re


def replace_marked(text: str, key: str, content: str, page: str) -> str:
    """``text`` with ``content`` between the ``key`` markers (``page``: named in the error)."""
    pattern = re.compile(rf"(<!-- {re.escape(key)} -->\n)(.*?)(<!-- /{re.escape(key)} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{page} has no <!-- {key} --> ... <!-- /{key} --> markers: add them where the text goes")
    return pattern.sub(lambda m: m.group(1) + content + m.group(3), text)

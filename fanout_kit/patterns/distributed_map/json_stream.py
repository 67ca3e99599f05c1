"""A JSON array read one element at a time from a stream of byte chunks (pure logic).

Used for the Map workflow's inputs and outputs that can be large: PrepareBatch's JSON manifests
(fanout_kit.patterns.distributed_map.manifest) and the Distributed Map's ResultWriter files (fanout_kit.patterns.distributed_map.result_files,
ForwardFailedItems and ``fanout dlq redrive``). Memory stays bounded by the largest element, not
the file: the standard library's ``json.JSONDecoder.raw_decode`` parses each element from a buffer
that holds only what has not been parsed yet. (No third-party streaming parser: the Lambda asset
ships the kit's code only, and this is ~100 lines the manifest tests already cover.)
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

READ_CHUNK_BYTES = 64 * 1024


def _decoded(chunks: Iterable[bytes], where: str, error: Callable[[str], Exception]) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    try:
        for chunk in chunks:
            yield decoder.decode(chunk)
            offset += len(chunk)
        yield decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text ({exc.reason} at byte {offset + exc.start})") from None


def iter_json_array(
    chunks: Iterable[bytes],
    where: str,
    *,
    max_value_bytes: int,
    error: Callable[[str], Exception] = ValueError,
    too_large: Callable[[int], str] | None = None,
) -> Iterator[Any]:
    """The elements of the JSON array in ``chunks``, one at a time. A problem raises
    ``error(message)``, the message naming ``where`` and the element's index; an element whose text
    grows past ``8 * max_value_bytes`` (pretty-printed JSON of an element at the limit) without
    parsing raises ``error(too_large(index))``."""
    text = _decoded(chunks, where, error)
    decoder = json.JSONDecoder()
    buf, pos, eof, index = "", 0, False, 0
    max_pending = 8 * max_value_bytes + READ_CHUNK_BYTES
    too_large = too_large or (lambda i: f"{where}[{i}]: larger than {max_value_bytes} bytes")

    def more() -> bool:
        nonlocal buf, pos, eof
        if eof:
            return False
        try:
            piece = next(text)
        except StopIteration:
            eof = True
            return False
        buf, pos = buf[pos:] + piece, 0
        return True

    def skip_ws() -> str | None:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf):
                return buf[pos]
            if not more():
                return None

    if skip_ws() != "[":
        raise error(f"{where}: must be one array of items, a JSON array (it must start with '[')")
    pos += 1
    expect_item = True
    if skip_ws() == "]":
        pos += 1
        expect_item = False
    while expect_item:
        if skip_ws() is None:
            raise error(f"{where}: the JSON array ends early, after item {index - 1}")
        while True:
            try:
                item, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                if len(buf) - pos > max_pending:
                    raise error(too_large(index)) from None
                if more():
                    continue
                raise error(f"{where}[{index}]: not valid JSON ({exc.msg})") from None
            if end == len(buf) and more():
                continue  # a number (or literal) may go on in the next chunk
            break
        pos = end
        yield item
        index += 1
        following = skip_ws()
        if following == ",":
            pos += 1
        elif following == "]":
            pos += 1
            expect_item = False
        else:
            raise error(
                f"{where}: expected ',' or ']' after item {index - 1}, got "
                + ("the end of the file" if following is None else repr(following))
            )
    if skip_ws() is not None:
        raise error(f"{where}: unexpected data after the JSON array's closing ']'")

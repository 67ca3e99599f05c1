"""Validation of a Map-workflow batch: inline items or an S3 manifest (JSON array or CSV).

Pure logic: the caller fetches the manifest bytes. Every error names the field (or manifest line)
and the fix, and is raised before anything is registered or written.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fanout_runtime.errors import InvalidInput

from fanout_kit.patterns.distributed_map import json_stream
from fanout_kit.patterns.distributed_map.json_stream import READ_CHUNK_BYTES
from fanout_kit.shared.batch_input import BATCH_ID_PATTERN, EXECUTION_ARN_PATTERN, json_type_name
from fanout_kit.shared.limits import MAP_INPUT_MAX_BYTES, over_cap_message, payload_size

ALLOWED_FIELDS = ("batchId", "items", "manifest", "redriveOf")
MANIFEST_PREFIX = "manifests/"  # the only prefix the workflow reads manifests from
FORMATS = ("JSON", "CSV")
S3_KEY_PATTERN = re.compile(r"^[^\x00]{1,1024}$")
BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class InvalidManifest(InvalidInput):
    """The S3 manifest is missing or malformed; the message names the object and the problem."""


def validate_map_input(
    event: Any, *, execution_name: str | None, max_inline_items: int
) -> dict[str, Any]:
    """Normalize ``{"batchId"?, "items": [...]}`` or ``{"batchId"?, "manifest": {"bucket",
    "key", "format"?}}``; raise InvalidInput naming every bad field."""
    if not isinstance(event, Mapping):
        raise InvalidInput(
            'execution input must be a JSON object like {"items": [...]} or '
            '{"manifest": {"bucket": "...", "key": "items.json"}}, got ' + json_type_name(event)
        )
    problems = [
        f"{f}: unknown field; allowed fields are {', '.join(ALLOWED_FIELDS)}"
        for f in event
        if f not in ALLOWED_FIELDS
    ]
    size = payload_size(event)
    if size > MAP_INPUT_MAX_BYTES:
        problems.append(
            over_cap_message(
                "input", size, MAP_INPUT_MAX_BYTES,
                "PrepareBatch receives the input with the execution name within 256 KiB: put the "
                "items in an S3 manifest",
            )
        )
    batch_id = event.get("batchId", execution_name)
    if not isinstance(batch_id, str) or not BATCH_ID_PATTERN.match(batch_id):
        problems.append(
            "batchId: must be 1-80 characters of letters, digits, '.', '_', ':' or '-', "
            f"starting with a letter or digit; got {batch_id!r}"
        )
    redrive_of = event.get("redriveOf")
    if redrive_of is not None and (not isinstance(redrive_of, str) or not EXECUTION_ARN_PATTERN.match(redrive_of)):
        problems.append(
            "redriveOf: must be the ARN of the failed execution being redriven "
            "(arn:aws:states:REGION:ACCOUNT:execution:STATE_MACHINE:NAME)"
        )
    items, manifest = event.get("items"), event.get("manifest")
    if (items is None) == (manifest is None):
        problems.append("items / manifest: give exactly one: inline items, or an S3 manifest")
    elif items is not None:
        if not isinstance(items, list):
            problems.append(f"items: must be an array of items, got {json_type_name(items)}")
        elif not items:
            problems.append("items: the batch is empty; give at least one item")
        elif len(items) > max_inline_items:
            problems.append(
                f"items: {len(items)} inline items exceed {max_inline_items}; put them in an S3 "
                "manifest instead (the execution input is limited to 256 KiB)"
            )
    else:
        if not isinstance(manifest, Mapping):
            problems.append(f"manifest: must be an object with bucket and key, got {json_type_name(manifest)}")
        else:
            if not isinstance(manifest.get("bucket"), str) or not BUCKET_PATTERN.match(manifest["bucket"]):
                problems.append("manifest.bucket: must be an S3 bucket name")
            if not isinstance(manifest.get("key"), str) or not S3_KEY_PATTERN.match(manifest["key"]):
                problems.append("manifest.key: must be the S3 object key of the manifest")
            elif not manifest["key"].startswith(MANIFEST_PREFIX):
                problems.append(
                    f"manifest.key: must be under {MANIFEST_PREFIX} in the batch data bucket (the workflow "
                    f"reads nothing else), got {manifest['key']!r}"
                )
            fmt = manifest.get("format", _format_from_key(manifest.get("key")))
            if fmt not in FORMATS:
                problems.append(
                    f"manifest.format: must be JSON or CSV (or a key ending .json/.csv), got {fmt!r}"
                )
            unknown = sorted(set(manifest) - {"bucket", "key", "format"})
            if unknown:
                problems.append(f"manifest.{unknown[0]}: unknown field; allowed: bucket, key, format")
    if problems:
        raise InvalidInput("; ".join(problems))
    out: dict[str, Any] = {"batchId": batch_id, "redriveOf": redrive_of}
    if items is not None:
        out["items"] = items
    else:
        out["manifest"] = {
            "bucket": manifest["bucket"],
            "key": manifest["key"],
            "format": manifest.get("format", _format_from_key(manifest["key"])),
        }
    return out


def _format_from_key(key: Any) -> str | None:
    if isinstance(key, str):
        lowered = key.lower()
        if lowered.endswith(".json"):
            return "JSON"
        if lowered.endswith(".csv"):
            return "CSV"
    return None




def _type_article(value: Any) -> str:
    name = json_type_name(value)
    return name if value is None else f"an {name}" if name[0] in "aeiou" else f"a {name}"


def check_item(item: Any, index: int, *, max_item_bytes: int, where: str) -> None:
    """Every item is a JSON object of at most ``max_item_bytes`` (compact JSON), else
    InvalidManifest naming its index: a child would only dead-letter it."""
    if not isinstance(item, Mapping):
        raise InvalidManifest(f"{where}[{index}]: each item must be a JSON object, got {_type_article(item)}")
    size = len(json.dumps(item, separators=(",", ":")).encode())
    if size > max_item_bytes:
        raise InvalidManifest(
            f"{where}[{index}]: item is {size} bytes, more than {max_item_bytes}; pass large "
            "data by reference (an S3 key) instead"
        )


# The largest manifest PrepareBatch checks: its memory and timeout are sized for it
# (fanout_kit.patterns.distributed_map.construct.prepare_worst_case_seconds, from benchmarks/prepare_batch_benchmark.py);
# a larger one is refused at once, naming the limit, instead of timing out half-way.
MAX_MANIFEST_ITEMS = 10_000_000
MAX_MANIFEST_BYTES = 1024 * 1024 * 1024  # 1 GiB


def too_many_items(where: str, max_items: int) -> InvalidManifest:
    return InvalidManifest(
        f"{where}: more than {max_items:,} items, the most one batch may have (PrepareBatch checks "
        f"every item within its timeout); split it into batches of at most {max_items:,} items"
    )


def too_large(where: str, size: int, max_bytes: int = MAX_MANIFEST_BYTES) -> InvalidManifest:
    return InvalidManifest(
        f"{where}: {size:,} bytes, more than the {max_bytes:,} bytes ({max_bytes / 2**30:g} GiB) one "
        "manifest may have (PrepareBatch checks every item within its timeout); split it into "
        "smaller manifests, one batch each"
    )


def count_items(
    items: Iterable[Any], *, max_item_bytes: int, where: str, max_items: int = MAX_MANIFEST_ITEMS
) -> int:
    """Check every item (one at a time: ``items`` may be a stream); return how many there are.
    More than ``max_items`` items: InvalidManifest naming the limit, as soon as item
    ``max_items`` + 1 is read."""
    total = 0
    for index, item in enumerate(items):
        if index >= max_items:
            raise too_many_items(where, max_items)
        check_item(item, index, max_item_bytes=max_item_bytes, where=where)
        total += 1
    if not total:
        raise InvalidManifest(f"{where}: the batch is empty; give at least one item")
    return total


UTF8_BOM = codecs.BOM_UTF8


def _no_bom(chunks: Iterable[bytes], where: str) -> Iterator[bytes]:
    """The chunks, refused (InvalidManifest) if the file starts with a UTF-8 byte order mark.

    PrepareBatch and the Distributed Map's ItemReader must read the same items. AWS documents the
    ItemReader's JSON and CSV inputs (input-output-itemreader.html) without saying that a BOM is
    skipped, and a JSON manifest that starts with one fails the whole map run (issue 19); RFC 8259
    section 8.1 lets a JSON parser reject it. A CSV header would read ``\ufeffid`` there instead of
    ``id``. So a manifest with a BOM is refused here, before any child runs, in both formats."""
    head = b""
    chunks = iter(chunks)
    for chunk in chunks:
        head += chunk
        if len(head) >= len(UTF8_BOM):
            break
    if head.startswith(UTF8_BOM):
        raise InvalidManifest(
            f"{where}: starts with a UTF-8 byte order mark (bytes EF BB BF), which the Distributed Map's "
            "ItemReader does not accept; save the manifest as UTF-8 without a BOM"
        )
    if head:
        yield head
    yield from chunks


def iter_json_array(chunks: Iterable[bytes], where: str, *, max_item_bytes: int) -> Iterator[Any]:
    """The items of a JSON-array manifest, parsed one at a time from a byte stream: memory stays
    bounded by the largest item, whatever the manifest's size (fanout_kit.patterns.distributed_map.json_stream)."""
    return json_stream.iter_json_array(
        _no_bom(chunks, where),
        where,
        max_value_bytes=max_item_bytes,
        error=InvalidManifest,
        too_large=lambda index: (
            f"{where}[{index}]: item is larger than {max_item_bytes} bytes; pass large data by reference "
            "(an S3 key) instead"
        ),
    )


class _TextStream(io.RawIOBase):
    """A readable binary stream over byte chunks (so csv can read an S3 body line by line)."""

    def __init__(self, chunks: Iterable[bytes]):
        self._chunks = iter(chunks)
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:  # noqa: ANN001 - memoryview/bytearray
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(target), len(self._pending))
        target[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def iter_csv_rows(chunks: Iterable[bytes], where: str) -> Iterator[dict[str, str]]:
    """The items of a CSV manifest (header row + rows -> objects), read line by line."""
    stream = io.TextIOWrapper(io.BufferedReader(_TextStream(_no_bom(chunks, where))), encoding="utf-8", newline="")
    reader = csv.reader(stream)
    try:
        header = next(reader, None)
        if not header or not any(cell.strip() for cell in header):
            raise InvalidManifest(f"{where}: a CSV manifest needs a header row naming the columns")
        if len(set(header)) != len(header) or any(not h.strip() for h in header):
            raise InvalidManifest(f"{where}: CSV header has empty or repeated column names: {header}")
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise InvalidManifest(
                    f"{where}: CSV line {reader.line_num} has {len(row)} fields, the header has {len(header)}"
                )
            yield dict(zip(header, row))
    except UnicodeDecodeError as exc:
        raise InvalidManifest(f"{where}: not UTF-8 text ({exc.reason})") from None
    except csv.Error as exc:
        raise InvalidManifest(f"{where}: not valid CSV at line {reader.line_num} ({exc})") from None


def iter_manifest(chunks: Iterable[bytes], fmt: str, where: str, *, max_item_bytes: int) -> Iterator[Any]:
    if fmt == "JSON":
        return iter_json_array(chunks, where, max_item_bytes=max_item_bytes)
    return iter_csv_rows(chunks, where)


def parse_manifest(body: bytes, fmt: str, where: str, *, max_item_bytes: int = 256 * 1024) -> list[Any]:
    """All items of a manifest held in memory (small manifests, tests, the CLI)."""
    chunks = (body[i : i + READ_CHUNK_BYTES] for i in range(0, len(body), READ_CHUNK_BYTES))
    return list(iter_manifest(chunks, fmt, where, max_item_bytes=max_item_bytes))

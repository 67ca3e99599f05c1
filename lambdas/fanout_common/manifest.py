"""Validation of a Map-workflow batch: inline items or an S3 manifest (JSON array or CSV).

Pure logic: the caller fetches the manifest bytes. Every error names the field (or manifest line)
and the fix, and is raised before anything is registered or written.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping
from typing import Any

from .errors import InvalidInput
from .validation import BATCH_ID_PATTERN, _type_name

ALLOWED_FIELDS = ("batchId", "items", "manifest")
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
            '{"manifest": {"bucket": "...", "key": "items.json"}}, got ' + _type_name(event)
        )
    problems = [
        f"{f}: unknown field; allowed fields are {', '.join(ALLOWED_FIELDS)}"
        for f in event
        if f not in ALLOWED_FIELDS
    ]
    batch_id = event.get("batchId", execution_name)
    if not isinstance(batch_id, str) or not BATCH_ID_PATTERN.match(batch_id):
        problems.append(
            "batchId: must be 1-80 characters of letters, digits, '.', '_', ':' or '-', "
            f"starting with a letter or digit; got {batch_id!r}"
        )
    items, manifest = event.get("items"), event.get("manifest")
    if (items is None) == (manifest is None):
        problems.append("items / manifest: give exactly one: inline items, or an S3 manifest")
    elif items is not None:
        if not isinstance(items, list):
            problems.append(f"items: must be an array of items, got {_type_name(items)}")
        elif not items:
            problems.append("items: the batch is empty; give at least one item")
        elif len(items) > max_inline_items:
            problems.append(
                f"items: {len(items)} inline items exceed {max_inline_items}; put them in an S3 "
                "manifest instead (the execution input is limited to 256 KiB)"
            )
    else:
        if not isinstance(manifest, Mapping):
            problems.append(f"manifest: must be an object with bucket and key, got {_type_name(manifest)}")
        else:
            if not isinstance(manifest.get("bucket"), str) or not BUCKET_PATTERN.match(manifest["bucket"]):
                problems.append("manifest.bucket: must be an S3 bucket name")
            if not isinstance(manifest.get("key"), str) or not S3_KEY_PATTERN.match(manifest["key"]):
                problems.append("manifest.key: must be the S3 object key of the manifest")
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
    out: dict[str, Any] = {"batchId": batch_id}
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


def parse_manifest(body: bytes, fmt: str, where: str) -> list[Any]:
    """The items of a JSON-array or CSV (header row + rows -> objects) manifest."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidManifest(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if fmt == "JSON":
        try:
            items = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidManifest(
                f"{where}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                "a JSON manifest is one array of items"
            ) from None
        if not isinstance(items, list):
            raise InvalidManifest(f"{where}: a JSON manifest must be an array of items, got {_type_name(items)}")
        return items
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or not any(cell.strip() for cell in rows[0]):
        raise InvalidManifest(f"{where}: a CSV manifest needs a header row naming the columns")
    header = rows[0]
    if len(set(header)) != len(header) or any(not h.strip() for h in header):
        raise InvalidManifest(f"{where}: CSV header has empty or repeated column names: {header}")
    items = []
    for line, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise InvalidManifest(
                f"{where}: CSV line {line} has {len(row)} fields, the header has {len(header)}"
            )
        items.append(dict(zip(header, row)))
    return items


def check_items(items: list[Any], *, max_item_bytes: int, where: str) -> int:
    """Raise if the batch is empty or an item is too large; return the item count."""
    if not items:
        raise InvalidManifest(f"{where}: the batch is empty; give at least one item")
    for index, item in enumerate(items):
        size = len(json.dumps(item, separators=(",", ":")).encode())
        if size > max_item_bytes:
            raise InvalidInput(
                f"{where}[{index}]: item is {size} bytes, more than {max_item_bytes}; pass large "
                "data by reference (an S3 key) instead"
            )
    return len(items)

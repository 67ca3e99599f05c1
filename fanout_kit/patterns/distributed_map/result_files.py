"""The Distributed Map's ResultWriter output, read back (pure logic).

Step Functions writes one ``manifest.json`` per map run that lists result files by status
(``ResultFiles``: ``SUCCEEDED``, ``FAILED``, ``PENDING``), each a JSON array of child executions
with ``ExecutionArn``, ``Input`` (a JSON string: the child's ``{"Items", "BatchInput"}``),
``Status``, ``Error``, ``Cause``, ``StopDate`` (AWS documents this as "child workflow execution
data, such as execution input and output, ARN, and execution status", one file per status).

A failed child of this kit that reached its DLQ step ends with the error ``ItemsDeadLettered``;
a child whose worker reported per-item failures (``batchItemFailures``) and that dead-lettered the
items still failing ends with ``ItemsPartiallyFailed``, its cause listing the failed indexes
(``partial_cause``): the map run counts all of its items failed, and the fan-in corrects that
from these files (``item_outcome``: only the listed items failed). Every other unsuccessful child
(timed out, aborted, failed before or during its DLQ send) has items that are nowhere but in
these files, and goes to the DLQ from here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from fanout_kit.shared.workflow_errors import ITEMS_DEAD_LETTERED

from .json_stream import iter_json_array

RESULTS_PREFIX = "results/"  # where the Distributed Map's ResultWriter writes in the batch data bucket
ITEMS_PARTIALLY_FAILED = "ItemsPartiallyFailed"  # some items failed and were dead-lettered; the cause lists them
UNSUCCESSFUL_GROUPS = ("FAILED", "PENDING")
CAUSE_MAX_CHARACTERS = 32_000  # a Fail state's cause: at most 32,768 characters (fanout_kit.shared.limits)


def result_file_keys(manifest: Mapping[str, Any]) -> list[str]:
    """The keys of the result files that may hold unsuccessful children."""
    files = manifest.get("ResultFiles") or {}
    return [f["Key"] for group in UNSUCCESSFUL_GROUPS for f in files.get(group, [])]


# One entry of a result file: a child's input (at most 256 KiB, escaped in a JSON string), output
# and cause. An entry that grows past 8 times this without parsing is not an entry.
MAX_ENTRY_BYTES = 1024 * 1024


def unsuccessful_entries(
    read_json: Callable[[str], Any], read_chunks: Callable[[str], Iterable[bytes]], manifest_key: str
) -> Iterator[dict[str, Any]]:
    """The entries (one child execution each) of a map run's result files that may hold
    unsuccessful children, one at a time: ``read_json(key)`` reads the run's small
    ``manifest.json``; ``read_chunks(key)`` streams a result file as bytes, which is parsed entry
    by entry (fanout_kit.patterns.distributed_map.json_stream), so memory holds one entry, not the file (a FAILED file of
    400,000 items is some 200 MB of JSON; the benchmark is benchmarks/forward_failed_benchmark.py)."""
    for key in result_file_keys(read_json(manifest_key)):
        yield from iter_json_array(read_chunks(key), f"result file {key}", max_value_bytes=MAX_ENTRY_BYTES)


ITEM_CAUSE_IN_RESULTS = 256  # characters of each item's cause kept in the child's cause (the DLQ has 1,024)


def partial_cause(
    failed_indexes: list[int], items: int, message: str, errors: list[str] | None = None, causes: list[str] | None = None
) -> str:
    """The cause of an ItemsPartiallyFailed child: JSON text the parent parses back
    (``failed_indexes_of``): the failed indexes, each one's error name and cause (``errors``,
    ``causes``, in the same order) and a message; within a Fail state's 32,768 characters (the
    causes are dropped first, then the names, then the indexes: the fan-in then counts every item
    of the child failed)."""
    causes = [c[:ITEM_CAUSE_IN_RESULTS] for c in causes] if causes is not None else None
    body = {"failedIndexes": failed_indexes, "errors": errors, "causes": causes, "items": items, "message": message[:2000]}
    for drop in ((), ("causes",), ("causes", "errors"), ("causes", "errors", "failedIndexes")):
        cause = json.dumps({k: v for k, v in body.items() if k not in drop and v is not None}, separators=(",", ":"))
        if len(cause) <= CAUSE_MAX_CHARACTERS:
            break
    return cause


def partial_errors(entry: Mapping[str, Any]) -> tuple[dict[int, str], dict[int, str], str | None]:
    """({failed index: its error name}, {failed index: its cause}, the message) of an
    ItemsPartiallyFailed entry's cause (what it carries of them)."""
    try:
        cause = json.loads(entry.get("Cause") or "")
    except ValueError:
        return {}, {}, entry.get("Cause")
    if not isinstance(cause, Mapping):
        return {}, {}, entry.get("Cause")
    indexes = cause.get("failedIndexes")

    def by_index(values: Any) -> dict[int, str]:
        ok = isinstance(indexes, list) and isinstance(values, list) and len(indexes) == len(values)
        return dict(zip(indexes, values)) if ok else {}

    return by_index(cause.get("errors")), by_index(cause.get("causes")), cause.get("message")


def failed_indexes_of(entry: Mapping[str, Any]) -> set[int] | None:
    """The failed indexes an ItemsPartiallyFailed entry lists, or None when the entry is not one or
    its cause does not list a non-empty subset of its own items (then all its items count failed)."""
    if entry.get("Status") != "FAILED" or entry.get("Error") != ITEMS_PARTIALLY_FAILED:
        return None
    try:
        cause = json.loads(entry.get("Cause") or "")
    except ValueError:
        return None
    listed = cause.get("failedIndexes") if isinstance(cause, Mapping) else None
    if not isinstance(listed, list) or not listed or not all(isinstance(i, int) and not isinstance(i, bool) for i in listed):
        return None
    own = {item.get("index") for item in child_items(entry) if isinstance(item, Mapping)}
    failed = set(listed)
    return failed if failed <= own and len(failed) == len(listed) else None


def already_dead_lettered(entry: Mapping[str, Any]) -> bool:
    """The child sent its failed items to the DLQ itself (all of them, or the listed ones)."""
    if entry.get("Status") != "FAILED":
        return False
    return entry.get("Error") == ITEMS_DEAD_LETTERED or failed_indexes_of(entry) is not None


def failed_items(entry: Mapping[str, Any]) -> list[Any]:
    """The items of an unsuccessful child that did not succeed: the listed ones of an
    ItemsPartiallyFailed child, all of any other's."""
    items = child_items(entry)
    listed = failed_indexes_of(entry)
    if listed is None:
        return items
    return [item for item in items if isinstance(item, Mapping) and item.get("index") in listed]


def item_outcome(entry: Mapping[str, Any]) -> tuple[int, int]:
    """(items failed, items succeeded) of one unsuccessful child, item by item."""
    items = len(child_items(entry))
    listed = failed_indexes_of(entry)
    failed = items if listed is None else len(listed)
    return failed, items - failed


def child_items(entry: Mapping[str, Any]) -> list[Any]:
    raw = entry.get("Input")
    try:
        child_input = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        child_input = None
    items = child_input.get("Items") if isinstance(child_input, Mapping) else None
    return items if isinstance(items, list) else []


def dead_letter_messages(
    entries: Iterable[Mapping[str, Any]], *, batch_id: str, task: str, execution_arn: str
) -> Iterator[dict[str, Any]]:
    """One DLQ message per unsuccessful child that did not reach its own DLQ step, in the shape
    the children send (``items`` with their manifest index), plus the child's status."""
    for entry in entries:
        if entry.get("Status") == "SUCCEEDED" or already_dead_lettered(entry):
            continue
        yield {
            "batchId": batch_id,
            "task": task,
            "items": child_items(entry),
            "error": entry.get("Error") or f"States.{entry.get('Status', 'Unknown').title().replace('_', '')}",
            "cause": entry.get("Cause") or f"the child execution ended {entry.get('Status')}",
            "executionArn": execution_arn,
            "childExecutionArn": entry.get("ExecutionArn"),
            "childStatus": entry.get("Status"),
            "failedAt": entry.get("StopDate"),
            "forwardedFrom": "map run results",
        }

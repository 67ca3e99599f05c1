"""The Distributed Map's ResultWriter output, read back (pure logic).

Step Functions writes one ``manifest.json`` per map run that lists result files by status
(``ResultFiles``: ``SUCCEEDED``, ``FAILED``, ``PENDING``), each a JSON array of child executions
with ``ExecutionArn``, ``Input`` (a JSON string: the child's ``{"Items", "BatchInput"}``),
``Status``, ``Error``, ``Cause``, ``StopDate`` (AWS documents this as "child workflow execution
data, such as execution input and output, ARN, and execution status", one file per status).

A failed child of this kit that reached its DLQ step ends with the error ``ItemsDeadLettered``;
every other unsuccessful child (timed out, aborted, failed before or during its DLQ send) has
items that are nowhere but in these files, and goes to the DLQ from here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from .json_stream import iter_json_array

RESULTS_PREFIX = "results/"  # where the Distributed Map's ResultWriter writes in the batch data bucket
ITEMS_DEAD_LETTERED = "ItemsDeadLettered"  # fanout_kit.statemachines.map_workflow uses the same name
UNSUCCESSFUL_GROUPS = ("FAILED", "PENDING")


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
    by entry (fanout_kit.common.json_stream), so memory holds one entry, not the file (a FAILED file of
    400,000 items is some 200 MB of JSON; the benchmark is benchmarks/forward_failed_benchmark.py)."""
    for key in result_file_keys(read_json(manifest_key)):
        yield from iter_json_array(read_chunks(key), f"result file {key}", max_value_bytes=MAX_ENTRY_BYTES)


def already_dead_lettered(entry: Mapping[str, Any]) -> bool:
    return entry.get("Status") == "FAILED" and entry.get("Error") == ITEMS_DEAD_LETTERED


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

"""A batch's results, one typed outcome per item (Map), task (Parallel) or child (ledger) (pure logic).

``fanout results`` and its Python API (``fanout_kit.ops.results``) yield these; the Map's are expanded from
the ResultWriter's result files here, one child entry at a time (``entry_outcomes``), so that the
one place that knows what a child's entry says about its items is this function.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fanout_kit.patterns.distributed_map.result_files import child_items, failed_indexes_of, partial_errors

SUCCEEDED = "SUCCEEDED"
SKIPPED = "SKIPPED"  # a Parallel task a redrive did not re-run (it succeeded in the run it redrives)
NOT_FINISHED = "NOT_FINISHED"  # the execution ended before the task decided (stopped, timed out)
NOT_CONFIRMED = "NOT_CONFIRMED"  # its run succeeded, but the workflow did not confirm it (recorded failed)
# A Map item's status is its child execution's, as the result files give it: SUCCEEDED, FAILED,
# TIMED_OUT, ABORTED or PENDING. A ledger child's is its mark's outcome: SUCCEEDED or FAILED.
OK_STATUSES = frozenset({SUCCEEDED, SKIPPED})
FIELDS = ("index", "task", "item", "status", "error", "cause", "attempts", "dlq_message_id", "result_file",
          "execution_arn")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One item, task or child of a batch and how it ended.

    ``index``: the item's 0-based index in the batch's manifest or items (Map), the task's position
    (Parallel), the child's index (ledger, when its id is one); ``task``: the Parallel task or the
    ledger child id; ``item``: the Map item itself; ``attempts``: where the source records them
    (the Parallel's history); ``dlq_message_id``: the dead-letter message that holds it, where the
    source records it (the Parallel's DeadLetter send, the ledger's dead-letter recorder);
    ``result_file``: the ResultWriter file (S3 key) its child's entry is in (Map);
    ``execution_arn``: the execution that ran it (the Map: its child execution)."""

    index: int | None
    status: str
    task: str | None = None
    item: Any = None
    error: str | None = None
    cause: str | None = None
    attempts: int | None = None
    dlq_message_id: str | None = None
    result_file: str | None = None
    execution_arn: str | None = None

    @property
    def failed(self) -> bool:
        return self.status not in OK_STATUSES

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}


def entry_outcomes(entry: Mapping[str, Any], result_file: str) -> Iterator[Outcome]:
    """The outcomes of the items of one child execution's entry in a ResultWriter file: with
    ItemBatcher a child holds a batch of items (``Input``: ``{"Items": [{"index", "item"}...],
    "BatchInput"}``), and each item gets the child's status, error and cause.

    The one place a child's entry becomes item outcomes: a child whose worker reported per-item
    failures ends ``ItemsPartiallyFailed`` with a cause listing the failed indexes
    (``map_results.failed_indexes_of``): only those items failed (each with its own error name when
    the cause carries it); the child's other items SUCCEEDED. A cause that cannot be read leaves
    every item of the child failed (as the fan-in counts it)."""
    status = entry.get("Status") or "UNKNOWN"
    error = entry.get("Error") if status != SUCCEEDED else None
    cause = entry.get("Cause") if status != SUCCEEDED else None
    arn = entry.get("ExecutionArn")
    listed = failed_indexes_of(entry)
    if listed is not None:
        errors, causes, message = partial_errors(entry)
    for wrapped in child_items(entry):
        if isinstance(wrapped, Mapping) and "index" in wrapped:
            index, item = wrapped.get("index"), wrapped.get("item")
        else:  # not the kit's ItemSelector shape: the item as is, its position in the child
            index, item = None, wrapped
        if listed is not None and index not in listed:
            yield Outcome(index=index, status=SUCCEEDED, item=item, result_file=result_file, execution_arn=arn)
            continue
        if listed is not None:
            yield Outcome(index=index, status=status, item=item, error=errors.get(index, error),
                          cause=causes.get(index, message),
                          result_file=result_file, execution_arn=arn)
            continue
        yield Outcome(
            index=index if isinstance(index, int) else None,
            status=status,
            item=item,
            error=error,
            cause=cause,
            result_file=result_file,
            execution_arn=arn,
        )


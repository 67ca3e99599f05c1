"""A batch's results, item by item: the Python API of ``fanout results``.

    from fanout_kit.ops.results import AwsSource, Target, open_batch

    batch = open_batch(AwsSource(boto3_client), [Target("map", "FinalStatus...", batch_bucket="...")], "B")
    for outcome in batch.outcomes(failed_only=True):   # fanout_kit.ops.outcomes.Outcome
        print(outcome.index, outcome.status, outcome.error)

Where the outcomes come from, found from the batch's status record (``resultsAt``, see
fanout_kit.shared.final_status), for each pattern:

* Distributed Map: the map run's ResultWriter output, ``manifest.json`` and its result files (one
  entry per child execution; with ItemBatcher a child holds a batch of items, each expanded to an
  item outcome by ``fanout_kit.ops.outcomes.entry_outcomes``). The files are streamed one child
  entry at a time (``fanout_kit.patterns.distributed_map.json_stream``): memory holds one entry, not a file, whatever
  the number of items (benchmarks/results_benchmark.py: 1,000,000 items). With ``failed_only``
  the SUCCEEDED files are not read at all. Order: by result file (SUCCEEDED, FAILED, PENDING),
  then as the files list them, not by index.
* Parallel: the execution's history (GetExecutionHistory, page by page): per task its status,
  the error and cause of its last failed attempt, its attempts, and the MessageId of its
  DeadLetter send.
* Completion ledger: the batch's child marks (DynamoDB Query of the batch's partition, or of each
  shard's, page by page), in the ledger's key order; a dead-lettered child's mark names its DLQ
  message.

The same readers run on a deployed stack (``AwsSource``: read-only calls GetItem,
GetExecutionHistory, GetObject, Query) and on what ``fanout run`` / ``fanout ledger`` saved of a
local batch (``LocalSource``: the same objects, pages and items as files, in ``local_state_dir()``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fanout_kit.shared.final_status import LEDGER_RESULTS, S3_RESULTS, _plain
from fanout_kit.patterns.distributed_map.json_stream import iter_json_array
from fanout_kit.patterns.distributed_map.result_files import MAX_ENTRY_BYTES
from fanout_kit.ops.result_sources import (
    DLQ_MESSAGE,
    MAP_GROUPS,
    STATE_DIR_ENV,
    AwsSource,
    LocalSource,
    ResultsError,
    Target,
    _digest,
    batch_folder,
    local_state_dir,
    target_of,
)
from fanout_kit.ops.outcomes import NOT_CONFIRMED, NOT_FINISHED, SKIPPED, SUCCEEDED, Outcome, entry_outcomes


def map_outcomes(source: Any, bucket: str, manifest_key: str, *, failed_only: bool = False) -> Iterator[Outcome]:
    """The items of a map run, from its ResultWriter ``manifest.json`` and result files, streamed.
    With ``failed_only`` the SUCCEEDED files are skipped (a succeeded child holds no failed item)."""
    manifest = source.read_json(bucket, manifest_key)
    files = (manifest.get("ResultFiles") or {}) if isinstance(manifest, dict) else {}
    for group in MAP_GROUPS:
        # A SUCCEEDED child holds no failed item: a child whose worker reported item-level
        # failures (batchItemFailures) ends FAILED (ItemsPartiallyFailed), and entry_outcomes
        # expands it to the items its cause lists as failed and the others as succeeded.
        if failed_only and group == "SUCCEEDED":
            continue
        for listed in files.get(group) or []:
            key = listed["Key"]
            entries = iter_json_array(
                source.read_chunks(bucket, key), f"result file s3://{bucket}/{key}", max_value_bytes=MAX_ENTRY_BYTES
            )
            for entry in entries:
                for outcome in entry_outcomes(entry, key):
                    if not failed_only or outcome.failed:
                        yield outcome


def _task_state(state: str) -> tuple[str | None, str]:
    """(task, part) of a Parallel branch state (fanout_kit/patterns/parallel/definition.py's names)."""
    for prefix, part in (("Run ", "run"), ("DeadLetter ", "dlq"), ("Skip ", "skip"), ("Input ", "input")):
        if state.startswith(prefix):
            name = state[len(prefix):]
            if part == "run" and name.endswith("?"):
                return name[:-1], "choice"
            return name, part
    for suffix, part in ((" dead-lettered", "dead"), (" failed, DLQ send failed", "lost")):
        if state.endswith(suffix):
            return state[: -len(suffix)], part
    return None, ""


@dataclass
class _Task:
    status: str | None = None
    error: str | None = None
    cause: str | None = None
    attempts: int = 0
    dlq_message_id: str | None = None


def parallel_outcomes(pages: Iterable[list[dict[str, Any]]], execution_arn: str) -> list[Outcome]:
    """Each task of a Parallel execution, from its history pages: SUCCEEDED, FAILED (dead-lettered,
    or its DLQ send failed too), SKIPPED (a redrive that did not re-run it) or NOT_FINISHED (the
    execution ended first). Index: the task's position in the execution's input, then by name."""
    owner: dict[int, str] = {}
    tasks: dict[str, _Task] = {}
    given: list[str] = []
    for page in pages:
        for event in page:
            kind = event["type"]
            if kind == "ExecutionStarted":
                try:
                    started = json.loads(event["executionStartedEventDetails"].get("input") or "{}")
                except ValueError:
                    started = {}
                if isinstance(started, dict) and isinstance(started.get("tasks"), dict):
                    given = list(started["tasks"])
            if kind.endswith("StateEntered"):
                name = event["stateEnteredEventDetails"]["name"]
            elif kind.endswith("StateExited"):
                name = event["stateExitedEventDetails"]["name"]
            else:
                name = owner.get(event.get("previousEventId", 0))
            if not name:
                continue
            owner[event["id"]] = name
            task, part = _task_state(name)
            if task is None:
                continue
            view = tasks.setdefault(task, _Task())
            if part == "run":
                if kind == "TaskScheduled":
                    view.attempts += 1
                elif kind in ("TaskFailed", "TaskTimedOut"):
                    details = event.get("taskFailedEventDetails") or event.get("taskTimedOutEventDetails") or {}
                    view.error, view.cause = details.get("error"), details.get("cause")
                elif kind == "TaskSucceeded":
                    view.status, view.error, view.cause = SUCCEEDED, None, None
            elif part == "dlq" and kind == "TaskSucceeded":
                try:
                    view.dlq_message_id = json.loads(event["taskSucceededEventDetails"].get("output") or "{}").get("MessageId")
                except (ValueError, AttributeError):
                    pass
            elif part in ("dead", "lost") and kind.endswith("StateEntered"):
                view.status = "FAILED"
            elif part == "skip" and kind.endswith("StateEntered"):
                view.status = SKIPPED
    order = [t for t in given if t in tasks] + sorted(t for t in tasks if t not in given)
    return [
        Outcome(
            index=index,
            task=task,
            status=view.status or NOT_FINISHED,
            error=view.error if view.status != SUCCEEDED else None,
            cause=view.cause if view.status != SUCCEEDED else None,
            attempts=view.attempts,
            dlq_message_id=view.dlq_message_id,
            execution_arn=execution_arn,
        )
        for index, (task, view) in enumerate((t, tasks[t]) for t in order)
    ]


def ledger_partitions(source: Any, table: str, batch_id: str) -> list[str]:
    """The partition keys of a batch's child marks: the batch's, or each shard's when sharded."""
    from fanout_kit.patterns.completion_ledger.ledger import BATCH_PREFIX, META_SK, shard_pk

    meta = source.get_item(table, {"pk": {"S": BATCH_PREFIX + batch_id}, "sk": {"S": META_SK}})
    shards = int(_plain(meta).get("shards", 1)) if meta else 1
    return [BATCH_PREFIX + batch_id] if shards <= 1 else [shard_pk(batch_id, k) for k in range(shards)]


def ledger_outcomes(source: Any, table: str, batch_id: str, *, failed_only: bool = False) -> Iterator[Outcome]:
    """One outcome per child mark (its outcome SUCCEEDED or FAILED, the reason of a failure)."""
    from fanout_kit.patterns.completion_ledger.ledger import CHILD_PREFIX

    for pk in ledger_partitions(source, table, batch_id):
        for page in source.query_pages(table, pk, CHILD_PREFIX):
            for raw in page:
                mark = _plain(raw)
                status = mark.get("outcome") or "UNKNOWN"
                if failed_only and status == SUCCEEDED:
                    continue
                child = mark["sk"][len(CHILD_PREFIX):]
                reason = mark.get("reason")
                found = DLQ_MESSAGE.search(reason or "")
                yield Outcome(
                    index=int(child) if child.isdigit() else None,
                    task=child,
                    status=status,
                    error="ChildFailed" if status != SUCCEEDED else None,
                    cause=reason,
                    dlq_message_id=found.group(1) if found else None,
                )


# --------------------------------------------------------------------------- a batch
def parse_results_at(value: str) -> tuple[str, str, str]:
    """("s3", bucket, key) | ("dynamodb", table, pk) | ("execution", arn, "") of ``resultsAt``."""
    for prefix, kind in ((S3_RESULTS, "s3"), (LEDGER_RESULTS, "dynamodb")):
        if value.startswith(prefix):
            where, _, rest = value[len(prefix):].partition("/")
            return kind, where, rest
    return "execution", value, ""


@dataclass
class BatchResults:
    """A batch found by its status record; ``outcomes()`` reads its results (again at each call)."""

    batch_id: str
    target: Target
    record: dict[str, Any]
    source: Any
    location: str | None  # where the results are: an execution ARN, s3://..., dynamodb://...
    notes: list[str] = field(default_factory=list)

    @property
    def workflow(self) -> str:
        return self.target.workflow

    def outcomes(self, *, failed_only: bool = False) -> Iterator[Outcome]:
        if not self.location:
            return iter(())
        kind, where, rest = parse_results_at(self.location)
        if self.workflow == "map" and kind == "s3":
            return map_outcomes(self.source, where, rest, failed_only=failed_only)
        if self.workflow == "ledger":
            table = where if kind == "dynamodb" else self.target.ledger_table
            return ledger_outcomes(self.source, table, self.batch_id, failed_only=failed_only)
        if self.workflow == "parallel" and kind == "execution":
            every = [self._confirmed(o) for o in parallel_outcomes(self.source.history_pages(where), where)]
            return iter([o for o in every if o.failed] if failed_only else every)
        return iter(())


    def _confirmed(self, outcome: Outcome) -> Outcome:
        """Fail closed: a task the FAILED record names (``failedTasks``) is never shown as
        succeeded, even when its run succeeded in the history (its branch left no marker, so the
        workflow did not confirm it: BatchNotConfirmed)."""
        if (outcome.status == SUCCEEDED and self.record.get("status") == "FAILED"
                and outcome.task in (self.record.get("failedTasks") or [])):
            return replace(outcome, status=NOT_CONFIRMED, error="BatchNotConfirmed",
                           cause="its run succeeded, but the workflow did not confirm it (no marker): "
                           "the record names it failed; a redrive runs it again")
        return outcome


def results_location(record: dict[str, Any], target: Target, batch_id: str) -> str | None:
    """Where the batch's results are, from its status record: ``resultsAt``; a FAILED Map's
    ``resultsKey`` in the batch data bucket; the recorded execution (a Parallel whose record
    predates resultsAt, or was written by the failure guard); the ledger's marks."""
    from fanout_kit.shared.final_status import ledger_results_at, s3_results_at

    if record.get("resultsAt"):
        return record["resultsAt"]
    if target.workflow == "map":
        key = record.get("resultsKey")
        return s3_results_at(target.batch_bucket, key) if key and target.batch_bucket else None
    if target.workflow == "ledger":
        return ledger_results_at(target.ledger_table, batch_id) if target.ledger_table else None
    return record.get("executionArn")


def open_batch(source: Any, targets: list[Target], batch_id: str, where: str = "") -> BatchResults:
    """The batch ``batch_id`` in the first (only) of ``targets`` whose status table has its record;
    ResultsError if none has it, or several do."""
    if not batch_id or not batch_id.strip():
        raise ResultsError("BATCH_ID is empty: pass the batch id of the status record (the one fanout run / start printed)")
    found = [(t, r) for t in targets if (r := source.status_record(t.status_table, batch_id)) is not None]
    if not found:
        tables = ", ".join(f"{t.workflow} ({t.status_table})" for t in targets)
        raise ResultsError(
            f"batch {batch_id}: no status record in {where or 'the status table'} ({tables}): check BATCH_ID "
            "(the batchId fanout run / fanout start printed; a batch still running has no record yet: "
            "fanout watch ARN)"
        )
    if len(found) > 1:
        raise ResultsError(
            f"batch {batch_id}: a status record in several workflows ({', '.join(t.workflow for t, _ in found)}): "
            "pass --workflow parallel, map or ledger"
        )
    target, record = found[0]
    batch = BatchResults(batch_id, target, record, source, results_location(record, target, batch_id))
    if batch.location is None and target.workflow == "map":
        batch.notes.append(
            f"its map run wrote no results ({record.get('failureError') or record.get('failedExecutionError') or 'none'}): "
            f"no item is confirmed; fanout dlq redrive --workflow map --batch {batch_id} runs them all again"
        )
    if record.get("redriveOf") and record.get("status") == SUCCEEDED:
        batch.notes.append(
            f"these are the results of the redrive {record.get('executionArn')}, which re-ran what "
            f"{record['redriveOf']} left failed"
            + ("; a Map redrive numbers its items from 0 again" if target.workflow == "map" else "")
        )
    return batch


# --------------------------------------------------------------------------- output

def open_local_batch(batch_id: str, workflow: str | None = None) -> BatchResults:
    """A batch ``fanout run`` / ``fanout ledger`` saved (``save_local_batch``)."""
    folder = batch_folder(batch_id)
    if not (folder / "record.json").is_file():
        raise ResultsError(
            f"batch {batch_id}: not in the local state ({local_state_dir()}): check BATCH_ID (the batchId "
            "fanout run / fanout ledger printed, run from this directory or with the same "
            f"{STATE_DIR_ENV}); for a deployed batch drop --local"
        )
    source = LocalSource(folder)
    saved = source.saved
    target = Target(**saved["target"], where=f"the local state ({folder})")
    if workflow and workflow != target.workflow:
        raise ResultsError(f"--workflow {workflow}: batch {batch_id} ran on the {target.workflow} workflow locally")
    return open_batch(source, [target], batch_id, where=target.where)


def save_local_batch(client: Callable[[str], Any], deployment: Any, batch_id: str, root: Path | None = None) -> Path | None:
    """Keep a local batch's status record and the results it points to (the history, the
    ResultWriter files, the ledger's marks) as files, for ``fanout results --local``; the previous
    save of the same batch is replaced. None when the batch has no status record."""
    source = AwsSource(client)
    target = target_of(deployment)
    record = source.status_record(target.status_table, batch_id)
    if record is None:
        return None
    dest = batch_folder(batch_id, root)
    dest.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".saving-", dir=dest.parent))
    try:
        saved = {"batchId": batch_id, "record": record, "stack": deployment.stack_name, "region": deployment.region,
                 "target": {"workflow": target.workflow, "status_table": target.status_table,
                            "batch_bucket": target.batch_bucket, "ledger_table": target.ledger_table}}
        (work / "record.json").write_text(json.dumps(saved, indent=1, sort_keys=True))
        location = results_location(record, target, batch_id)
        kind, where, rest = parse_results_at(location) if location else ("", "", "")
        if kind == "execution":
            path = work / "history" / f"{_digest(where)}.json"
            path.parent.mkdir(parents=True)
            with path.open("w") as stream:
                stream.write("[")
                first = True
                for page in source.history_pages(where):
                    for event in page:
                        stream.write(("" if first else ",\n") + json.dumps(event, default=str))
                        first = False
                stream.write("]")
        elif kind == "s3":
            manifest = source.read_json(where, rest)
            _copy_object(source, where, rest, work)
            for group in MAP_GROUPS:
                for listed in (manifest.get("ResultFiles") or {}).get(group) or []:
                    _copy_object(source, where, listed["Key"], work)
        elif kind == "dynamodb":
            from fanout_kit.patterns.completion_ledger.ledger import BATCH_PREFIX

            meta_pk = BATCH_PREFIX + batch_id
            for pk in dict.fromkeys([meta_pk, *ledger_partitions(source, where, batch_id)]):
                path = work / "dynamodb" / where / f"{_digest(pk)}.jsonl"
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("w") as stream:
                    for page in source.query_pages(where, pk, ""):
                        for item in page:
                            stream.write(json.dumps(item) + "\n")
        shutil.rmtree(dest, ignore_errors=True)
        work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest


def _copy_object(source: AwsSource, bucket: str, key: str, root: Path) -> None:
    path = root / "s3" / bucket / key
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as stream:
        for chunk in source.read_chunks(bucket, key):
            stream.write(chunk)

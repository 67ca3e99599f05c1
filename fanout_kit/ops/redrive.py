"""``fanout dlq redrive``: a batch's redrive from its dead-letter messages and its status record
(the plan: ``plan_redrive`` for the Parallel, ``plan_map_redrive`` for the Map), started under a
deterministic name (``start_redrive``); ``redrive_batch`` holds the batch's messages while the
command line shows the plan, starts it and deletes them. No printing here: ``fanout_kit.cli.dlq``
prints. The queue access (peek, release, delete) is ``fanout_kit.ops.dlq``.

A redrive deletes a batch's messages only after Step Functions accepted the redrive execution, and
names that execution deterministically from the failed execution and its tasks, so re-running a
redrive that crashed half-way reuses the same execution (nothing is lost, nothing runs twice).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fanout_kit.ops.aws import Aws, Deployment, OpsError
from fanout_kit.ops.dlq import REDRIVE_HOLD_SECONDS, Message, delete, open_deployment, peek, release
from fanout_kit.ops.start import NAME_UNSAFE

INLINE_INPUT_LIMIT = 200 * 1024  # a redrive input larger than this goes to S3 as a manifest


@dataclass
class RedrivePlan:
    batch_id: str
    target: str  # the failed execution the redrive names (redriveOf)
    tasks: dict[str, Any]  # Parallel: task -> its original input
    messages: list[Message]  # the target's messages: deleted once the redrive is accepted
    superseded: list[Message] = field(default_factory=list)  # other executions': left alone
    notes: list[str] = field(default_factory=list)
    finalized: bool = False  # the batch is SUCCEEDED already: only an existing redrive is reused
    # Map: the failed items ({"index", "item"}), or None to run the failed execution's input again
    items: list[dict[str, Any]] | None = None
    rerun_input: dict[str, Any] | None = None
    manifest: dict[str, str] | None = None  # Map: where a large item list was written (S3)

    @property
    def what(self) -> str:
        if self.rerun_input is not None:
            return "all"
        if self.items is not None:
            return ",".join(str(i.get("index")) for i in self.items)
        return ",".join(sorted(self.tasks))

    @property
    def name(self) -> str:
        digest = hashlib.sha256(f"{self.target}\n{self.what}".encode()).hexdigest()[:16]
        return f"redrive-{NAME_UNSAFE.sub('-', self.batch_id)[:40]}-{digest}"

    @property
    def execution_input(self) -> dict[str, Any]:
        if self.rerun_input is not None:
            return {**self.rerun_input, "batchId": self.batch_id, "redriveOf": self.target}
        if self.items is not None:
            body: dict[str, Any] = (
                {"manifest": self.manifest} if self.manifest else {"items": [i.get("item") for i in self.items]}
            )
            return {"batchId": self.batch_id, **body, "redriveOf": self.target}
        return {
            "batchId": self.batch_id,
            "tasks": {t: self.tasks[t] for t in sorted(self.tasks)},
            "redriveOf": self.target,
        }

    def input_json(self) -> str:
        return json.dumps(self.execution_input, sort_keys=True, separators=(",", ":"))


def _target(batch_id: str, messages: Sequence[Message], record: dict[str, Any] | None) -> tuple[str, bool]:
    """(the failed execution a redrive names, whether the batch is SUCCEEDED already): the status
    record names the newest failed execution, the only one a redrive may name (UpdateFinalStatus
    refuses any other)."""
    if record is None:
        raise OpsError(
            f"batch {batch_id} has no status record yet: its execution is still running or could not "
            "record its failure; wait for it to end (fanout watch ARN) and retry"
        )
    finalized = record.get("status") == "SUCCEEDED"
    if finalized:
        target = record.get("redriveOf")
        if not target or not any(m.execution_arn == target for m in messages):
            raise OpsError(
                f"batch {batch_id} is already SUCCEEDED (finalized by {record.get('finalizedBy')}); its "
                f"{len(messages)} dead-letter message(s) are stale: nothing to redrive",
                code=1,
            )
    elif record.get("status") == "FAILED":
        target = record["executionArn"]
    else:
        raise OpsError(f"batch {batch_id} has status {record.get('status')!r}: nothing a redrive can fix")
    return target, finalized


def _failure(record: dict[str, Any], finalized: bool) -> dict[str, Any]:
    """The failure fields of the execution a redrive names: the record's own while it is FAILED;
    once a redrive finalized the batch they are history, in ``previousFailure``
    (fanout_kit.shared.final_status)."""
    return (record.get("previousFailure") or {}) if finalized else record


def _resume_instead(batch_id: str, target: str, record: dict[str, Any]) -> OpsError:
    """The failure guard recorded an execution that ended outside the workflow's own decision
    (timed out, stopped, UpdateFinalStatus exhausted): it has no failed task or item to run again;
    RedriveExecution resumes it at the step that failed, without re-running what succeeded."""
    return OpsError(
        f"batch {batch_id}: {target} ended {record.get('failedExecutionStatus')} "
        f"({record.get('failedExecutionError')}) outside the workflow's decision, with nothing "
        f"dead-lettered to run again; resume it instead: the console's Redrive button, or "
        f"aws stepfunctions redrive-execution --execution-arn {target}",
        code=1,
    )


def _superseded_note(plan: RedrivePlan) -> None:
    if plan.superseded:
        older = sorted({m.execution_arn or "(no executionArn)" for m in plan.superseded})
        plan.notes.append(
            f"left {len(plan.superseded)} message(s) of other execution(s) in the queue: {', '.join(older)}; "
            f"the status record names {plan.target}, the newest failure and the only execution a redrive "
            "may name (they are superseded by it)"
        )


def plan_redrive(
    batch_id: str, messages: Sequence[Message], record: dict[str, Any] | None, sfn: Any
) -> RedrivePlan:
    """Parallel: which failed execution to redrive and with which tasks, from the batch's DLQ
    messages and its status record."""
    target, finalized = _target(batch_id, messages, record)
    failure = _failure(record, finalized)
    mine = [m for m in messages if m.execution_arn == target]
    plan = RedrivePlan(
        batch_id=batch_id,
        target=target,
        tasks={},
        messages=mine,
        superseded=[m for m in messages if m.execution_arn != target],
        finalized=finalized,
    )
    for message in mine:
        if message.task:
            plan.tasks.setdefault(message.task, message.body.get("input") or {})
    missing = sorted(set(failure.get("failedTasks", [])) - set(plan.tasks))
    if missing:
        # Recorded as failed but no DLQ message (its DLQ send failed, or the message is hidden by
        # another reader): the original input is in the failed execution's own input.
        described = sfn.describe_execution(executionArn=target)
        original = json.loads(described.get("input") or "{}").get("tasks") or {}
        lacking = [t for t in missing if t not in original]
        if lacking:
            raise OpsError(
                f"batch {batch_id}: {target} recorded {', '.join(lacking)} as failed, but neither the DLQ "
                "nor that execution's input has their input: start a redrive by hand (fanout start)"
            )
        for task in missing:
            plan.tasks[task] = original[task]
        plan.notes.append(
            f"{', '.join(missing)}: recorded as failed without a DLQ message here; input taken from "
            "the failed execution's input"
        )
    if not plan.tasks and failure.get("failedExecutionStatus"):
        raise _resume_instead(batch_id, target, failure)
    _superseded_note(plan)
    return plan


def _result_items(s3: Any, bucket: str, manifest_key: str) -> list[dict[str, Any]]:
    """The failed items of every unsuccessful child in a map run's ResultWriter output (of a child
    that reported per-item failures, only the items its cause lists)."""
    from fanout_kit.patterns.distributed_map.json_stream import READ_CHUNK_BYTES
    from fanout_kit.patterns.distributed_map.result_files import failed_items, unsuccessful_entries

    def read_json(key: str) -> Any:  # the run's manifest.json: a short list of result files
        return json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())

    def read_chunks(key: str) -> Any:  # a result file: streamed one child entry at a time
        return s3.get_object(Bucket=bucket, Key=key)["Body"].iter_chunks(chunk_size=READ_CHUNK_BYTES)

    return [
        item
        for entry in unsuccessful_entries(read_json, read_chunks, manifest_key)
        if entry.get("Status") != "SUCCEEDED"
        for item in failed_items(entry)
    ]


def plan_map_redrive(
    batch_id: str, messages: Sequence[Message], record: dict[str, Any] | None, sfn: Any, s3: Any, bucket: str
) -> RedrivePlan:
    """Map: a new execution over exactly the failed items of the failed execution the record
    names: from its DLQ messages (the children's own and those the parent forwarded), completed
    from the map run's result files if some are missing; or, when the map run failed as a whole
    (no item confirmed), over that execution's whole input again."""
    target, finalized = _target(batch_id, messages, record)
    failure = _failure(record, finalized)
    mine = [m for m in messages if m.execution_arn == target]
    plan = RedrivePlan(
        batch_id=batch_id, target=target, tasks={}, messages=mine,
        superseded=[m for m in messages if m.execution_arn != target], finalized=finalized,
    )
    failed = int(failure.get("failedItems", 0))
    if not failure.get("resultsKey") and failed and failed == failure.get("totalItems"):
        original = json.loads(sfn.describe_execution(executionArn=target).get("input") or "{}")
        plan.rerun_input = {k: v for k, v in original.items() if k in ("items", "manifest")}
        plan.notes.append(f"the map run of {target} failed as a whole: all {failed} items run again")
        _superseded_note(plan)
        return plan
    by_index: dict[Any, dict[str, Any]] = {}
    for message in mine:
        for item in message.body.get("items") or []:
            if isinstance(item, dict):
                by_index.setdefault(item.get("index"), item)
    if len(by_index) < failed and failure.get("resultsKey"):
        before = len(by_index)
        for item in _result_items(s3, bucket, failure["resultsKey"]):
            by_index.setdefault(item.get("index"), item)
        plan.notes.append(
            f"{len(by_index) - before} failed item(s) without a DLQ message here were taken from the map "
            f"run's results (s3://{bucket}/{failure['resultsKey']})"
        )
    if len(by_index) < failed:
        raise OpsError(
            f"batch {batch_id}: {target} recorded {failed} failed item(s), but only {len(by_index)} were "
            "found in the DLQ and the map run's results: nothing started"
        )
    if not by_index and failure.get("failedExecutionStatus"):
        raise _resume_instead(batch_id, target, failure)
    if not by_index:
        raise OpsError(f"batch {batch_id}: no failed item of {target} was found to run again", code=1)
    plan.items = [by_index[k] for k in sorted(by_index, key=lambda k: (not isinstance(k, int), k))]
    _superseded_note(plan)
    return plan


def _place_items(plan: RedrivePlan, s3: Any, bucket: str) -> None:
    """A redrive too large for the execution input (256 KiB) gets its items as an S3 manifest
    (named by the plan, so a rerun writes the same object)."""
    if plan.items is None or len(json.dumps([i.get("item") for i in plan.items])) <= INLINE_INPUT_LIMIT:
        return
    key = f"manifests/redrive/{NAME_UNSAFE.sub('-', plan.batch_id)}/{plan.name}.json"
    s3.put_object(Bucket=bucket, Key=key, Body=json.dumps([i.get("item") for i in plan.items]).encode())
    plan.manifest = {"bucket": bucket, "key": key}


def _existing(sfn: Any, state_machine_arn: str, name: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    arn = state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"
    try:
        return sfn.describe_execution(executionArn=arn)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
            return None
        raise


def _same_input(described: dict[str, Any], plan: RedrivePlan) -> bool:
    try:
        return json.loads(described.get("input") or "null") == plan.execution_input
    except ValueError:
        return False


def start_redrive(sfn: Any, deployment: Deployment, plan: RedrivePlan) -> tuple[str, bool]:
    """(execution ARN, reused): the deterministic execution of this plan, started or found."""
    from botocore.exceptions import ClientError

    existing = _existing(sfn, deployment.state_machine_arn, plan.name)
    if existing is None and not plan.finalized:
        try:
            started = sfn.start_execution(
                stateMachineArn=deployment.state_machine_arn, name=plan.name, input=plan.input_json()
            )
            return started["executionArn"], False
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
            existing = _existing(sfn, deployment.state_machine_arn, plan.name)  # started meanwhile
    if existing is None:
        raise OpsError(
            f"batch {plan.batch_id} is already SUCCEEDED and no redrive execution {plan.name} exists: "
            "the dead-letter messages are stale; nothing started",
            code=1,
        )
    if not _same_input(existing, plan):
        raise OpsError(
            f"execution {existing['executionArn']} exists with a different input than this redrive: "
            "inspect it in the console; nothing started"
        )
    return existing["executionArn"], True



@dataclass
class Redrive:
    """A batch's redrive, planned (``redrive_batch``): ``start`` it, then ``delete_messages``."""

    aws: Aws
    deployment: Deployment
    batch_id: str
    record: dict[str, Any]  # the batch's status record
    plan: RedrivePlan
    held: list[Message]  # hidden until the redrive_batch block ends, then made visible again
    sqs: Any
    sfn: Any
    s3: Any = None  # Map: the batch data bucket's client and name
    bucket: str | None = None

    def start(self) -> tuple[str, bool]:
        """(execution ARN, reused): the plan's execution, started, or found started earlier."""
        if self.deployment.workflow == "map":
            _place_items(self.plan, self.s3, self.bucket)  # (deterministic key: a rerun writes the same object)
        return start_redrive(self.sfn, self.deployment, self.plan)

    def delete_messages(self) -> list[Message]:
        """Delete the plan's messages (only once its execution was accepted); returns those SQS
        refused to delete (they, and the superseded ones, are made visible again)."""
        refused = delete(self.sqs, self.deployment.queue_url, self.plan.messages)
        self.held[:] = [*refused, *self.plan.superseded]
        return refused


@contextmanager
def redrive_batch(
    env: str, workflow: str, batch_id: str, *, region: str | None = None, endpoint_url: str | None = None
) -> Iterator[Redrive]:
    """Plan the redrive of ``batch_id`` of the deployed ``workflow`` of ``env``: its dead-letter
    messages are hidden from other readers until the block ends (the other batches' at once)."""
    from fanout_kit.shared.final_status import read_status

    aws, deployment = open_deployment(env, workflow, region, endpoint_url)
    sqs, sfn = aws.client("sqs"), aws.client("stepfunctions")
    messages, in_flight = peek(sqs, deployment.queue_url, REDRIVE_HOLD_SECONDS)
    held = list(messages)
    try:
        mine = [m for m in messages if m.batch_id == batch_id]
        others = [m for m in messages if m.batch_id != batch_id]
        release(sqs, deployment.queue_url, others)
        held[:] = mine
        record = read_status(aws.client("dynamodb"), deployment.status_table, batch_id)
        if not mine and not (record and record.get("status") == "FAILED"):
            # (a FAILED batch without messages is still redriven: its DLQ sends failed, and the
            # inputs are in the failed execution's own input)
            extra = (
                f" ({in_flight} message(s) in flight, hidden by another reader: retry later)"
                if in_flight
                else ""
            )
            raise OpsError(
                f"no dead-letter message of batch {batch_id} in {deployment.queue_url}{extra}: nothing to "
                f"redrive (fanout dlq list --env {deployment.env.name} shows what is there)",
                code=1,
            )
        if deployment.workflow == "map":
            s3, bucket = aws.client("s3"), deployment.batch_bucket
            plan = plan_map_redrive(batch_id, mine, record, sfn, s3, bucket)
        else:
            s3, bucket = None, None
            plan = plan_redrive(batch_id, mine, record, sfn)
        yield Redrive(aws, deployment, batch_id, record, plan, held, sqs, sfn, s3, bucket)
    finally:
        release(sqs, deployment.queue_url, held)

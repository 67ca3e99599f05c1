"""The completion ledger: "finalize exactly once" for SQS and Kinesis consumers, without Step Functions.

Concurrent consumers that read a counter, add one and write it back lose increments, so "the last
child is done" is never seen (or seen twice). The ledger counts with DynamoDB conditional writes
instead, so every decision is made by the database, atomically, and won by exactly one caller.

Table (composite key ``pk`` S, ``sk`` S)::

    pk="BATCH#<id>", sk="#META"          the batch: total, succeeded, failed, done (= succeeded +
                                         failed), status RUNNING|COMPLETED|FAILED, createdAt,
                                         updatedAt, deadline (epoch s, optional), expiresAt (TTL),
                                         finisherChild/finishedBy/finishedAt/finalizedAt, failReason;
                                         while RUNNING with a deadline also sweepKey="RUNNING" and
                                         runningDeadline (the sparse index, see below)
    pk="BATCH#<id>", sk="CHILD#<child>"  one mark per child: outcome SUCCEEDED|FAILED, recordedAt,
                                         expiresAt, reason; a child counts once however often it
                                         is delivered

Rules (each one a DynamoDB condition):

* Recording a child is ONE TransactWriteItems: Put the child mark ``IF attribute_not_exists(sk)``
  and Update the batch ``ADD succeeded|failed :1, done :1`` (creating it with the message's total
  when the batch was not registered up front) ``IF`` the batch is RUNNING (or does not exist yet),
  the supplied total equals the stored one and ``done < total``. A redelivered child fails the mark
  condition: the transaction is cancelled as a whole, nothing is counted twice (DUPLICATE).
  The batch is never read to count and the children are never queried.
* Then the decision check, also made on a DUPLICATE (so a crash between the transaction and the
  check is healed by the redelivery): one strongly consistent GetItem of the batch (a read never
  conflicts with the transactions in flight on the item and costs no write capacity), and only
  when it shows a transition is due, the transition itself: ``SET status = COMPLETED IF status =
  RUNNING AND done = total AND failed <= threshold`` or ``SET status = FAILED IF status = RUNNING
  AND failed > threshold``. The read only decides whether to try; the condition decides who wins.
  The caller whose transaction counted the last child reads after every other count committed, so
  it sees the transition due. Exactly one caller wins a transition; only the winner gets COMPLETED
  (it must finalize) or FAILED_BATCH (it must raise the alarm). COMPLETED and FAILED are final: no
  rule leaves them.
* The winner's follow-up (invoke UpdateFinalStatus, emit the alarm metric) is at-least-once: the
  winning child is stored as ``finisherChild`` and, until ``acknowledge_finish`` sets
  ``finalizedAt``, a redelivery of that same child gets the winning outcome again
  (``resumed=True``). UpdateFinalStatus is idempotent (its own conditional write), so repeating
  the follow-up is harmless; no other child can ever get it.
* Count now, decide later: ``record_success/record_failure(..., decide=False)`` only run the
  transaction (one request per child); ``decide(batch_id, by=...)`` then makes the one conditional
  transition (COMPLETED if every child was counted within the threshold, else FAILED), as the Map
  workflow does after its Distributed Map.
* Deadline: ``fail_overdue`` sets ``FAILED IF status = RUNNING AND deadline <= now``. The sweeper
  finds candidates with a Query on the sparse GSI ``RunningByDeadline`` (partition ``sweepKey``,
  always "RUNNING"; sort ``runningDeadline``; KEYS_ONLY). The two attributes exist only while a
  batch with a deadline is RUNNING (they are REMOVEd by every decision), so the index holds only
  open batches with a deadline, counter increments do not change indexed attributes, and the
  sweeper never scans the table. One constant partition value caps index writes (batch opens and
  decisions, not child records) at one partition's throughput, far above what a sweep needs.

Sharded counter (``counter_shards`` K > 1, cdk.json ``ledger.counterShards``): for batches too hot for
one item. On DynamoDB one partition key takes at most 1,000 WCU/s; unsharded, every child costs the
batch's partition key 4 WCU (mark and counter, transactional: 2 each), so one batch records at most
~250 children/s, and its transactions cancel each other with TransactionConflict. Sharded, child c
goes to shard k = index % K (crc32(childId) % K without an index), and everything it writes has
that shard's partition key::

    pk="BATCH#<id>#S<k>", sk="#SHARD"          total, succeeded, failed, done of the shard's children
    pk="BATCH#<id>#S<k>", sk="CHILD#<child>"   the child's mark, as above

Recording is ONE TransactWriteItems on the shard (mark IF not exists + counter ``ADD`` IF the total
matches and ``done < total``); the decision check is ONE BatchGetItem (strongly consistent) of the
batch item and the K shards; when the summed counts show a transition due, the one conditional
transition on the batch item (``IF status = RUNNING``, or the item does not exist yet) stores the
summed counts with the verdict. Exactly one caller wins, as above; counters only grow, so a sum of
consistent reads never shows more than was counted. The batch item (status, total, deadline, the
sweeper's index attributes, ``shards``) is written by register_batch, or by the first decision
check that finds it missing, and by the transition: not by every child. A child without a total
reads the batch item first (the registered total). Limits: the per-batch ``done < total`` guard
becomes per shard (the producers' contract below keeps the sum exact); a child arriving after
the verdict is still marked on its shard and reported COUNTED (the verdict is final and
unaffected); and K must not
change while batches are open (a batch records K; a consumer with another K refuses its children,
which then go back to the queue and end in the DLQ).

Contract with producers: a batch has exactly ``total`` distinct child ids (the message's childId,
or its 0-based index); ids are not reused across batches. ``done < total`` rejects a child beyond
the total, and an index is checked against the total.

Pure logic over a boto3 DynamoDB *client* passed in; no module-level AWS clients.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from fanout_kit.shared.limits import MAX_COUNTER_SHARDS  # noqa: F401  (the batch item and K shards in one BatchGetItem)
from fanout_runtime.errors import FanOutError

RUNNING = "RUNNING"
COMPLETED = "COMPLETED"
FAILED = "FAILED"
CHILD_SUCCEEDED = "SUCCEEDED"
CHILD_FAILED = "FAILED"

META_SK = "#META"
CHILD_PREFIX = "CHILD#"
BATCH_PREFIX = "BATCH#"
SWEEP_INDEX = "RunningByDeadline"
SWEEP_KEY = "sweepKey"
SWEEP_SORT = "runningDeadline"
SWEEP_VALUE = RUNNING
TTL_ATTRIBUTE = "expiresAt"

SHARD_SK = "#SHARD"
SHARD_INFIX = "#S"

SWEEPER = "#deadline-sweeper"  # finisherChild of a deadline failure (never a child id: '#')
DEFAULT_TTL_DAYS = 30
MAX_CONFLICT_ATTEMPTS = 8
# Cancellation reasons that say "try again": another transaction holds an item, or the partition
# is over its throughput (DynamoDB's TransactionCanceledException reasons).
RETRYABLE_REASONS = {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}


# --------------------------------------------------------------------------- errors


class LedgerError(FanOutError):
    """Base class of the ledger's errors."""


class InvalidChildMessage(LedgerError):
    """A child message lacks a field or has a bad one; the message names it. Not retryable."""


class TotalMismatch(LedgerError):
    """A child (or a registration) names a different total than the one the batch has."""

    def __init__(self, batch_id: str, stored: int, supplied: int) -> None:
        super().__init__(
            f"batch {batch_id}: the ledger has total={stored} but this message says total={supplied}; "
            "every message of a batch must carry the same total"
        )
        self.batch_id, self.stored, self.supplied = batch_id, stored, supplied


class BatchNotRegistered(LedgerError):
    """A child without a total arrived for a batch that was never registered (total unknown)."""


class TooManyChildren(LedgerError):
    """A new child arrived for a batch whose ``total`` children are all recorded already."""


class LedgerContention(LedgerError):
    """DynamoDB kept refusing the write (TransactionConflict, or throttling) after the ledger's own
    retries; the message must be retried (its consumer reports it as a batch item failure)."""


# --------------------------------------------------------------------------- outcomes


class Outcome(str, Enum):
    COUNTED = "COUNTED"  # this child was counted; the batch is still open (or decided by another)
    DUPLICATE = "DUPLICATE"  # this child was already recorded; nothing changed
    COMPLETED = "COMPLETED"  # this caller won RUNNING -> COMPLETED: it must finalize
    FAILED_BATCH = "FAILED_BATCH"  # this caller won RUNNING -> FAILED: it must raise the alarm
    BATCH_CLOSED = "BATCH_CLOSED"  # the batch was already COMPLETED/FAILED; this child not counted
    REGISTERED = "REGISTERED"  # register_batch created the batch
    ALREADY_REGISTERED = "ALREADY_REGISTERED"  # register_batch found it with the same total
    NOT_OVERDUE = "NOT_OVERDUE"  # fail_overdue: not RUNNING or its deadline has not passed


@dataclass(frozen=True)
class LedgerResult:
    outcome: Outcome
    batch_id: str
    child_id: str | None = None
    status: str | None = None  # the batch's status as last seen, when known
    total: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    resumed: bool = False  # the winning outcome handed again to the same winner (redelivery)
    reason: str | None = None

    @property
    def must_finalize(self) -> bool:
        return self.outcome is Outcome.COMPLETED

    @property
    def must_alarm(self) -> bool:
        return self.outcome is Outcome.FAILED_BATCH

    def to_dict(self) -> dict[str, Any]:
        out = {
            "outcome": self.outcome.value,
            "batchId": self.batch_id,
            "childId": self.child_id,
            "status": self.status,
            "total": self.total,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "resumed": self.resumed,
            "reason": self.reason,
        }
        return {k: v for k, v in out.items() if v is not None}


# --------------------------------------------------------------------------- helpers


def batch_key(batch_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": BATCH_PREFIX + batch_id}, "sk": {"S": META_SK}}


def child_key(batch_id: str, child_id: str, shard: int | None = None) -> dict[str, dict[str, str]]:
    pk = BATCH_PREFIX + batch_id if shard is None else shard_pk(batch_id, shard)
    return {"pk": {"S": pk}, "sk": {"S": CHILD_PREFIX + child_id}}


def _child_mark(key: dict, outcome: str, reason: str | None, recorded_at: str, expires: int) -> dict:
    """A child's mark item: its outcome, when it was recorded, its TTL and (if any) the reason."""
    mark = {**key, "outcome": _s(outcome), "recordedAt": _s(recorded_at), TTL_ATTRIBUTE: _n(expires)}
    if reason:
        mark["reason"] = _s(reason[:1000])
    return mark


def _counters(outcome: str) -> tuple[str, str]:
    """(the counter this outcome adds to, the other one)."""
    return ("succeeded", "failed") if outcome == CHILD_SUCCEEDED else ("failed", "succeeded")


def shard_pk(batch_id: str, shard: int) -> str:
    return f"{BATCH_PREFIX}{batch_id}{SHARD_INFIX}{shard}"


def shard_key(batch_id: str, shard: int) -> dict[str, dict[str, str]]:
    return {"pk": {"S": shard_pk(batch_id, shard)}, "sk": {"S": SHARD_SK}}


def shard_of(child_id: str, index: int | None, shards: int) -> int:
    """The shard of a child: by index when there is one (even spread), else a stable hash."""
    if index is not None:
        return index % shards
    return zlib.crc32(child_id.encode()) % shards


def plain(item: dict[str, Any] | None) -> dict[str, Any]:
    """DynamoDB attribute-value map -> plain dict (S and N only: what this table stores)."""
    out: dict[str, Any] = {}
    for key, value in (item or {}).items():
        ((kind, inner),) = value.items()
        out[key] = int(inner) if kind == "N" else inner
    return out


def _n(value: int) -> dict[str, str]:
    return {"N": str(int(value))}


def _s(value: str) -> dict[str, str]:
    return {"S": value}


def _code(exc: Exception) -> str:
    return (getattr(exc, "response", None) or {}).get("Error", {}).get("Code", "")  # None: no answer


def _valid_total(total: Any, where: str) -> int:
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        raise InvalidChildMessage(f"{where}: total must be a whole number >= 1, got {total!r}")
    return total


class Ledger:
    """The ledger rules over one table. ``failure_threshold`` is the number of failed children a
    batch tolerates (0: the first failure fails the batch); ``deadline_seconds`` applies to batches
    created by their first child message (``register_batch`` may set its own)."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        failure_threshold: int = 0,
        ttl_days: int = DEFAULT_TTL_DAYS,
        deadline_seconds: int | None = None,
        clock: Callable[[], float] = time.time,
        max_conflict_attempts: int = MAX_CONFLICT_ATTEMPTS,
        sleep: Callable[[float], None] = time.sleep,
        counter_shards: int = 1,
    ) -> None:
        if failure_threshold < 0:
            raise ValueError(f"failure_threshold must be >= 0, got {failure_threshold}")
        if not 1 <= counter_shards <= MAX_COUNTER_SHARDS:
            raise ValueError(f"counter_shards must be from 1 to {MAX_COUNTER_SHARDS}, got {counter_shards}")
        self.counter_shards = counter_shards
        self.client = client
        self.table_name = table_name
        self.failure_threshold = failure_threshold
        self.ttl_days = ttl_days
        self.deadline_seconds = deadline_seconds
        self.clock = clock
        self.max_conflict_attempts = max_conflict_attempts
        self.sleep = sleep

    # ----------------------------------------------------------------- time

    def _now(self) -> tuple[int, str]:
        now = self.clock()
        iso = datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="milliseconds")
        return int(now), iso

    def _expires(self, epoch: int) -> int:
        return epoch + self.ttl_days * 86400

    # ----------------------------------------------------------------- registration

    def register_batch(self, batch_id: str, total: int, deadline: int | None = None) -> LedgerResult:
        """Create the batch up front (conditional put). ``deadline`` is epoch seconds; without it the
        ledger's ``deadline_seconds`` (if any) from now applies. Registering again with the same
        total is a no-op (ALREADY_REGISTERED); with another total it raises TotalMismatch."""
        total = _valid_total(total, f"batch {batch_id}")
        epoch, iso = self._now()
        if deadline is None and self.deadline_seconds:
            deadline = epoch + self.deadline_seconds
        item = {
            **batch_key(batch_id),
            "total": _n(total),
            "succeeded": _n(0),
            "failed": _n(0),
            "done": _n(0),
            "status": _s(RUNNING),
            "createdAt": _s(iso),
            "updatedAt": _s(iso),
            TTL_ATTRIBUTE: _n(self._expires(epoch)),
        }
        if self.sharded:
            item["shards"] = _n(self.counter_shards)
        if deadline is not None:
            item.update(
                deadline=_n(deadline), **{SWEEP_KEY: _s(SWEEP_VALUE), SWEEP_SORT: _n(deadline)}
            )
        try:
            self.client.put_item(
                TableName=self.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise
            old = plain(exc.response.get("Item"))
            if old.get("total") != total:
                raise TotalMismatch(batch_id, old.get("total"), total) from exc
            return self._result(Outcome.ALREADY_REGISTERED, batch_id, None, old)
        return LedgerResult(Outcome.REGISTERED, batch_id, None, RUNNING, total, 0, 0)

    # ----------------------------------------------------------------- children

    def record_success(
        self,
        batch_id: str,
        child_id: str,
        *,
        total: int | None = None,
        index: int | None = None,
        decide: bool = True,
    ) -> LedgerResult:
        """Count one child as succeeded (once), then try to complete the batch. ``decide=False``
        only counts (one request): for a caller that decides later with ``decide()``, such as the
        Map workflow after its Distributed Map."""
        return self._record(batch_id, child_id, CHILD_SUCCEEDED, total, index, None, decide)

    def record_failure(
        self,
        batch_id: str,
        child_id: str,
        *,
        total: int | None = None,
        index: int | None = None,
        reason: str = "",
        decide: bool = True,
    ) -> LedgerResult:
        """Count one child as failed (once), then fail the batch if the threshold is exceeded
        (or complete it, if the failure is tolerated and it was the last child)."""
        return self._record(batch_id, child_id, CHILD_FAILED, total, index, reason or "failed", decide)

    def _record(
        self,
        batch_id: str,
        child_id: str,
        outcome: str,
        total: int | None,
        index: int | None,
        reason: str | None,
        decide: bool = True,
    ) -> LedgerResult:
        if not batch_id or not child_id:
            raise InvalidChildMessage("batchId and childId (or index) are required")
        if child_id.startswith("#"):
            raise InvalidChildMessage(f"batch {batch_id}: childId may not start with '#', got {child_id!r}")
        if total is not None:
            total = _valid_total(total, f"batch {batch_id}, child {child_id}")
        if index is not None and (
            not isinstance(index, int) or index < 0 or (total is not None and index >= total)
        ):
            raise InvalidChildMessage(
                f"batch {batch_id}: index must be a whole number in [0, total), got {index!r} "
                f"with total={total}"
            )
        if self.sharded:
            return self._record_sharded(batch_id, child_id, outcome, total, index, reason, decide)
        epoch, iso = self._now()
        expires = self._expires(epoch)
        mark = _child_mark(child_key(batch_id, child_id), outcome, reason, iso, expires)
        counter, other = _counters(outcome)
        names = {"#status": "status", "#total": "total"}
        values: dict[str, Any] = {
            ":running": _s(RUNNING),
            ":one": _n(1),
            ":zero": _n(0),
            ":now": _s(iso),
        }
        update = "SET #status = if_not_exists(#status, :running), updatedAt = :now"
        if total is not None:
            values[":total"] = _n(total)
            values[":created"] = _s(iso)
            values[":expires"] = _n(expires)
            update += (
                ", #total = if_not_exists(#total, :total), createdAt = if_not_exists(createdAt, :created)"
                f", {TTL_ATTRIBUTE} = if_not_exists({TTL_ATTRIBUTE}, :expires)"
            )
            if self.deadline_seconds:
                values[":deadline"] = _n(epoch + self.deadline_seconds)
                values[":sweep"] = _s(SWEEP_VALUE)
                update += (
                    ", deadline = if_not_exists(deadline, :deadline)"
                    f", {SWEEP_KEY} = if_not_exists({SWEEP_KEY}, :sweep)"
                    f", {SWEEP_SORT} = if_not_exists({SWEEP_SORT}, :deadline)"
                )
            condition = (
                "attribute_not_exists(#status) OR "
                "(#status = :running AND #total = :total AND done < #total)"
            )
        else:
            condition = "#status = :running AND done < #total"
            if index is not None:
                values[":index"] = _n(index)
                condition += " AND #total > :index"
        update += f" ADD {counter} :one, done :one, {other} :zero"

        items = [
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": mark,
                    "ConditionExpression": "attribute_not_exists(sk)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": batch_key(batch_id),
                    "UpdateExpression": update,
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": values,
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ]
        reasons = self._transact(items)
        if reasons is None:  # counted
            if not decide:
                return LedgerResult(Outcome.COUNTED, batch_id, child_id, RUNNING)
            return self._decide(batch_id, child_id, counted=True, failure=outcome == CHILD_FAILED)

        mark_reason, batch_reason = reasons[0], reasons[1]
        if mark_reason.get("Code") == "ConditionalCheckFailed" and not decide:
            return LedgerResult(Outcome.DUPLICATE, batch_id, child_id)
        if mark_reason.get("Code") == "ConditionalCheckFailed":
            # Already recorded: no-op, but make the decision check again (heals a crash between the
            # transaction and the check, and hands the winner its follow-up again).
            return self._decide(batch_id, child_id, counted=False, failure=outcome == CHILD_FAILED)
        if batch_reason.get("Code") != "ConditionalCheckFailed":
            raise LedgerError(f"batch {batch_id}: transaction cancelled: {reasons}")
        old = plain(batch_reason.get("Item"))
        if not old:
            raise BatchNotRegistered(
                f"batch {batch_id}: child {child_id} carries no total and the batch was never "
                "registered; send total in every message or call register_batch first"
            )
        if old.get("status") != RUNNING:
            resumed = self._resume(batch_id, child_id, old)
            return resumed or self._result(Outcome.BATCH_CLOSED, batch_id, child_id, old)
        if total is not None and old.get("total") != total:
            raise TotalMismatch(batch_id, old.get("total"), total)
        if index is not None and index >= old.get("total", 0):
            raise InvalidChildMessage(
                f"batch {batch_id}: index {index} is out of range for total={old.get('total')}"
            )
        raise TooManyChildren(
            f"batch {batch_id}: all {old.get('total')} children are recorded already; child "
            f"{child_id} is one too many (child ids must be unique and exactly total per batch)"
        )

    def _record_sharded(
        self,
        batch_id: str,
        child_id: str,
        outcome: str,
        total: int | None,
        index: int | None,
        reason: str | None,
        decide: bool,
    ) -> LedgerResult:
        """Sharded: one transaction on the child's shard (see the module docstring)."""
        if total is None:  # the registered total (one consistent read)
            meta = self.client.get_item(
                TableName=self.table_name, Key=batch_key(batch_id), ConsistentRead=True
            ).get("Item")
            if not meta:
                raise BatchNotRegistered(
                    f"batch {batch_id}: child {child_id} carries no total and the batch was never "
                    "registered; send total in every message or call register_batch first"
                )
            total = plain(meta)["total"]
            if index is not None and index >= total:
                raise InvalidChildMessage(f"batch {batch_id}: index {index} is out of range for total={total}")
        shard = shard_of(child_id, index, self.counter_shards)
        epoch, iso = self._now()
        expires = self._expires(epoch)
        mark = _child_mark(child_key(batch_id, child_id, shard), outcome, reason, iso, expires)
        counter, other = _counters(outcome)
        items = [
            {
                "Put": {
                    "TableName": self.table_name,
                    "Item": mark,
                    "ConditionExpression": "attribute_not_exists(sk)",
                }
            },
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": shard_key(batch_id, shard),
                    "UpdateExpression": (
                        "SET #total = if_not_exists(#total, :total), updatedAt = :now, "
                        f"{TTL_ATTRIBUTE} = if_not_exists({TTL_ATTRIBUTE}, :expires) "
                        f"ADD {counter} :one, done :one, {other} :zero"
                    ),
                    "ConditionExpression": "attribute_not_exists(pk) OR (#total = :total AND done < #total)",
                    "ExpressionAttributeNames": {"#total": "total"},
                    "ExpressionAttributeValues": {
                        ":total": _n(total), ":now": _s(iso), ":expires": _n(expires), ":one": _n(1), ":zero": _n(0),
                    },
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ]
        reasons = self._transact(items)
        if reasons is None or reasons[0].get("Code") == "ConditionalCheckFailed":
            counted = reasons is None
            if not decide:
                return LedgerResult(Outcome.COUNTED if counted else Outcome.DUPLICATE, batch_id, child_id, RUNNING)
            return self._decide(batch_id, child_id, counted=counted)
        if reasons[1].get("Code") != "ConditionalCheckFailed":
            raise LedgerError(f"batch {batch_id}: transaction cancelled: {reasons}")
        old = plain(reasons[1].get("Item"))
        if old.get("total") != total:
            raise TotalMismatch(batch_id, old.get("total"), total)
        state = self._decision_state(batch_id)
        if state.get("status") not in (None, RUNNING):
            resumed = self._resume(batch_id, child_id, state)
            return resumed or self._result(Outcome.BATCH_CLOSED, batch_id, child_id, state)
        raise TooManyChildren(
            f"batch {batch_id}: shard {shard} holds all the children it can (total={total}); child "
            f"{child_id} is one too many (child ids must be unique and exactly total per batch)"
        )

    def _transact(self, items: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """Run the transaction; None when it committed, else the cancellation reasons (after retrying
        TransactionConflict with jittered exponential backoff)."""
        for attempt in range(self.max_conflict_attempts):
            try:
                self.client.transact_write_items(TransactItems=items)
                return None
            except Exception as exc:
                if _code(exc) != "TransactionCanceledException":
                    raise
                reasons = exc.response.get("CancellationReasons") or []
                codes = {r.get("Code") for r in reasons}
                if "ConditionalCheckFailed" in codes or not codes & RETRYABLE_REASONS:
                    if len(reasons) != len(items):
                        raise
                    return reasons
                if attempt + 1 < self.max_conflict_attempts:
                    self._backoff(attempt)
        raise LedgerContention(
            f"TransactionConflict or throttling {self.max_conflict_attempts} times in a row on "
            f"{items[1]['Update']['Key']['pk']['S']}; the message will be retried"
        )

    def _backoff(self, attempt: int) -> None:
        """Full jitter: uniform(0, 25 ms * 2^attempt), capped at 1 s (8 attempts wait ~2.4 s at most).
        Measured under the contention model (benchmarks/ledger_benchmark.py): 10 writers on one
        batch item stay under 3 requests per child."""
        self.sleep(random.uniform(0, min(1.0, 0.025 * 2**attempt)))

    # ----------------------------------------------------------------- decisions

    def _decide(self, batch_id: str, child_id: str, *, counted: bool, failure: bool = False) -> LedgerResult:
        """Read the batch (consistently); make the transition it shows due, if any (the condition
        decides who wins); hand a redelivered winner its follow-up again."""
        state = self._decision_state(batch_id)
        if state.get("status") == RUNNING:
            attempt = (
                self._try_fail if self._due(state, complete=False)
                else self._try_complete if self._due(state, complete=True)
                else None
            )
            if attempt is not None:
                won, old = attempt(batch_id, child_id, state)
                if won:
                    return won
                state = {**state, **old} if old else state
        if state.get("status") != RUNNING:
            resumed = self._resume(batch_id, child_id, state)
            if resumed:
                return resumed
        return self._result(Outcome.COUNTED if counted else Outcome.DUPLICATE, batch_id, child_id, state)

    def _decision_state(self, batch_id: str) -> dict[str, Any]:
        """The batch as the decision sees it: the batch item (unsharded), or the batch item with the
        sums of its shards (sharded; the batch item is created here if nobody registered it)."""
        if not self.sharded:
            return self.read_batch(batch_id) or {}
        meta, shards = self._read_sharded(batch_id)
        if meta is None:
            total = next((s["total"] for s in shards if "total" in s), None)
            if total is None:
                return {}
            self.register_batch(batch_id, total)
            meta, shards = self._read_sharded(batch_id)
        return self._merge(meta or {}, shards)

    def _read_sharded(self, batch_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """One BatchGetItem (strongly consistent) of the batch item and its K shards."""
        keys = [batch_key(batch_id)] + [shard_key(batch_id, k) for k in range(self.counter_shards)]
        request: dict[str, Any] = {self.table_name: {"Keys": keys, "ConsistentRead": True}}
        items: list[dict[str, Any]] = []
        for attempt in range(self.max_conflict_attempts):
            response = self.client.batch_get_item(RequestItems=request)
            items += [plain(i) for i in response.get("Responses", {}).get(self.table_name, [])]
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            self._backoff(attempt)
        else:
            raise LedgerContention(f"batch {batch_id}: BatchGetItem kept returning unprocessed keys")
        meta = next((i for i in items if i["sk"] == META_SK), None)
        if meta is not None and meta.get("shards", self.counter_shards) != self.counter_shards:
            raise LedgerError(
                f"batch {batch_id} was opened with {meta.get('shards')} counter shards but this consumer "
                f"uses {self.counter_shards}; change ledger.counterShards only while no batch is open"
            )
        return meta, [i for i in items if i["sk"] == SHARD_SK]

    def _due(self, state: dict[str, Any], *, complete: bool) -> bool:
        """Whether the batch shows the completion (or the failure) transition is due."""
        if complete:
            return (state.get("done") == state.get("total") is not None
                    and state.get("failed", 0) <= self.failure_threshold)
        return state.get("failed", 0) > self.failure_threshold

    @staticmethod
    def _merge(meta: dict[str, Any], shards: list[dict[str, Any]]) -> dict[str, Any]:
        if meta.get("status", RUNNING) != RUNNING:
            return meta  # decided: the verdict carries the counts it was decided on
        sums = {k: sum(s.get(k, 0) for s in shards) for k in ("succeeded", "failed", "done")}
        return {**meta, **sums}

    def _transition(
        self,
        batch_id: str,
        child_id: str,
        *,
        to: str,
        condition: str,
        values: dict[str, Any],
        extra_set: str = "",
    ) -> tuple[LedgerResult | None, dict[str, Any]]:
        _, iso = self._now()
        try:
            response = self._update_item(
                TableName=self.table_name,
                Key=batch_key(batch_id),
                UpdateExpression=(
                    "SET #status = :to, finisherChild = :child, finishedAt = :now, updatedAt = :now"
                    f"{extra_set} REMOVE {SWEEP_KEY}, {SWEEP_SORT}"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames={"#status": "status", **({"#total": "total"} if "#total" in condition else {})},
                ExpressionAttributeValues={
                    ":to": _s(to),
                    ":child": _s(child_id),
                    ":now": _s(iso),
                    ":running": _s(RUNNING),
                    **values,
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise
            return None, plain(exc.response.get("Item"))
        new = plain(response.get("Attributes"))
        outcome = Outcome.COMPLETED if to == COMPLETED else Outcome.FAILED_BATCH
        return self._result(outcome, batch_id, child_id, new), new

    def _update_item(self, **kwargs: Any) -> dict[str, Any]:
        """UpdateItem, retrying TransactionConflictException (an UpdateItem on an item that an
        in-flight transaction holds) with jittered backoff; other errors propagate."""
        for attempt in range(self.max_conflict_attempts):
            try:
                return self.client.update_item(**kwargs)
            except Exception as exc:
                if _code(exc) != "TransactionConflictException":
                    raise
                if attempt + 1 == self.max_conflict_attempts:
                    raise LedgerContention(
                        f"TransactionConflictException {self.max_conflict_attempts} times in a row on "
                        f"{kwargs['Key']['pk']['S']}; the message will be retried"
                    ) from exc
                self._backoff(attempt)
        raise AssertionError("unreachable")

    def _try_complete(
        self, batch_id: str, child_id: str, state: dict[str, Any]
    ) -> tuple[LedgerResult | None, dict[str, Any]]:
        if self.sharded:
            return self._sharded_transition(batch_id, child_id, state, to=COMPLETED, reason=None)
        return self._transition(
            batch_id,
            child_id,
            to=COMPLETED,
            condition="#status = :running AND done = #total AND failed <= :threshold",
            values={":threshold": _n(self.failure_threshold)},
        )

    def _try_fail(
        self, batch_id: str, child_id: str, state: dict[str, Any]
    ) -> tuple[LedgerResult | None, dict[str, Any]]:
        reason = f"more than {self.failure_threshold} children failed"
        if self.sharded:
            return self._sharded_transition(batch_id, child_id, state, to=FAILED, reason=reason)
        return self._transition(
            batch_id,
            child_id,
            to=FAILED,
            condition="#status = :running AND failed > :threshold",
            values={":threshold": _n(self.failure_threshold), ":reason": _s(reason)},
            extra_set=", failReason = :reason",
        )

    def _sharded_transition(
        self, batch_id: str, child_id: str, state: dict[str, Any], *, to: str, reason: str | None
    ) -> tuple[LedgerResult | None, dict[str, Any]]:
        """The one conditional transition of a sharded batch: its status decides the winner; the
        counts the decision was made on (sums of consistent shard reads) are stored with it."""
        values = {
            ":succeeded": _n(state.get("succeeded", 0)),
            ":failed": _n(state.get("failed", 0)),
            ":done": _n(state.get("done", 0)),
        }
        extra = ", succeeded = :succeeded, failed = :failed, done = :done"
        if reason:
            values[":reason"] = _s(reason)
            extra += ", failReason = :reason"
        return self._transition(
            batch_id, child_id, to=to, condition="#status = :running", values=values, extra_set=extra
        )

    def _resume(self, batch_id: str, child_id: str, old: dict[str, Any]) -> LedgerResult | None:
        """The same winner, redelivered before it acknowledged its follow-up, gets it again."""
        if old.get("finisherChild") == child_id and "finalizedAt" not in old:
            outcome = Outcome.COMPLETED if old.get("status") == COMPLETED else Outcome.FAILED_BATCH
            return replace(self._result(outcome, batch_id, child_id, old), resumed=True)
        return None

    def acknowledge_finish(self, batch_id: str, child_id: str, finished_by: str) -> bool:
        """The winner did its follow-up (finalized / alarmed): stop handing it out again."""
        _, iso = self._now()
        try:
            self._update_item(
                TableName=self.table_name,
                Key=batch_key(batch_id),
                UpdateExpression="SET finalizedAt = :now, finishedBy = :by, updatedAt = :now",
                ConditionExpression="finisherChild = :child AND attribute_not_exists(finalizedAt)",
                ExpressionAttributeValues={":now": _s(iso), ":by": _s(finished_by), ":child": _s(child_id)},
            )
        except Exception as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def decide(self, batch_id: str, *, by: str) -> dict[str, Any]:
        """The verdict of a batch whose children have all been attempted (e.g. after a Distributed
        Map): RUNNING -> COMPLETED if every child was counted and failures are within the threshold,
        otherwise RUNNING -> FAILED (failed children, or children never accounted for). Conditional,
        so one caller decides; a repeated call returns the recorded verdict. ``by`` is stored as
        the decider (finisherChild). Returns a JSON-ready dict: verdict (COMPLETED|FAILED), batchId,
        total, succeeded, failed, unaccounted (total - counted), decidedBy, won."""
        item = self._decision_state(batch_id) or None
        if item is None:
            raise BatchNotRegistered(f"batch {batch_id}: not in the ledger; nothing to decide")
        won = False
        if item.get("status") == RUNNING:
            due_complete = item.get("done") == item.get("total") and item.get("failed", 0) <= self.failure_threshold
            if due_complete:
                result, new = self._try_complete(batch_id, by, item)
            else:
                unaccounted = item.get("total", 0) - item.get("done", 0)
                result, new = self._transition(
                    batch_id,
                    by,
                    to=FAILED,
                    condition="#status = :running",
                    values={
                        ":reason": _s(
                            f"{item.get('failed', 0)} children failed, {unaccounted} not accounted for"
                        )
                    },
                    extra_set=", failReason = :reason",
                )
            won = result is not None
            item = new or item
        total, done = item.get("total", 0), item.get("done", 0)
        return {
            "verdict": item.get("status"),
            "batchId": batch_id,
            "total": total,
            "succeeded": item.get("succeeded", 0),
            "failed": item.get("failed", 0),
            "unaccounted": total - done,
            "decidedBy": item.get("finisherChild"),
            "won": won,
        }

    # ----------------------------------------------------------------- deadlines

    def fail_overdue(self, batch_id: str, *, now: int | None = None, by: str = SWEEPER) -> LedgerResult:
        """RUNNING -> FAILED if the batch's deadline has passed (conditional; one caller wins)."""
        epoch = int(self.clock()) if now is None else now
        won, old = self._transition(
            batch_id,
            by,
            to=FAILED,
            condition="#status = :running AND deadline <= :nowEpoch",
            values={":nowEpoch": _n(epoch), ":reason": _s("deadline passed")},
            extra_set=", failReason = :reason",
        )
        return won or self._result(Outcome.NOT_OVERDUE, batch_id, None, old)

    def overdue_batch_ids(self, *, now: int | None = None, page_size: int = 100) -> Iterator[str]:
        """Batch ids whose deadline has passed while RUNNING: a Query on the sparse index."""
        epoch = int(self.clock()) if now is None else now
        kwargs: dict[str, Any] = dict(
            TableName=self.table_name,
            IndexName=SWEEP_INDEX,
            KeyConditionExpression=f"{SWEEP_KEY} = :running AND {SWEEP_SORT} <= :now",
            ExpressionAttributeValues={":running": _s(SWEEP_VALUE), ":now": _n(epoch)},
            Limit=page_size,
        )
        while True:
            page = self.client.query(**kwargs)
            for item in page.get("Items", []):
                yield item["pk"]["S"][len(BATCH_PREFIX):]
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # ----------------------------------------------------------------- reading (ops, tests)

    @property
    def sharded(self) -> bool:
        return self.counter_shards > 1

    def read_batch(self, batch_id: str) -> dict[str, Any] | None:
        """The batch item (strongly consistent): for operators, tests and the decision check, never
        used to count. Sharded, while RUNNING, with the sums of its shards."""
        if self.sharded:
            meta, shards = self._read_sharded(batch_id)
            if meta is None and not shards:
                return None
            return self._merge(meta or {"status": RUNNING, "total": shards[0].get("total")}, shards)
        item = self.client.get_item(
            TableName=self.table_name, Key=batch_key(batch_id), ConsistentRead=True
        ).get("Item")
        return plain(item) if item else None

    @staticmethod
    def _result(outcome: Outcome, batch_id: str, child_id: str | None, item: dict[str, Any]) -> LedgerResult:
        return LedgerResult(
            outcome,
            batch_id,
            child_id,
            item.get("status"),
            item.get("total"),
            item.get("succeeded"),
            item.get("failed"),
            reason=item.get("failReason"),
        )


def fail_overdue(client: Any, table_name: str, batch_id: str, *, now: int | None = None) -> LedgerResult:
    """Module-level form of ``Ledger.fail_overdue`` (what the sweeper calls per candidate)."""
    return Ledger(client, table_name).fail_overdue(batch_id, now=now)


def sweep_overdue(client: Any, table_name: str, *, now: int | None = None) -> list[LedgerResult]:
    """Fail every RUNNING batch past its deadline; returns the results of the ones this call won."""
    ledger = Ledger(client, table_name)
    epoch = int(time.time()) if now is None else now
    results = [ledger.fail_overdue(batch_id, now=epoch) for batch_id in ledger.overdue_batch_ids(now=epoch)]
    return [r for r in results if r.outcome is Outcome.FAILED_BATCH]

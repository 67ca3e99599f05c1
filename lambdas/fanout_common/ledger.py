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
  check is healed by the redelivery): ``SET status = COMPLETED IF status = RUNNING AND done = total
  AND failed <= threshold`` or ``SET status = FAILED IF status = RUNNING AND failed > threshold``.
  Exactly one caller wins a transition; only the winner gets COMPLETED (it must finalize) or
  FAILED_BATCH (it must raise the alarm). COMPLETED and FAILED are final: no rule leaves them.
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

Contract with producers: a batch has exactly ``total`` distinct child ids (the message's childId,
or its 0-based index); ids are not reused across batches. ``done < total`` rejects a child beyond
the total, and an index is checked against the total.

Pure logic over a boto3 DynamoDB *client* passed in; no module-level AWS clients.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from .errors import FanOutError

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

SWEEPER = "#deadline-sweeper"  # finisherChild of a deadline failure (never a child id: '#')
DEFAULT_TTL_DAYS = 30
MAX_CONFLICT_ATTEMPTS = 8


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
    """DynamoDB kept cancelling the transaction with TransactionConflict; retry the message."""


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


def child_key(batch_id: str, child_id: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": BATCH_PREFIX + batch_id}, "sk": {"S": CHILD_PREFIX + child_id}}


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
    return getattr(exc, "response", {}).get("Error", {}).get("Code", "")


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
    ) -> None:
        if failure_threshold < 0:
            raise ValueError(f"failure_threshold must be >= 0, got {failure_threshold}")
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
        epoch, iso = self._now()
        expires = self._expires(epoch)
        mark = {
            **child_key(batch_id, child_id),
            "outcome": _s(outcome),
            "recordedAt": _s(iso),
            TTL_ATTRIBUTE: _n(expires),
        }
        if reason:
            mark["reason"] = _s(reason[:1000])
        counter, other = ("succeeded", "failed") if outcome == CHILD_SUCCEEDED else ("failed", "succeeded")
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
                if "ConditionalCheckFailed" in codes or "TransactionConflict" not in codes:
                    if len(reasons) != len(items):
                        raise
                    return reasons
                if attempt + 1 < self.max_conflict_attempts:
                    self.sleep(random.uniform(0, 0.025 * 2**attempt))
        raise LedgerContention(
            f"TransactionConflict {self.max_conflict_attempts} times in a row on "
            f"{items[1]['Update']['Key']['pk']['S']}; the message will be retried"
        )

    # ----------------------------------------------------------------- decisions

    def _decide(self, batch_id: str, child_id: str, *, counted: bool, failure: bool) -> LedgerResult:
        """Try the transition this record makes possible; fall back to the other one when the batch
        item shows it is due (healing a caller that crashed before making it)."""
        first, second = (self._try_fail, self._try_complete) if failure else (self._try_complete, self._try_fail)
        won, old = first(batch_id, child_id)
        if won:
            return won
        if old.get("status") == RUNNING and self._due(old, complete=second == self._try_complete):
            won, old2 = second(batch_id, child_id)
            if won:
                return won
            old = old2 or old
        if old.get("status") != RUNNING:
            resumed = self._resume(batch_id, child_id, old)
            if resumed:
                return resumed
        return self._result(Outcome.COUNTED if counted else Outcome.DUPLICATE, batch_id, child_id, old)

    def _due(self, old: dict[str, Any], *, complete: bool) -> bool:
        """Whether the batch item shows the completion (or the failure) transition is due."""
        if complete:
            return old.get("done") == old.get("total") and old.get("failed", 0) <= self.failure_threshold
        return old.get("failed", 0) > self.failure_threshold

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
                if _code(exc) != "TransactionConflictException" or attempt + 1 == self.max_conflict_attempts:
                    raise
                self.sleep(random.uniform(0, 0.025 * 2**attempt))
        raise AssertionError("unreachable")

    def _try_complete(self, batch_id: str, child_id: str) -> tuple[LedgerResult | None, dict[str, Any]]:
        return self._transition(
            batch_id,
            child_id,
            to=COMPLETED,
            condition="#status = :running AND done = #total AND failed <= :threshold",
            values={":threshold": _n(self.failure_threshold)},
        )

    def _try_fail(self, batch_id: str, child_id: str) -> tuple[LedgerResult | None, dict[str, Any]]:
        return self._transition(
            batch_id,
            child_id,
            to=FAILED,
            condition="#status = :running AND failed > :threshold",
            values={
                ":threshold": _n(self.failure_threshold),
                ":reason": _s(f"more than {self.failure_threshold} children failed"),
            },
            extra_set=", failReason = :reason",
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
        item = self.read_batch(batch_id)
        if item is None:
            raise BatchNotRegistered(f"batch {batch_id}: not in the ledger; nothing to decide")
        won = False
        if item.get("status") == RUNNING:
            due_complete = item.get("done") == item.get("total") and item.get("failed", 0) <= self.failure_threshold
            if due_complete:
                result, new = self._try_complete(batch_id, by)
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

    def read_batch(self, batch_id: str) -> dict[str, Any] | None:
        """The batch item (strongly consistent): for operators and tests, never used to count."""
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

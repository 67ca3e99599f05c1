"""The work record: what happened to a child's *work*, kept apart from how the ledger *counted* it.

Why: recording a child is a TransactWriteItems on the batch's counter item (fanout_kit.patterns.completion_ledger.ledger).
Under contention DynamoDB cancels it with TransactionConflict ("Transaction is ongoing for the
item") and, once the ledger's own retries are spent, the consumer must return the message to the
queue (LedgerContention). Without a record of the work, the redelivery ran the work again and,
after maxReceiveCount receives, the message reached the dead-letter queue and its recorder counted
a child whose work had succeeded as FAILED: a false batch failure. Contention may cost time, never
correctness: the work's outcome is stored here, on the child's own item, *before* the contended
transaction, and every recorder consults it.

Item (same table, its own partition key per child: no hot key, and never part of a transaction,
so it is never refused with TransactionConflict)::

    pk="WORK#<batchId>#<childId>", sk="CHILD#<childId>"
        claimedBy   the delivery that holds (or last held) the claim (a random token)
        leaseUntil  epoch ms until which the claim is held (removed when the work ends)
        attempts    how many deliveries claimed the work
        workOutcome SUCCEEDED | FAILED (the last attempt's; SUCCEEDED is final)
        deadLetteredAt  set by the dead-letter recorder when it decided FAILED (final)
        expiresAt   TTL, like the ledger's items

Rules (each one a conditional UpdateItem on the child's item; one caller wins each):

* ``claim``: a delivery may run the work only ``IF`` the work has not succeeded, the child was not
  dead-lettered, and no other delivery holds an unexpired lease. A refused claim returns the item
  (ReturnValuesOnConditionCheckFailure ALL_OLD): SUCCEEDED -> record the success without running
  the work again; dead-lettered -> the child is FAILED, record that; a live lease held by another
  delivery -> ``ChildWorkInProgress`` (retryable: the message goes back to the queue).
* ``succeeded``: the claim holder stores SUCCEEDED ``IF`` the child was not dead-lettered
  meanwhile (possible only if the holder outlived its lease, which is its invocation's remaining
  time: then the child stays FAILED, fail closed). ``failed`` stores FAILED and frees the lease so
  a retry may claim at once.
* ``settle_dead_letter`` (a recorder of exhausted messages: the SQS DLQ recorder, the Kinesis
  on-failure recorder): ``SET deadLetteredAt IF`` the work has not succeeded and no lease is live.
  Won -> FAILED, for good (no later claim can run the work). Refused -> SUCCEEDED (the recorder
  counts the child succeeded: the work did succeed; its message only lost the race for the counter)
  or ``ChildWorkInProgress`` (the recorder's message is retried until the holder ends).

Together with the ledger's child mark (counted once), a child whose work succeeded is counted
succeeded exactly once, whatever happens to its messages, and its work is not run again.
Cost: two plain writes per child (claim, outcome: 1 WCU each, on the child's own key).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .ledger import CHILD_PREFIX, DEFAULT_TTL_DAYS, TTL_ATTRIBUTE, LedgerError, _code, plain

WORK_PREFIX = "WORK#"
WORK_SUCCEEDED = "SUCCEEDED"
WORK_FAILED = "FAILED"
# Without a Lambda context (tests, scripts), a claim is held for Lambda's maximum timeout.
DEFAULT_LEASE_SECONDS = 900
# Added to the invocation's remaining time: clocks of two Lambda hosts may differ a little.
LEASE_MARGIN_SECONDS = 5


class ChildWorkInProgress(LedgerError):
    """Another delivery of this child holds the work's claim and its lease has not expired:
    retryable (the message is reported as a batch item failure and delivered again)."""


class Claim(str, Enum):
    RUN = "RUN"  # this delivery holds the claim: run the work
    SUCCEEDED = "SUCCEEDED"  # the work succeeded already: record the success, do not run it again
    DEAD_LETTERED = "DEAD_LETTERED"  # the child was dead-lettered and counted FAILED: record that


def work_key(batch_id: str, child_id: str) -> dict[str, dict[str, str]]:
    # (pk, sk) identifies (batch, child) uniquely: sk gives the child, pk minus it the batch.
    return {"pk": {"S": f"{WORK_PREFIX}{batch_id}#{child_id}"}, "sk": {"S": CHILD_PREFIX + child_id}}


@dataclass(frozen=True)
class WorkRecords:
    """The work-record rules over one table (the ledger's)."""

    client: Any
    table_name: str
    ttl_days: int = DEFAULT_TTL_DAYS
    clock: Callable[[], float] = time.time

    def _update(self, batch_id: str, child_id: str, *, update: str, condition: str,
                values: dict[str, Any], names: dict[str, str] | None = None) -> dict[str, Any] | None:
        """One conditional UpdateItem; None when it was applied, else the item as it was."""
        kwargs: dict[str, Any] = dict(
            TableName=self.table_name,
            Key=work_key(batch_id, child_id),
            UpdateExpression=update,
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        if names:
            kwargs["ExpressionAttributeNames"] = names
        try:
            self.client.update_item(**kwargs)
        except Exception as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise
            return plain(getattr(exc, "response", {}).get("Item"))
        return None

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def claim(self, batch_id: str, child_id: str, token: str, *, lease_seconds: float) -> Claim:
        now = self._now_ms()
        old = self._update(
            batch_id,
            child_id,
            update=(
                "SET claimedBy = :token, leaseUntil = :until, batchId = :batch, childId = :child, "
                f"{TTL_ATTRIBUTE} = if_not_exists({TTL_ATTRIBUTE}, :expires) ADD attempts :one"
            ),
            condition=(
                "(attribute_not_exists(workOutcome) OR workOutcome <> :succeeded) "
                "AND attribute_not_exists(deadLetteredAt) "
                "AND (attribute_not_exists(leaseUntil) OR leaseUntil <= :now)"
            ),
            values={
                ":token": {"S": token},
                ":until": {"N": str(now + int(lease_seconds * 1000))},
                ":batch": {"S": batch_id},
                ":child": {"S": child_id},
                ":expires": {"N": str(int(now / 1000) + self.ttl_days * 86400)},
                ":one": {"N": "1"},
                ":succeeded": {"S": WORK_SUCCEEDED},
                ":now": {"N": str(now)},
            },
        )
        if old is None:
            return Claim.RUN
        if old.get("workOutcome") == WORK_SUCCEEDED:
            return Claim.SUCCEEDED
        if "deadLetteredAt" in old:
            return Claim.DEAD_LETTERED
        raise ChildWorkInProgress(
            f"batch {batch_id}, child {child_id}: another delivery is running its work (claim held "
            f"for {max(0, old.get('leaseUntil', now) - now) / 1000:.1f} s more); the message will be retried"
        )

    def succeeded(self, batch_id: str, child_id: str, token: str) -> bool:
        """Store SUCCEEDED (final) and free the lease. False: the child was dead-lettered and counted
        FAILED before this holder finished (it outlived its lease): it stays FAILED."""
        old = self._update(
            batch_id,
            child_id,
            update="SET workOutcome = :succeeded, workedAt = :now, workedBy = :token REMOVE leaseUntil",
            condition="attribute_not_exists(deadLetteredAt)",
            values={":succeeded": {"S": WORK_SUCCEEDED}, ":now": {"N": str(self._now_ms())}, ":token": {"S": token}},
        )
        return old is None

    def failed(self, batch_id: str, child_id: str, token: str, reason: str) -> None:
        """Store FAILED (this attempt's) and free the lease so a retry may claim at once; a no-op if
        another delivery took the claim over."""
        self._update(
            batch_id,
            child_id,
            update="SET workOutcome = :failed, workedAt = :now, failReason = :reason REMOVE leaseUntil",
            condition="claimedBy = :token AND (attribute_not_exists(workOutcome) OR workOutcome <> :succeeded)",
            values={
                ":failed": {"S": WORK_FAILED},
                ":succeeded": {"S": WORK_SUCCEEDED},
                ":now": {"N": str(self._now_ms())},
                ":reason": {"S": (reason or "failed")[:1000]},
                ":token": {"S": token},
            },
        )

    def settle_dead_letter(self, batch_id: str, child_id: str) -> str:
        """A recorder of an exhausted message: SUCCEEDED if the work succeeded (count it succeeded),
        else FAILED, for good (no delivery runs the work after this). Raises ChildWorkInProgress
        while another delivery holds a live claim."""
        now = self._now_ms()
        old = self._update(
            batch_id,
            child_id,
            update=(
                "SET deadLetteredAt = :now, workOutcome = :failed, batchId = :batch, childId = :child, "
                f"{TTL_ATTRIBUTE} = if_not_exists({TTL_ATTRIBUTE}, :expires)"
            ),
            condition=(
                "(attribute_not_exists(workOutcome) OR workOutcome <> :succeeded) "
                "AND (attribute_not_exists(leaseUntil) OR leaseUntil <= :now)"
            ),
            values={
                ":now": {"N": str(now)},
                ":failed": {"S": WORK_FAILED},
                ":succeeded": {"S": WORK_SUCCEEDED},
                ":batch": {"S": batch_id},
                ":child": {"S": child_id},
                ":expires": {"N": str(int(now / 1000) + self.ttl_days * 86400)},
            },
        )
        if old is None:
            return WORK_FAILED
        if old.get("workOutcome") == WORK_SUCCEEDED:
            return WORK_SUCCEEDED
        raise ChildWorkInProgress(
            f"batch {batch_id}, child {child_id}: a delivery is still running its work; the "
            "dead-lettered message will be retried"
        )

    def read(self, batch_id: str, child_id: str) -> dict[str, Any] | None:
        item = self.client.get_item(
            TableName=self.table_name, Key=work_key(batch_id, child_id), ConsistentRead=True
        ).get("Item")
        return plain(item) if item else None


__all__ = ["ChildWorkInProgress", "Claim", "WorkRecords", "work_key"]

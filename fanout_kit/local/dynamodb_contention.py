"""A model of DynamoDB write contention for moto, which has none: ``dynamodb_contention(...)``.

moto applies every DynamoDB request instantly and, with ``moto_fixes.serialized_dynamodb_writes``,
one at a time, so no local test ever sees what DynamoDB does when many writers hit one item. This
module puts that behaviour back, on top of the serialization (which stays: it is what makes each
write atomic in the emulator), while the context manager is active.

What it takes from AWS's documentation (DynamoDB Developer Guide "Transaction conflict handling",
the TransactionCanceledException / TransactionConflictException API reference, "Throttling",
"Partitions and data distribution", "Capacity management for transactions"):

* A TransactWriteItems on an item that an ongoing TransactWriteItems includes is cancelled as a
  whole: ``TransactionCanceledException`` with one CancellationReason per action, in request
  order, ``{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}`` for
  a held item and ``{"Code": "None"}`` for the others. Nothing of it is applied.
* A PutItem, UpdateItem or DeleteItem on such an item fails with ``TransactionConflictException``
  ("Transaction is ongoing for the item"). A plain write does not itself hold its item against a
  later transaction (the documented conflicts are with an *ongoing TransactWriteItems*).
* Reads (GetItem, BatchGetItem, Query, Scan) never conflict and see the last committed state.
* Capacity: a transactional write costs 2 WCU per item written (per KB; the ledger's items are
  under 1 KB), a plain write 1 WCU, a conditional write that fails still consumes it. One
  partition serves at most 1,000 WCU per second. Beyond that DynamoDB throttles: a plain write
  fails with ``ProvisionedThroughputExceededException`` (ThrottlingReasons
  ``TableWriteKeyRangeThroughputExceeded``, which the SDKs retry by themselves) and a transaction
  is cancelled with the reason ``ThrottlingError`` on the items over the limit.

What it simplifies, on purpose:

* "Ongoing" is a window: a transaction holds its items for ``window_seconds`` after it is applied
  (a number: fixed; a pair ``(low, high)``: drawn uniformly per transaction, e.g. (0.010, 0.015)
  for 10-15 ms) (conflicts are decided at apply time, inside the emulator's serialization lock, so time
  spent queued for that lock does not count as in flight), then releases them (a real transaction's duration varies; a fixed window makes the
  local runs repeatable in spirit and lets a test choose how hot the race is). The caller waits
  the window (its latency), outside the emulator's serialization lock, so other writers run and
  meet the held items meanwhile.
* The throughput ceiling (``wcu_per_key_per_second``, off by default) is counted per partition key
  value over a sliding one-second window; a partition key is treated as its own partition. Real
  DynamoDB places many keys in one partition (so the limit can bite earlier) and can split a hot
  item collection by sort key ("split for heat"), but never one item: the per-key figure is the
  bound a hot counter item lives under. Cancelled and throttled requests are not charged, item
  sizes are taken as <= 1 KB, and reads are not throttled.
* TransactGetItems, idempotency tokens (ClientRequestToken) and global tables are not modelled.

``stats`` counts what happened (``transaction_conflicts``, ``write_conflicts``,
``throttled_transactions``, ``throttled_writes``, ``transactions``, ``writes``) and
``wcu_by_key`` the capacity each partition key consumed; ``hold(table, key)`` lets a test play
"another transaction is in flight on this item" for as long as it likes.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.dynamodb.exceptions import DynamodbException, TransactionCanceledException
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.utilities import dynamo_json_dump

from fanout_kit.local.moto_fixes import _LOCK as _SERIAL  # serialized_dynamodb_writes' lock (re-entrant)

CONFLICT_MESSAGE = "Transaction is ongoing for the item"
THROTTLING_MESSAGE = (
    "Throughput exceeds the current capacity of your table or index. DynamoDB is automatically "
    "scaling your table or index so please try again shortly."
)
PARTITION_WCU_PER_SECOND = 1000  # documented per-partition write ceiling
TRANSACTIONAL_WCU = 2  # per item written by TransactWriteItems (<= 1 KB)
PLAIN_WCU = 1  # per PutItem / UpdateItem / DeleteItem (<= 1 KB)
DEFAULT_WINDOW_SECONDS = 0.004

ItemKey = tuple[str, str, str]  # (table, partition key value, sort key value or "")


class TransactionConflictException(DynamodbException):
    error_type = "com.amazonaws.dynamodb.v20120810#TransactionConflictException"

    def __init__(self) -> None:
        super().__init__(self.error_type, message=CONFLICT_MESSAGE)


class ProvisionedThroughputExceededException(DynamodbException):
    error_type = "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"

    def __init__(self, table_arn: str) -> None:
        super().__init__(self.error_type, message=THROTTLING_MESSAGE)
        self.description = dynamo_json_dump(
            {
                "__type": self.error_type,
                "message": THROTTLING_MESSAGE,
                "ThrottlingReasons": [
                    {"reason": "TableWriteKeyRangeThroughputExceeded", "resource": table_arn}
                ],
            }
        )


def _key_of(backend: DynamoDBBackend, table_name: str | None, key_or_item: dict[str, Any] | None) -> ItemKey | None:
    table = backend.tables.get(table_name or "")
    if table is None or not key_or_item or table.hash_key_attr not in key_or_item:
        return None  # moto's own validation answers these
    hash_value = next(iter(key_or_item[table.hash_key_attr].values()))
    range_value = ""
    if table.has_range_key and table.range_key_attr in key_or_item:
        range_value = next(iter(key_or_item[table.range_key_attr].values()))
    return (table.name, str(hash_value), str(range_value))


def _transaction_keys(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> list[ItemKey | None]:
    keys = []
    for entry in transact_items:
        op_type, op = next(iter(entry.items()))
        if not isinstance(op, dict):
            keys.append(None)
            continue
        keys.append(_key_of(backend, op.get("TableName"), op.get("Item" if op_type == "Put" else "Key")))
    return keys


class ContentionModel:
    """In-flight holds, conflicts and an optional per-partition-key write ceiling (see module)."""

    def __init__(
        self,
        *,
        window_seconds: float | tuple[float, float] = DEFAULT_WINDOW_SECONDS,
        wcu_per_key_per_second: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        low, high = window_seconds if isinstance(window_seconds, tuple) else (window_seconds, window_seconds)
        if low < 0 or high < low:
            raise ValueError(f"window_seconds must be >= 0 (or a pair low <= high), got {window_seconds}")
        self.window_range = (low, high)
        if wcu_per_key_per_second is not None and wcu_per_key_per_second <= 0:
            raise ValueError(f"wcu_per_key_per_second must be > 0, got {wcu_per_key_per_second}")
        self.window_seconds = window_seconds
        self.wcu_per_key_per_second = wcu_per_key_per_second
        self.clock = clock
        self.sleep = sleep
        self.stats: Counter[str] = Counter()
        self.wcu_by_key: Counter[tuple[str, str]] = Counter()
        self._held: dict[ItemKey, int] = {}
        self._charges: dict[tuple[str, str], deque[tuple[float, int]]] = defaultdict(deque)
        self._lock = threading.RLock()  # re-entered when a cancelled transaction releases its holds
        self._token = 0
        self._applying = threading.local()  # moto applies a transaction through put_item/update_item

    def window(self) -> float:
        """How long the next transaction stays in flight."""
        low, high = self.window_range
        return low if low == high else random.uniform(low, high)

    # ------------------------------------------------------------- capacity
    def _over_ceiling(self, costs: dict[tuple[str, str], int]) -> set[tuple[str, str]]:
        """Partition keys this request would take over the ceiling (caller holds the lock)."""
        if self.wcu_per_key_per_second is None:
            return set()
        now = self.clock()
        over = set()
        for pk, cost in costs.items():
            window = self._charges[pk]
            while window and window[0][0] <= now - 1.0:
                window.popleft()
            if sum(c for _, c in window) + cost > self.wcu_per_key_per_second:
                over.add(pk)
        return over

    def _charge(self, costs: dict[tuple[str, str], int]) -> None:
        now = self.clock()
        for pk, cost in costs.items():
            self._charges[pk].append((now, cost))
            self.wcu_by_key[pk] += cost

    # ------------------------------------------------------------- holds
    @contextmanager
    def hold(self, table: str, partition_key: str, sort_key: str = "") -> Iterator[None]:
        """Play another in-flight transaction on one item until the block ends (tests)."""
        key = (table, partition_key, sort_key)
        with self._lock:
            self._token += 1
            self._held[key] = self._token
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(key, None)

    def held(self) -> set[ItemKey]:
        with self._lock:
            return set(self._held)

    # ------------------------------------------------------------- the wrapped operations
    def transact_write_items(self, original: Callable[..., Any]) -> Callable[..., Any]:
        model = self

        def transact_write_items(backend: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> Any:
            keys = _transaction_keys(backend, transact_items)
            costs: Counter[tuple[str, str]] = Counter()
            for key in keys:
                if key is not None:
                    costs[key[:2]] += TRANSACTIONAL_WCU
            # Decide at apply time, inside the emulator's serialization lock: time a request spends
            # queued for that lock is an artifact of the emulator, not time in flight on DynamoDB.
            with _SERIAL, model._lock:
                if any(key in model._held for key in keys if key is not None):
                    model.stats["transaction_conflicts"] += 1
                    raise TransactionCanceledException(
                        [("TransactionConflict", CONFLICT_MESSAGE, None) if key in model._held else (None, None, None)
                         for key in keys]
                    )
                over = model._over_ceiling(costs)
                if over:
                    model.stats["throttled_transactions"] += 1
                    raise TransactionCanceledException(
                        [("ThrottlingError", THROTTLING_MESSAGE, None)
                         if key is not None and key[:2] in over else (None, None, None) for key in keys]
                    )
                model._charge(costs)
                model._token += 1
                token = model._token
                mine = [key for key in keys if key is not None]
                for key in mine:
                    model._held[key] = token
                model.stats["transactions"] += 1
                try:
                    model._applying.active = True
                    try:
                        result = original(backend, transact_items)  # re-enters _SERIAL
                    finally:
                        model._applying.active = False
                except BaseException:
                    model._release(mine, token)  # cancelled (a condition failed): nothing in flight
                    raise
            try:
                window = model.window()
                if window:
                    model.sleep(window)  # in flight: the items stay held
            finally:
                model._release(mine, token)
            return result

        return transact_write_items

    def _release(self, keys: list[ItemKey], token: int) -> None:
        with self._lock:
            for key in keys:
                if self._held.get(key) == token:
                    del self._held[key]

    def plain_write(self, original: Callable[..., Any], key_argument: str) -> Callable[..., Any]:
        model = self

        def write(backend: DynamoDBBackend, table_name: str, *args: Any, **kwargs: Any) -> Any:
            source = kwargs.get(key_argument, args[0] if args else None)
            key = _key_of(backend, table_name, source)
            if key is not None and not getattr(model._applying, "active", False):
                with _SERIAL, model._lock:
                    if key in model._held:
                        model.stats["write_conflicts"] += 1
                        raise TransactionConflictException()
                    cost = {key[:2]: PLAIN_WCU}
                    if model._over_ceiling(cost):
                        model.stats["throttled_writes"] += 1
                        raise ProvisionedThroughputExceededException(backend.tables[table_name].table_arn)
                    model._charge(cost)
                    model.stats["writes"] += 1
                    return original(backend, table_name, *args, **kwargs)  # re-enters _SERIAL
            return original(backend, table_name, *args, **kwargs)

        return write


# DynamoDBBackend write methods and the argument that carries the item's key.
_PLAIN_WRITES = {"put_item": "item_attrs", "update_item": "key", "delete_item": "key"}
_ACTIVE: list[ContentionModel] = []
_ACTIVE_LOCK = threading.Lock()


@contextmanager
def dynamodb_contention(model: ContentionModel | None = None, **settings: Any) -> Iterator[ContentionModel]:
    """While active, moto's DynamoDB backend behaves as ``model`` (or ``ContentionModel(**settings)``)
    says. Enter it *inside* ``serialized_dynamodb_writes()``: it wraps the serialized methods, and
    the in-flight wait happens outside their lock. Not re-entrant (one model at a time)."""
    model = model or ContentionModel(**settings)
    with _ACTIVE_LOCK:
        if _ACTIVE:
            raise RuntimeError("a DynamoDB contention model is already active")
        _ACTIVE.append(model)
        saved = {name: DynamoDBBackend.__dict__[name] for name in ("transact_write_items", *_PLAIN_WRITES)}
        DynamoDBBackend.transact_write_items = model.transact_write_items(saved["transact_write_items"])
        for name, argument in _PLAIN_WRITES.items():
            setattr(DynamoDBBackend, name, model.plain_write(saved[name], argument))
    try:
        yield model
    finally:
        with _ACTIVE_LOCK:
            for name, method in saved.items():
                setattr(DynamoDBBackend, name, method)
            _ACTIVE.clear()


def modelled_batch_ceiling(writes_per_child: dict[str, float], *, wcu_per_partition: float = PARTITION_WCU_PER_SECOND,
                           rcu_per_partition: float = 3000, reads_per_child: dict[str, float] | None = None) -> float:
    """Children per second one batch can record before a partition key hits its ceiling:
    ``writes_per_child`` maps each partition key (class) to the WCU one child costs it on average,
    ``reads_per_child`` likewise in RCU (strongly consistent, <= 4 KB: 1 RCU per item read)."""
    limits = [wcu_per_partition / w for w in writes_per_child.values() if w > 0]
    limits += [rcu_per_partition / r for r in (reads_per_child or {}).values() if r > 0]
    return min(limits) if limits else float("inf")

"""Fixes of moto 5.2.5 emulator bugs that would otherwise make correct code look wrong.

* moto's DynamoDB backend is not thread-safe: concurrent ``UpdateItem ... ADD`` or
  ``TransactWriteItems`` on one item (Distributed Map children, or a threaded ``moto server``
  answering concurrent consumers) lose increments: 100 concurrent transactions counted 97 in a run
  here. Real DynamoDB applies each write atomically. ``serialized_dynamodb_writes()`` makes every
  write operation of the backend take one lock, which is what atomicity per item means for a
  counter (it serializes more than DynamoDB does, which only costs local speed). Reads
  (GetItem, which BatchGetItem uses per key, Query, Scan) take the same lock: moto applies an
  UpdateItem attribute by attribute and a cancelled transaction is undone after the fact, so an
  unlocked read could see half a write; DynamoDB's reads only ever return committed items.
* moto's ``TransactWriteItems`` deep-copies every table it touches before each transaction, to
  roll back on failure: O(table size) per transaction, O(N²) for a batch of N children (1,000
  Map items took 52 s here). Under the same lock, the backup is made of the touched items only
  and restored the same way on failure: the same all-or-nothing outcome.
* The Distributed Map worker (``DistributedItemProcessorWorker._eval_pool``) recurses once per
  item it processes, so a worker that takes more than ~1,000 items (10,000 items at
  MaxConcurrency 10) dies with RecursionError. ``iterative_map_workers()`` runs the same steps in
  a loop.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

WRITE_METHODS = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
READ_METHODS = ("get_item", "query", "scan")
_LOCK = threading.RLock()
_DEPTH = [0]
_ORIGINALS = {name: getattr(DynamoDBBackend, name) for name in WRITE_METHODS + READ_METHODS}


class _CopyExceptTables:
    """Stands in for the ``copy`` module inside moto.dynamodb.models during a transaction."""

    copy = staticmethod(copy.copy)

    @staticmethod
    def deepcopy(obj: Any, memo: Any = None) -> Any:
        return obj if isinstance(obj, Table) else copy.deepcopy(obj, memo)


def _transact_with_item_backups(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    backups = []
    for entry in transact_items:
        op_type, op = next(iter(entry.items()))
        table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
        if table is None:
            continue
        source = op.get("Item" if op_type == "Put" else "Key") or {}
        try:
            hash_value = DynamoType(source[table.hash_key_attr])
            range_value = DynamoType(source[table.range_key_attr]) if table.has_range_key else None
        except KeyError:
            continue  # moto's own validation rejects the operation
        backups.append((table, hash_value, range_value, copy.deepcopy(table.get_item(hash_value, range_value))))
    dynamodb_models.copy = _CopyExceptTables
    try:
        return _ORIGINALS["transact_write_items"](self, transact_items)
    except Exception:
        for table, hash_value, range_value, old in reversed(backups):
            if range_value is None:
                if old is None:
                    table.items.pop(hash_value, None)
                else:
                    table.items[hash_value] = old
            elif old is None:
                table.items[hash_value].pop(range_value, None)
            else:
                table.items[hash_value][range_value] = old
        raise
    finally:
        dynamodb_models.copy = copy


def _locked(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with _LOCK:
            return method(*args, **kwargs)

    return wrapper


@contextmanager
def serialized_dynamodb_writes() -> Iterator[None]:
    """While active (re-entrant), moto's DynamoDB write operations (and reads) run one at a time."""
    with _LOCK:
        if _DEPTH[0] == 0:
            for name, original in _ORIGINALS.items():
                if name == "transact_write_items":
                    original = _transact_with_item_backups
                setattr(DynamoDBBackend, name, _locked(original))
        _DEPTH[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH[0] -= 1
            if _DEPTH[0] == 0:
                for name, original in _ORIGINALS.items():
                    setattr(DynamoDBBackend, name, original)


@contextmanager
def cached_interpreter_clients() -> Iterator[None]:
    """moto's interpreter builds a new boto3 client (and TLS context) for every task it runs;
    reuse one per (region, service) while active. boto3 clients are thread-safe. Speed only."""
    import sys

    from moto.stepfunctions.parser.asl.utils import boto_client

    original = boto_client.boto_client_for
    cache: dict[tuple[str, str, bool], Any] = {}
    lock = threading.Lock()

    def cached(region: str, service: str, state_credentials: Any = None):
        key = (region, service, boto_client.botocore_stubber.enabled)
        with lock:
            if key not in cache:
                cache[key] = original(region=region, service=service, state_credentials=state_credentials)
            return cache[key]

    patched = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("moto.stepfunctions.parser") and getattr(module, "boto_client_for", None) is original
    ]
    for module in patched:
        module.boto_client_for = cached
    try:
        yield
    finally:
        for module in patched:
            module.boto_client_for = original


def _iterative_eval_pool(self, job, worker_frame) -> None:
    """moto 5.2.5's DistributedItemProcessorWorker._eval_pool, as a loop instead of recursion."""
    while True:
        if job is None:
            self._env.delete_frame(worker_frame)
            return
        job_frame = worker_frame.open_inner_frame()
        self._eval_job(env=job_frame, job=job)
        worker_frame.delete_frame(job_frame)
        if isinstance(job.job_output, Exception) or self.stopped():
            self._env.delete_frame(worker_frame)
            self._job_pool.close_job(job)
            return
        next_job = self._job_pool.next_job()
        if next_job is None:
            self._env.delete_frame(worker_frame)
            self._job_pool.close_job(job)
            return
        self._job_pool.close_job(job)
        job = next_job


@contextmanager
def iterative_map_workers() -> Iterator[None]:
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.itemprocessor import (
        distributed_item_processor_worker as module,
    )

    worker = module.DistributedItemProcessorWorker
    original = worker._eval_pool
    worker._eval_pool = _iterative_eval_pool
    try:
        yield
    finally:
        worker._eval_pool = original

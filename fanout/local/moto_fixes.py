"""Fixes of moto 5.2.5 emulator bugs that would otherwise make correct code look wrong.

* moto's DynamoDB backend is not thread-safe: concurrent ``UpdateItem ... ADD`` or
  ``TransactWriteItems`` on one item (Distributed Map children, or a threaded ``moto server``
  answering concurrent consumers) lose increments: 100 concurrent transactions counted 97 in a run
  here. Real DynamoDB applies each write atomically. ``serialized_dynamodb_writes()`` makes every
  write operation of the backend take one lock, which is what atomicity per item means for a
  counter (it serializes more than DynamoDB does, which only costs local speed).
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from collections.abc import Iterator

from moto.dynamodb.models import DynamoDBBackend

WRITE_METHODS = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
_LOCK = threading.RLock()
_DEPTH = [0]
_ORIGINALS = {name: getattr(DynamoDBBackend, name) for name in WRITE_METHODS}


def _locked(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with _LOCK:
            return method(*args, **kwargs)

    return wrapper


@contextmanager
def serialized_dynamodb_writes() -> Iterator[None]:
    """While active (re-entrant), moto's DynamoDB write operations run one at a time."""
    with _LOCK:
        if _DEPTH[0] == 0:
            for name, original in _ORIGINALS.items():
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

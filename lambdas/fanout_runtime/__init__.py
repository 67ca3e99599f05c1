"""The fan-out kit's runtime contract for your own Lambda functions: the error classes the
workflows retry or dead-letter (``fanout_runtime.errors``) and the events your functions receive
(``fanout_runtime.events``, typed definitions and parse helpers), and a fault switch to rehearse
failures on a deployed stack (``fanout_runtime.faults``).

Standard library only. It ships in the kit's wheel (for your tests and local runs) and as a
Lambda layer that the constructs attach to your functions (``fanout_kit.layer.runtime_layer``),
so ``from fanout_runtime import RetryableTaskError`` works the same locally and on AWS.
"""

from fanout_runtime.errors import FanOutError, NonRetryableTaskError, RetryableTaskError
from fanout_runtime.events import (
    LedgerChildEvent,
    MapItem,
    MapWorkerEvent,
    MapWorkerResult,
    TaskEvent,
    parse_ledger_child_event,
    parse_map_worker_event,
    parse_task_event,
)

__all__ = [
    "FanOutError",
    "LedgerChildEvent",
    "MapItem",
    "MapWorkerEvent",
    "MapWorkerResult",
    "NonRetryableTaskError",
    "RetryableTaskError",
    "TaskEvent",
    "parse_ledger_child_event",
    "parse_map_worker_event",
    "parse_task_event",
]

"""The fan-out kit's runtime contract for your own Lambda functions: the error classes the
workflows retry or dead-letter (``fanout_runtime.errors``) and the events your functions receive
(``fanout_runtime.events``, typed definitions and parse helpers), and a fault switch to rehearse
failures on a deployed stack (``fanout_runtime.faults``).

Standard library only. It ships in the kit's wheel (for your tests and local runs) and as a
Lambda layer that the constructs attach to your functions (``fanout_kit.shared.layer.runtime_layer``),
so ``from fanout_runtime import RetryableTaskError`` works the same locally and on AWS.
"""

from fanout_runtime.errors import FanOutError, NonRetryableTaskError, RetryableTaskError
from fanout_runtime.events import (
    BatchItemFailure,
    LedgerChildEvent,
    MapItem,
    MapWorkerEvent,
    MapWorkerPartialResult,
    MapWorkerResult,
    TaskEvent,
    batch_item_failure,
    batch_item_failures,
    parse_ledger_child_event,
    parse_map_worker_event,
    parse_task_event,
)

__all__ = [
    "BatchItemFailure",
    "FanOutError",
    "LedgerChildEvent",
    "MapItem",
    "MapWorkerEvent",
    "MapWorkerPartialResult",
    "MapWorkerResult",
    "NonRetryableTaskError",
    "RetryableTaskError",
    "TaskEvent",
    "batch_item_failure",
    "batch_item_failures",
    "parse_ledger_child_event",
    "parse_map_worker_event",
    "parse_task_event",
]

"""The fan-out kit's constructs, for any CDK app (Python):

    from fanout_kit import ParallelFanOut, DistributedMapFanOut, CompletionLedger, FanOutTask

Props that are plain data (retries, alarm thresholds, map and ledger settings, what every
resource shares) come from ``fanout_kit.settings`` and are re-exported here. The constructs are
imported on first use, so ``fanout_kit.settings`` can be used without loading the CDK.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from fanout_kit._version import __version__
from fanout_kit.settings import (
    AlarmThresholds,
    LedgerSettings,
    MapSettings,
    ResourceSettings,
    WorkflowRetries,
)
from fanout_kit.statemachines.checks import ConfigError
from fanout_kit.statemachines.retry_policy import RetrySettings

_CONSTRUCTS = {
    "ParallelFanOut": "fanout_kit.parallel",
    "FanOutTask": "fanout_kit.parallel",
    "DistributedMapFanOut": "fanout_kit.distributed_map",
    "CompletionLedger": "fanout_kit.ledger",
    "KitFunction": "fanout_kit.functions",
}

__all__ = [
    "AlarmThresholds",
    "CompletionLedger",
    "ConfigError",
    "DistributedMapFanOut",
    "FanOutTask",
    "KitFunction",
    "LedgerSettings",
    "MapSettings",
    "ParallelFanOut",
    "ResourceSettings",
    "RetrySettings",
    "WorkflowRetries",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in _CONSTRUCTS:
        return getattr(import_module(_CONSTRUCTS[name]), name)
    raise AttributeError(f"module 'fanout_kit' has no attribute {name!r}")

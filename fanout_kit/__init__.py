"""The fan-out kit's constructs, for any CDK app (Python):

    from fanout_kit import ParallelFanOut, DistributedMapFanOut, CompletionLedger, FanOutTask

Props that are plain data (retries, alarm thresholds, map and ledger settings, what every
resource shares) come from ``fanout_kit.shared.settings`` and are re-exported here. Every name is
imported on first use (PEP 562 ``__getattr__``): ``fanout_kit.shared.settings`` can be used without loading
the CDK, and in Lambda, where the kit's handlers import ``fanout_kit.shared.*`` and their pattern's
modules from their code asset, this module loads nothing but ``_version`` (the asset holds only what the handlers import).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from fanout_kit._version import __version__

_LAZY = {
    "AlarmThresholds": "fanout_kit.shared.settings",
    "LedgerSettings": "fanout_kit.shared.settings",
    "MapSettings": "fanout_kit.shared.settings",
    "ResourceSettings": "fanout_kit.shared.settings",
    "WorkflowRetries": "fanout_kit.shared.settings",
    "ConfigError": "fanout_kit.shared.checks",
    "RetrySettings": "fanout_kit.shared.retry_policy",
    "ParallelFanOut": "fanout_kit.patterns.parallel.construct",
    "FanOutTask": "fanout_kit.shared.tasks",
    "DistributedMapFanOut": "fanout_kit.patterns.distributed_map.construct",
    "CompletionLedger": "fanout_kit.patterns.completion_ledger.construct",
    "KitFunction": "fanout_kit.shared.functions",
    "runtime_layer": "fanout_kit.shared.layer",
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
    "runtime_layer",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'fanout_kit' has no attribute {name!r}")

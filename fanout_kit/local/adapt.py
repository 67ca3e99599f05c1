"""The one place where the local run changes a synthesized definition, each change standing in
for an AWS behaviour moto 5.2.5's interpreter cannot parse or run (each seen when run):

* ``ItemBatcher`` fails to parse. AWS groups up to MaxItemsPerBatch selected items into one child
  input ``{"Items": [...], "BatchInput": {...}}``. Locally the ItemBatcher is removed, the
  ItemSelector builds that shape around each item, and the engine's Distributed Map fix
  (``moto_fixes.distributed_map_children``) groups MaxItemsPerBatch of them into one child:
  the child and the worker Lambda see the input they get in AWS, with the configured batch size.
* ``ProcessorConfig.ExecutionType: EXPRESS`` fails to parse: children run as STANDARD locally,
  and the engine holds them to the Express limit (5 minutes, counting recorded retry waits).
  (In AWS, Express children are at-least-once; the worker must be idempotent.)
* An integer ``ToleratedFailurePercentage`` (CDK emits one) fails to parse; ``100.0`` parses.

``adapt_for_moto`` returns the adapted definition and one note per change, which the demo
prints; ``distributed_maps`` tells the engine each Distributed Map's batch size and child type.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DistributedMapRules:
    items_per_batch: int | None  # None: no ItemBatcher (each child gets one item, unwrapped)
    express: bool


def adapt_for_moto(definition: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    asl = copy.deepcopy(definition)
    notes: list[str] = []
    _adapt_states(asl, notes)
    return asl, notes


def distributed_maps(definition: Mapping[str, Any]) -> dict[str, DistributedMapRules]:
    """Map state name -> its batching and child type, from the synthesized (unadapted) definition."""
    found: dict[str, DistributedMapRules] = {}
    for name, state in definition.get("States", {}).items():
        for branch in state.get("Branches", []):
            found.update(distributed_maps(branch))
        processor = state.get("ItemProcessor") or {}
        config = processor.get("ProcessorConfig", {})
        if config.get("Mode") == "DISTRIBUTED":
            batcher = state.get("ItemBatcher")
            found[name] = DistributedMapRules(
                items_per_batch=batcher.get("MaxItemsPerBatch", 1) if batcher else None,
                express=config.get("ExecutionType") == "EXPRESS",
            )
    return found


def _adapt_states(asl: dict[str, Any], notes: list[str]) -> None:
    for name, state in asl.get("States", {}).items():
        for branch in state.get("Branches", []):
            _adapt_states(branch, notes)
        processor = state.get("ItemProcessor")
        if processor:
            _adapt_states(processor, notes)
            config = processor.get("ProcessorConfig", {})
            if config.get("ExecutionType") == "EXPRESS":
                config["ExecutionType"] = "STANDARD"
                notes.append(f"{name}: EXPRESS children run as STANDARD, held to the Express time limit")
        batcher = state.pop("ItemBatcher", None)
        if batcher is not None:
            selected = state.pop("ItemSelector", {"value.$": "$$.Map.Item.Value"})
            state["ItemSelector"] = {"Items": [selected], "BatchInput": batcher.get("BatchInput", {})}
            notes.append(
                f"{name}: ItemBatcher (MaxItemsPerBatch {batcher.get('MaxItemsPerBatch')}) "
                "run by the engine (moto cannot parse it)"
            )
        tolerated = state.get("ToleratedFailurePercentage")
        if isinstance(tolerated, int) and not isinstance(tolerated, bool):
            state["ToleratedFailurePercentage"] = float(tolerated)
            notes.append(f"{name}: ToleratedFailurePercentage {tolerated} written as {float(tolerated)}")

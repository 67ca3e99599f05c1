"""The one place where the local run changes a synthesized definition, each change standing in
for an AWS behaviour moto 5.2.5's interpreter cannot parse or run (each seen when run):

* ``ItemBatcher`` fails to parse. AWS groups up to MaxItemsPerBatch selected items into one child
  input ``{"Items": [...], "BatchInput": {...}}``. Locally every child gets a batch of one: the
  ItemBatcher is removed and the ItemSelector builds that same shape around the one item, so the
  child (and the worker Lambda) sees the input it gets in AWS, with one item.
* ``ProcessorConfig.ExecutionType: EXPRESS`` fails to parse: children run as STANDARD locally.
  (In AWS, Express children are at-least-once; the ledger's per-item marks cover duplicates, and
  tests deliver items twice on purpose to prove it.)
* An integer ``ToleratedFailurePercentage`` (CDK emits one) fails to parse; ``100.0`` parses.

``adapt_for_moto`` returns the adapted definition and one note per change, which the demo prints.
"""

from __future__ import annotations

import copy
from typing import Any


def adapt_for_moto(definition: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    asl = copy.deepcopy(definition)
    notes: list[str] = []
    _adapt_states(asl, notes)
    return asl, notes


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
                notes.append(f"{name}: EXPRESS children run as STANDARD")
        batcher = state.pop("ItemBatcher", None)
        if batcher is not None:
            selected = state.pop("ItemSelector", {"value.$": "$$.Map.Item.Value"})
            state["ItemSelector"] = {"Items": [selected], "BatchInput": batcher.get("BatchInput", {})}
            notes.append(
                f"{name}: ItemBatcher (MaxItemsPerBatch {batcher.get('MaxItemsPerBatch')}) "
                "replaced by batches of one item"
            )
        tolerated = state.get("ToleratedFailurePercentage")
        if isinstance(tolerated, int) and not isinstance(tolerated, bool):
            state["ToleratedFailurePercentage"] = float(tolerated)
            notes.append(f"{name}: ToleratedFailurePercentage {tolerated} written as {float(tolerated)}")

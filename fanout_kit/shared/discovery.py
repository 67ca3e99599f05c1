"""How a tool finds the kit's workflows in any CDK app: each construct records one node metadata
entry, ``fanout-kit:workflow``, with its kind and the values its outputs would carry (the same
names as ``add_outputs()``: StateMachineArn, DeadLetterQueueUrl, ...). CDK resolves metadata
tokens at synth (they become ``Ref`` / ``Fn::GetAtt`` in the cloud assembly's ``manifest.json``),
so the local engine (``fanout_kit/local/app_source.py``) finds the workflow in whatever stack, under
whatever construct id, whether or not the app called ``add_outputs()``.

Metadata goes to the cloud assembly only, not to the CloudFormation template: the templates are
unchanged. This module imports no CDK (the reader imports the constant)."""

from __future__ import annotations

from typing import Any

WORKFLOW_METADATA = "fanout-kit:workflow"
KINDS = ("parallel", "map", "ledger")


def record_workflow(construct: Any, kind: str, outputs: dict[str, Any]) -> None:
    """Record ``{"kind", "outputs"}`` on ``construct`` (call it once its resources exist; the
    values are tokens CDK resolves at synth; None values are left out)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    data = {"kind": kind, "outputs": {k: v for k, v in outputs.items() if v is not None}}
    construct.node.add_metadata(WORKFLOW_METADATA, data)

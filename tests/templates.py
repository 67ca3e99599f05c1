"""Helpers for reading synthesized templates in tests."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from fanout_kit.local.template import resources_of_type, state_machine_definitions

ASSET_KEY = re.compile(r"^[0-9a-f]{64}(\.zip|\.json)?$")


def normalized(template: dict[str, Any]) -> dict[str, Any]:
    """The template with content hashes replaced, for snapshots.

    Lambda code is uploaded as an asset whose S3 key is the SHA-256 of the lambdas/ folder, so
    any handler edit would
    churn every function's snapshot line. The hash is replaced by a placeholder; the handler
    code itself is covered by its own tests, and everything else in the template stays exact.
    """
    out = copy.deepcopy(template)

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, str) and ASSET_KEY.match(node):
            return ASSET_KEY.sub(r"<asset-hash>\1", node)
        return node

    return walk(out)


def policy_statements(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """IAM policy logical id -> its statements."""
    return {
        lid: res["Properties"]["PolicyDocument"]["Statement"]
        for lid, res in resources_of_type(template, "AWS::IAM::Policy").items()
    }


def role_statements(template: dict[str, Any], role_lid: str) -> list[dict[str, Any]]:
    """All statements of the policies attached to one role."""
    out = []
    for res in resources_of_type(template, "AWS::IAM::Policy").values():
        roles = res["Properties"].get("Roles", [])
        if {"Ref": role_lid} in roles:
            out.extend(res["Properties"]["PolicyDocument"]["Statement"])
    return out


def only_definition(template: dict[str, Any], region: str = "eu-west-1") -> dict[str, Any]:
    (definition,) = state_machine_definitions(template, region).values()
    return definition


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)

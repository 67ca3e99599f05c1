"""IAM policy evaluation for the kit's own policies (pure; no AWS).

Implements AWS's documented evaluation logic for one request against policy documents
(https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html), for the
policy elements the kit's templates use: an explicit Deny in any statement wins; otherwise an Allow
is needed; a statement applies when its Principal (resource policies), Action / NotAction,
Resource / NotResource and every Condition match. Actions match case-insensitively, ARNs
case-sensitively, both with the ``*`` and ``?`` wildcards. A condition operator this module does not
know raises ``UnsupportedPolicy`` (fail closed, never a silent allow).

Why not moto's evaluator (``moto.iam.access_control.IAMPolicyStatement``, 5.2.5): it treats an
Allow statement whose Condition does not match as an explicit Deny, matches actions
case-sensitively, turns patterns into unescaped regular expressions (``.`` and ``?`` misread) and
has no NotResource. No maintained Python library evaluates requests against policies
(cloudsplaining and parliament lint policies); the maintained simulator ``@cloud-copilot/iam-simulate``
is Node-only (a subprocess per request and a new npm dependency). The subset here is small and
tested (tests/test_iam.py).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class UnsupportedPolicy(ValueError):
    """The policy uses an element this evaluator does not implement."""


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def wildcard_match(pattern: str, value: str, *, case_sensitive: bool = True) -> bool:
    """IAM's ``*`` (any run of characters) and ``?`` (one character); nothing else is special."""
    if not case_sensitive:
        pattern, value = pattern.lower(), value.lower()
    translated = "".join("[[]" if c == "[" else c for c in pattern)  # fnmatch's only other metachar
    return fnmatch.fnmatchcase(value, translated)


def _string_equals(want: list[str], got: str) -> bool:
    return got in want


def _string_like(want: list[str], got: str) -> bool:
    return any(wildcard_match(w, got) for w in want)


def _bool(want: list[str], got: str) -> bool:
    return str(got).lower() in [str(w).lower() for w in want]


CONDITION_OPERATORS = {
    "StringEquals": _string_equals,
    "StringLike": _string_like,
    "ArnEquals": _string_equals,
    "ArnLike": _string_like,
    "Bool": _bool,
}


@dataclass(frozen=True)
class Request:
    action: str  # "dynamodb:GetItem"
    resource: str  # an ARN, or "*" for actions without resource-level permissions
    principal_service: str | None = None  # resource policies: "cloudwatch.amazonaws.com"
    context: Mapping[str, str] | None = None  # condition keys


def _principal_matches(statement: Mapping[str, Any], request: Request) -> bool:
    if "Principal" not in statement:
        return True  # identity policy
    principal = statement["Principal"]
    if principal == "*":
        return True
    if request.principal_service is None:
        return False
    return request.principal_service in as_list(principal.get("Service", []))


def _conditions_match(statement: Mapping[str, Any], request: Request) -> bool:
    context = request.context or {}
    for operator, keys in statement.get("Condition", {}).items():
        check = CONDITION_OPERATORS.get(operator)
        if check is None:
            raise UnsupportedPolicy(f"condition operator {operator} is not implemented")
        for key, want in keys.items():
            if key not in context or not check(as_list(want), context[key]):
                return False
    return True


def statement_applies(statement: Mapping[str, Any], request: Request) -> bool:
    for element in ("NotPrincipal",):
        if element in statement:
            raise UnsupportedPolicy(f"{element} is not implemented")
    if not _principal_matches(statement, request):
        return False
    if "Action" in statement:
        if not any(wildcard_match(a, request.action, case_sensitive=False) for a in as_list(statement["Action"])):
            return False
    elif any(wildcard_match(a, request.action, case_sensitive=False) for a in as_list(statement["NotAction"])):
        return False
    if "Resource" in statement:
        if not any(wildcard_match(r, request.resource) for r in as_list(statement["Resource"])):
            return False
    elif "NotResource" in statement:
        if any(wildcard_match(r, request.resource) for r in as_list(statement["NotResource"])):
            return False
    return _conditions_match(statement, request)


def evaluate(documents: Iterable[Mapping[str, Any]], request: Request) -> str:
    """``"Allow"``, ``"ExplicitDeny"`` or ``"ImplicitDeny"`` for one request against the policy
    documents that apply to it (all identity policies of a role, or one resource policy)."""
    allowed = False
    for document in documents:
        for statement in as_list(document.get("Statement", [])):
            if statement_applies(statement, request):
                if statement["Effect"] == "Deny":
                    return "ExplicitDeny"
                allowed = True
    return "Allow" if allowed else "ImplicitDeny"

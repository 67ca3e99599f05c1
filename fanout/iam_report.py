"""``fanout iam-report``: run the kit's scenarios locally with every AWS call recorded, evaluate each
against the synthesized policies of the role that makes it, and list the grants no call used.

Per role: the calls seen (IAM action and resource), allowed or denied; then the grants never used,
each with the reason from ``fanout/local/iam_expected.py`` or UNEXPLAINED. The last line is
``iam: <N> calls, <D> denied, <U> unused grants``. Exit code 1 if any call was denied or any unused
grant is unexplained, else 0.
"""

from __future__ import annotations

import copy
import io
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from fanout.handler_logs import quiet_handler_logs

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "batch.json"


@dataclass
class RoleSummary:
    stack: str
    label: str
    calls: Counter = field(default_factory=Counter)  # (action, resource, decision) -> count
    unused: list[tuple[str, str, str | None]] = field(default_factory=list)  # (action, resource, reason)


@dataclass
class Summary:
    roles: dict[tuple[str, str], RoleSummary] = field(default_factory=dict)
    calls: int = 0
    denied: list[str] = field(default_factory=list)
    scenarios: list[str] = field(default_factory=list)

    @property
    def unused(self) -> int:
        return sum(len(r.unused) for r in self.roles.values())

    @property
    def unexplained(self) -> list[str]:
        return [
            f"{r.stack}/{r.label}: {a} on {res}" for r in self.roles.values() for a, res, why in r.unused if why is None
        ]


def _short(resource: str) -> str:
    from fanout.local.template import LOCAL_ACCOUNT

    return resource.replace(f":{LOCAL_ACCOUNT}:", "::")


def merge(summary: Summary, reports: list[Any]) -> None:
    """Add engine reports (one per stack run); a grant is unused only if no run used it."""
    from fanout.local.iam_expected import reason_for

    unused_by_role: dict[tuple[str, str], list[set[tuple[str, str]]]] = {}
    for report in reports:
        summary.calls += report.calls
        for principal in report.principals:
            key = (principal.stack, principal.label)
            role = summary.roles.setdefault(key, RoleSummary(*key))
            for call, permission, decision in principal.calls:
                action = permission.action if permission else f"{call.service}:{call.operation}"
                resource = _short(permission.resource) if permission else "?"
                role.calls[(action, resource, decision)] += 1
                if decision != "Allow":
                    summary.denied.append(f"{principal.stack}/{principal.label}: {action} on {resource}: {decision}")
        for call in report.unattributed:
            summary.denied.append(f"unattributed {call.caller_kind} call {call.service}:{call.operation}")
        per_role: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for grant in report.unused:
            per_role.setdefault((grant.stack, grant.label), set()).add((grant.action, grant.resource))
        for principal in report.principals:
            key = (principal.stack, principal.label)
            unused_by_role.setdefault(key, []).append(per_role.get(key, set()))
    for key, sets in unused_by_role.items():
        never = set.intersection(*sets) if sets else set()
        summary.roles[key].unused = sorted(
            (action, _short(resource), reason_for(key[0], key[1], action, resource)) for action, resource in never
        )


# ----------------------------------------------------------------- scenarios
def _example(batch_id: str, **faults: dict) -> dict[str, Any]:
    data = json.loads(EXAMPLE.read_text())
    data["batchId"] = batch_id
    for task, switch in faults.items():
        data["tasks"][task]["simulateFailure"] = switch
    return data


def parallel_scenarios(engine: Any) -> list[str]:
    done = []
    engine.run("parallel", _example("iam-happy"))
    engine.run("parallel", _example("iam-happy"))
    done.append("parallel: a batch succeeds, then is started again (ALREADY_FINALIZED)")
    failed = engine.run("parallel", _example("iam-failed", ChargePayment={"mode": "fatal"}))
    engine.run("parallel", _example("iam-failed"))
    done.append("parallel: a task is dead-lettered (batch FAILED); a plain restart is refused")
    engine.run("parallel", {"batchId": "iam-failed", "tasks": {"ChargePayment": {"amountCents": 4598}},
                            "redriveOf": failed.arn})
    done.append("parallel: the redrive of the failed task finalizes the batch")
    cfg_attempts = _status_write_attempts(engine)
    engine.inject_lambda_service_faults("UpdateFinalStatus", ["ServiceException"] * cfg_attempts)
    engine.run("parallel", _example("iam-finalize-down"))
    done.append("parallel: UpdateFinalStatus exhausts its retries (the failure guard records it)")
    return done


def _status_write_attempts(engine: Any) -> int:
    (workflow,) = engine.workflows
    return engine.deployment(workflow).env.status_write_retry.max_attempts + 1


def map_scenarios(engine: Any) -> list[str]:
    items = [{"imageId": f"img-{i}", "width": i} for i in range(5)]
    engine.run("map", {"batchId": "iam-map-ok", "items": items})
    engine.run("map", {"batchId": "iam-map-ok", "items": items})
    failing = copy.deepcopy(items)
    failing[2]["simulateFailure"] = {"mode": "fatal"}
    engine.run("map", {"batchId": "iam-map-failed", "items": failing})
    manifest = engine.upload_manifest("manifests/iam.csv", b"imageId,width\na,1\nb,2\n")
    engine.run("map", {"batchId": "iam-map-csv", "manifest": manifest})
    engine.inject_lambda_service_faults("UpdateFinalStatus", ["ServiceException"] * _status_write_attempts(engine),
                                        workflow="map")
    engine.run("map", {"batchId": "iam-map-finalize-down", "items": items})
    return [
        "map: UpdateFinalStatus exhausts its retries (the failure guard records it)",
        "map: inline items succeed, then the batch is started again",
        "map: one item is dead-lettered (batch FAILED)",
        "map: an uploaded CSV manifest",
    ]


def collect(env_name: str = "dev", *, app: Any = None, include_ledger: bool = True) -> Summary:
    """Run every scenario with calls recorded; return the merged summary."""
    from fanout.local.engine import LocalEngine
    from fanout.local.template import synthesize

    quiet_handler_logs("ERROR")
    app = app or synthesize(env_name)
    summary = Summary()
    reports = []
    runs: list[tuple[str, Callable[[Any], list[str]]]] = [("parallel", parallel_scenarios), ("map", map_scenarios)]
    for workflow, scenarios in runs:
        with LocalEngine(app, workflows=(workflow,), sleep_retries=False) as engine:
            summary.scenarios += scenarios(engine)
            reports.append(engine.iam_report())
    if include_ledger:
        from rich.console import Console

        from fanout import ledger_demo

        for batch_id, fail in (("iam-ledger-ok", []), ("iam-ledger-failed", [3])):
            ledger_demo.run_ledger_demo(
                app, children=6, fail=fail, concurrency=2, duplicate=True,
                console=Console(file=io.StringIO()), batch_id=batch_id,
                on_engine=lambda engine: reports.append(engine.iam_report()),
            )
        summary.scenarios.append("ledger: six children over SQS, all succeed, duplicates delivered")
        summary.scenarios.append("ledger: six children over SQS, one dead-lettered")
    merge(summary, reports)
    return summary


def render(summary: Summary, out: TextIO) -> None:
    print("scenarios (local engine, every AWS call recorded):", file=out)
    for s in summary.scenarios:
        print(f"  - {s}", file=out)
    for (stack, label), role in sorted(summary.roles.items()):
        print(f"\n{stack} / {label}", file=out)
        if not role.calls:
            print("  calls: none", file=out)
        for (action, resource, decision), count in sorted(role.calls.items()):
            verdict = "allowed" if decision == "Allow" else f"DENIED ({decision})"
            print(f"  call  {action:<28} {resource}  x{count}  {verdict}", file=out)
        for action, resource, reason in role.unused:
            print(f"  unused {action:<27} {resource}  -- {reason or 'UNEXPLAINED: remove it or list it in fanout/local/iam_expected.py'}", file=out)
    print(f"\niam: {summary.calls} calls, {len(summary.denied)} denied, {summary.unused} unused grants", file=out)


def main(args: Any) -> int:
    import sys

    from stacks.config import ConfigError, load_environment, read_cdk_context

    try:
        load_environment(read_cdk_context(), args.env)
    except ConfigError as exc:
        print(f"fanout iam-report: --env: {exc}", file=sys.stderr)
        return 2
    summary = collect(args.env, include_ledger=not args.no_ledger)
    render(summary, sys.stdout)
    if summary.denied or summary.unexplained:
        for line in summary.denied:
            print(f"denied: {line}", file=sys.stderr)
        for line in summary.unexplained:
            print(f"unexplained unused grant: {line}", file=sys.stderr)
        return 1
    return 0

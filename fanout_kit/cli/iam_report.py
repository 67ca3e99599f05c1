"""``fanout iam-report``: run the kit's scenarios locally with every AWS call recorded, evaluate each
against the synthesized policies of the role that makes it, and list the grants no call used.

Per role: the calls seen (IAM action and resource), allowed or denied; then the grants never used,
each with the reason from ``fanout_kit/local/iam_expected.py`` or UNEXPLAINED. The last line is
``iam: <N> calls, <D> denied, <U> unused grants``. Exit code 1 if any call was denied or any unused
grant is unexplained, else 0.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from fanout_kit.cli.handler_logs import quiet_handler_logs

ROOT = Path(__file__).resolve().parents[2]
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
    from fanout_kit.local.template import LOCAL_ACCOUNT

    return resource.replace(f":{LOCAL_ACCOUNT}:", "::")


# A function of the user's app (not created by the kit's constructs) runs sandboxed locally, with no
# AWS stand-in to call (fanout_kit/local/sandbox.py): its own grants cannot be exercised here.
APP_FUNCTION_REASON = ("your own function: its AWS calls are not run locally (the sandbox has no AWS "
                       "stand-ins), so this grant is not evaluated")


def merge(summary: Summary, reports: list[Any], kit_scope: frozenset[str] | None = None) -> None:
    """Add engine reports (one per stack run); a grant is unused only if no run used it.

    ``kit_scope``: with ``--app``, the logical ids under the kit's constructs; a role outside it is
    the app's own function (its unused grants carry APP_FUNCTION_REASON)."""
    from fanout_kit.local.iam_expected import reason_for

    app_roles = {
        (p.stack, p.label) for report in reports for p in report.principals
        if kit_scope is not None and p.logical_id not in kit_scope
    }

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
            (action, _short(resource),
             APP_FUNCTION_REASON if key in app_roles else reason_for(key[0], key[1], action, resource))
            for action, resource in never
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
    deployment = engine.deployment(workflow).env
    if deployment is not None:
        return deployment.status_write_retry.max_attempts + 1
    # another app (--app): the attempts its definitions allow UpdateFinalStatus (every Retry rule)
    from fanout_kit.shared.asl_graph import all_states

    attempts = 1
    for arn in engine.stacks[workflow].state_machines.values():
        definition = json.loads(engine.sfn.describe_state_machine(stateMachineArn=arn)["definition"])
        state = all_states(definition).get("UpdateFinalStatus") or {}
        attempts = max(attempts, 1 + sum(rule.get("MaxAttempts", 3) for rule in state.get("Retry", [])))
    return attempts


def map_scenarios(engine: Any) -> list[str]:
    items = [{"imageId": f"img-{i}", "width": i} for i in range(5)]
    engine.run("map", {"batchId": "iam-map-ok", "items": items})
    engine.run("map", {"batchId": "iam-map-ok", "items": items})
    failing = copy.deepcopy(items)
    failing[2]["simulateFailure"] = {"mode": "permanent"}  # reported per item: RetryFailedItems retries it
    engine.run("map", {"batchId": "iam-map-failed", "items": failing})
    crashing = copy.deepcopy(items)
    crashing[1]["simulateFailure"] = {"mode": "crash"}  # the whole batch: the child's own DLQ step
    engine.run("map", {"batchId": "iam-map-crashed", "items": crashing})
    manifest = engine.upload_manifest("manifests/iam.csv", b"imageId,width\na,1\nb,2\n")
    engine.run("map", {"batchId": "iam-map-csv", "manifest": manifest})
    engine.inject_lambda_service_faults("UpdateFinalStatus", ["ServiceException"] * _status_write_attempts(engine),
                                        workflow="map")
    engine.run("map", {"batchId": "iam-map-finalize-down", "items": items})
    return [
        "map: UpdateFinalStatus exhausts its retries (the failure guard records it)",
        "map: inline items succeed, then the batch is started again",
        "map: one item fails permanently, is retried alone and dead-lettered (batch FAILED)",
        "map: a worker crashes, its whole batch is dead-lettered",
        "map: an uploaded CSV manifest",
    ]


def _must_succeed(result: Any, workflow: str, example: dict[str, Any] | None) -> None:
    """The scenarios need a batch that succeeds: with payloads your functions refuse, the success
    path (UpdateFinalStatus and its grants) would never run and the report would mislead."""
    from fanout_kit.shared.errors import CliError

    if result.status != "SUCCEEDED":
        given = "the --input batch" if example else "a batch with empty payloads"
        shape = '"tasks": {TASK: payload}' if workflow == "parallel" else '"items": [...]'
        raise CliError(f"--input: {given} did not succeed on your {workflow} workflow ({result.error}: "
                       f"{(result.cause or '')[:160]}); pass --input FILE, a batch input ({shape}) your functions accept",
                       code=2)


def _app_parallel_scenarios(engine: Any, example: dict[str, Any] | None) -> list[str]:
    """The Parallel scenarios on another app: its own tasks, faults injected by the engine."""
    from fanout_kit.local.moto_lambda import InjectedFault

    names = [n for n in engine.stacks["parallel"].environment.get("TASK_NAMES", "").split(",") if n]
    tasks = dict((example or {}).get("tasks") or {name: {} for name in names})

    def batch(batch_id: str, **extra: Any) -> dict[str, Any]:
        return {**(example or {}), "batchId": batch_id, "tasks": tasks, **extra}

    _must_succeed(engine.run("parallel", batch("iam-happy")), "parallel", example)
    engine.run("parallel", batch("iam-happy"))
    first = next(iter(tasks))
    engine.router.task_faults[first] = InjectedFault("permanent")
    failed = engine.run("parallel", batch("iam-failed"))
    engine.router.task_faults.clear()
    engine.run("parallel", batch("iam-failed"))
    engine.run("parallel", batch("iam-failed", tasks={first: tasks[first]}, redriveOf=failed.arn))
    engine.inject_lambda_service_faults("UpdateFinalStatus", ["ServiceException"] * _status_write_attempts(engine))
    engine.run("parallel", batch("iam-finalize-down"))
    return [
        "parallel: a batch succeeds, then is started again (ALREADY_FINALIZED)",
        f"parallel: {first} fails permanently (injected), is dead-lettered; a plain restart is refused",
        f"parallel: the redrive of {first} finalizes the batch",
        "parallel: UpdateFinalStatus exhausts its retries (the failure guard records it)",
    ]


def _app_map_scenarios(engine: Any, example: dict[str, Any] | None) -> list[str]:
    """The Map scenarios on another app: its own worker, item faults injected by the engine."""
    from fanout_kit.local.moto_lambda import InjectedFault

    items = list((example or {}).get("items") or [{"id": f"item-{i}"} for i in range(5)])
    _must_succeed(engine.run("map", {"batchId": "iam-map-ok", "items": items}), "map", example)
    engine.run("map", {"batchId": "iam-map-ok", "items": items})
    engine.router.item_faults[min(2, len(items) - 1)] = InjectedFault("permanent")  # per item: retried alone
    engine.run("map", {"batchId": "iam-map-failed", "items": items})
    engine.router.item_faults.clear()
    engine.router.item_faults[min(1, len(items) - 1)] = InjectedFault("crash")  # the whole batch
    engine.run("map", {"batchId": "iam-map-crashed", "items": items})
    engine.router.item_faults.clear()
    manifest = engine.upload_manifest("manifests/iam.json", json.dumps(items).encode())
    engine.run("map", {"batchId": "iam-map-manifest", "manifest": manifest})
    engine.inject_lambda_service_faults("UpdateFinalStatus", ["ServiceException"] * _status_write_attempts(engine),
                                        workflow="map")
    engine.run("map", {"batchId": "iam-map-finalize-down", "items": items})
    return [
        "map: inline items succeed, then the batch is started again",
        "map: one item fails permanently (injected), is retried alone and dead-lettered (batch FAILED)",
        "map: the worker crashes (injected), its whole batch is dead-lettered",
        "map: an uploaded JSON manifest",
        "map: UpdateFinalStatus exhausts its retries (the failure guard records it)",
    ]


def _ledger_scenarios(app: Any, reports: list[Any], keep: Callable[[str], bool] | None = None) -> list[str]:
    from fanout_kit.local.ledger_run import run_ledger_batch

    for batch_id, fail in (("iam-ledger-ok", []), ("iam-ledger-failed", [3])):
        run_ledger_batch(
            app, children=6, fail=fail, concurrency=2, duplicate=True, batch_id=batch_id,
            on_engine=lambda engine: reports.append(engine.iam_report(keep)),
        )
    return ["ledger: six children over SQS, all succeed, duplicates delivered",
            "ledger: six children over SQS, one dead-lettered"]


def collect_app(path: str, *, stack: str | None = None, example: dict[str, Any] | None = None,
                include_ledger: bool = True) -> Summary:
    """``--app PATH``: the scenarios on every workflow of the kit in one stack of another app."""
    from fanout_kit.local.app_source import load_workflows
    from fanout_kit.local.engine import LocalEngine

    quiet_handler_logs("ERROR")
    summary = Summary()
    reports: list[Any] = []
    workflows = load_workflows(path, stack=stack)
    scope = frozenset().union(*(found.logical_ids for _, found in workflows))
    for app, found in workflows:
        # An engine sees the whole stack: keep the roles of this construct and the app's own
        # functions; another construct's roles are judged by its own scenarios.
        def keep(lid: str, own: frozenset[str] = found.logical_ids) -> bool:
            return lid in own or lid not in scope

        if found.kind == "ledger":
            if include_ledger:
                summary.scenarios += [f"{found.path}: {s}" for s in _ledger_scenarios(app, reports, keep)]
            continue
        scenarios = _app_parallel_scenarios if found.kind == "parallel" else _app_map_scenarios
        fits = example if example and ("tasks" if found.kind == "parallel" else "items") in example else None
        with LocalEngine(app, workflows=(found.kind,), sleep_retries=False) as engine:
            summary.scenarios += [f"{found.path}: {s}" for s in scenarios(engine, fits)]
            reports.append(engine.iam_report(keep))
    merge(summary, reports, kit_scope=scope)
    return summary


def collect(env_name: str = "dev", *, app: Any = None, include_ledger: bool = True) -> Summary:
    """Run every scenario with calls recorded; return the merged summary."""
    from fanout_kit.local.engine import LocalEngine
    from fanout_kit.local.template import synthesize

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
        summary.scenarios += _ledger_scenarios(app, reports)
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
            print(f"  unused {action:<27} {resource}  -- {reason or 'UNEXPLAINED: remove it or list it in fanout_kit/local/iam_expected.py'}", file=out)
    print(f"\niam: {summary.calls} calls, {len(summary.denied)} denied, {summary.unused} unused grants", file=out)


def _read_example(path: str | None) -> dict[str, Any] | None:
    from fanout_kit.shared.errors import CliError

    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CliError(f"--input {path}: cannot read it ({exc.strerror or exc})", code=2) from None
    except json.JSONDecodeError as exc:
        raise CliError(f"--input {path}: not valid JSON: {exc.msg} (line {exc.lineno})", code=2) from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks") or data.get("items"), dict | list):
        raise CliError(f'--input {path}: expected a batch input with "tasks" (Parallel) or "items" (Map)', code=2)
    return data


def main(args: Any) -> int:
    import sys

    if getattr(args, "app", None):
        summary = collect_app(args.app, stack=args.stack, example=_read_example(args.input),
                              include_ledger=not args.no_ledger)
    else:
        if getattr(args, "stack", None) or getattr(args, "input", None):
            flag = "--stack NAME" if args.stack else "--input FILE"
            print(f"fanout iam-report: {flag} goes with --app PATH (this repository's app: --env)", file=sys.stderr)
            return 2
        from fanout_kit.shared.app_config import ConfigError, load_environment, read_cdk_context

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

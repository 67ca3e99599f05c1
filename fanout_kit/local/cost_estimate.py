"""``fanout estimate``: a batch's usage read from the synthesized template of its workflow, priced
by ``fanout_kit.shared.cost`` (the pure pricing part: ``Usage``, ``price_lines``, ``Assumptions``).

It reads templates (the ASL through ``fanout_kit.local.template``), so it lives above the
constructs' layers; ``fanout_kit.shared.cost`` documents the success-path convention it follows.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from fanout_kit.shared import pricing
from fanout_kit.shared.cost import (  # noqa: F401  (the names this module's callers import from it too)
    EXPRESS_DURATION_STEP_S,
    EXPRESS_MEMORY_CHUNK_GB,
    GB,
    LAMBDA_DURATION_STEP_S,
    SQS_BATCH_MAX,
    Assumptions,
    Line,
    Usage,
    price_lines,
    total_usd,
)


# ------------------------------------------------------------------------------ template reading
@dataclass(frozen=True)
class Function:
    logical_id: str
    memory_mb: int
    timeout_s: int
    architecture: str
    handler: str

    @property
    def gb(self) -> float:
        return self.memory_mb / 1024


def functions_of(template: Mapping[str, Any]) -> dict[str, Function]:
    out = {}
    for lid, res in template.get("Resources", {}).items():
        if res.get("Type") != "AWS::Lambda::Function":
            continue
        props = res.get("Properties", {})
        out[lid] = Function(
            lid,
            int(props.get("MemorySize", 128)),  # CloudFormation's defaults
            int(props.get("Timeout", 3)),
            (props.get("Architectures") or ["x86_64"])[0],
            str(props.get("Handler", "")),
        )
    return out


def success_path(states: Mapping[str, Any], start: str) -> list[tuple[str, dict[str, Any]]]:
    """The states an execution enters when everything succeeds: the kit's one rule for it,
    ``fanout_kit.shared.asl_graph.happy_path`` (Next, and a Choice's first rule)."""
    from fanout_kit.shared.asl_graph import happy_path

    return [(name, states[name]) for name in happy_path({"States": states, "StartAt": start})]


def _function_of(state: Mapping[str, Any], functions: Mapping[str, Function]) -> Function | None:
    target = (state.get("Parameters") or {}).get("FunctionName") or ""
    name = str(target).rsplit(":function:", 1)[-1].split(":")[0]
    return functions.get(name)


def _retrier(state: Mapping[str, Any], error: str) -> dict[str, Any] | None:
    for rule in state.get("Retry") or []:
        if error in rule.get("ErrorEquals", []) or "States.ALL" in rule.get("ErrorEquals", []):
            return rule
    return None


def retry_attempts_and_wait(state: Mapping[str, Any], error: str = "RetryableTaskError") -> tuple[int, float]:
    """(attempts, expected seconds waited between them) of a Task that fails with ``error`` every
    time: 1 + MaxAttempts (default 3), waits min(Interval * Backoff^k, MaxDelay), halved on average
    under JitterStrategy FULL (a uniform draw from 0 to the ceiling)."""
    rule = _retrier(state, error)
    if rule is None:
        return 1, 0.0
    retries = int(rule.get("MaxAttempts", 3))
    interval, backoff = float(rule.get("IntervalSeconds", 1)), float(rule.get("BackoffRate", 2.0))
    ceiling = float(rule.get("MaxDelaySeconds", math.inf))
    jitter = 0.5 if rule.get("JitterStrategy") == "FULL" else 1.0
    wait = sum(min(interval * backoff**k, ceiling) * jitter for k in range(retries))
    return 1 + retries, wait


# Calls the kit's own handlers make besides their invocation (per invocation, success path),
# checked against a local run by tests/test_cost.py (the measured counts).
HANDLER_USAGE: dict[str, Usage] = {
    "update_final_status.handler": Usage(dynamodb_write_units=1.0),
    "prepare_map_batch.handler": Usage(s3_get_requests=1.0),
}


def _task_usage(state: Mapping[str, Any], functions: Mapping[str, Function], a: Assumptions,
                work_seconds: float = 0.0) -> tuple[Usage, float]:
    """One Task state's usage besides its transition, and its duration in seconds."""
    usage = Usage()
    resource = str(state.get("Resource", ""))
    params = state.get("Parameters") or {}
    if resource.startswith("arn:aws:states:::lambda:invoke"):
        fn = _function_of(state, functions)
        seconds = a.invoke_overhead_seconds + work_seconds
        if fn is not None:
            billed = math.ceil(round(seconds / LAMBDA_DURATION_STEP_S, 6)) * LAMBDA_DURATION_STEP_S
            usage.add_lambda(fn.architecture, billed * fn.gb)
            usage = usage + HANDLER_USAGE.get(fn.handler, Usage())
        else:
            usage.lambda_requests += 1
        usage.log_bytes += a.log_bytes_per_invocation
        return usage, seconds
    if resource.startswith("arn:aws:states:::dynamodb:getItem"):
        # a strongly consistent read of an item up to 4 KB: 1 read unit; eventually consistent: 0.5
        usage.dynamodb_read_units += 1.0 if params.get("ConsistentRead") else 0.5
    elif resource.startswith(("arn:aws:states:::dynamodb:updateItem", "arn:aws:states:::dynamodb:putItem")):
        usage.dynamodb_write_units += 1.0  # an item up to 1 KB
    elif resource.startswith("arn:aws:states:::sqs:sendMessage"):
        usage.sqs_requests += 1.0
    # aws-sdk:sfn:describeMapRun and other control-plane reads: no charge
    return usage, a.state_overhead_seconds


def _events(state: Mapping[str, Any]) -> int:
    """Log events a state writes at Level ALL: Entered/Exited, and for a Task scheduled, started
    and succeeded."""
    return 5 if state["Type"] == "Task" else 2


# --------------------------------------------------------------------------------------- estimate
@dataclass
class Estimate:
    workflow: str
    items: int
    usage: Usage
    facts: list[str] = field(default_factory=list)  # what was read from the template
    assumptions: Assumptions = field(default_factory=Assumptions)
    shape: dict[str, Any] = field(default_factory=dict)  # the settings read (items_per_batch, ...)

    @property
    def lines(self) -> list[Line]:
        return price_lines(self.usage)

    @property
    def total_usd(self) -> float:
        return total_usd(self.usage)

    def to_json(self) -> dict[str, Any]:
        a = self.assumptions
        return {
            "workflow": self.workflow,
            "items": self.items,
            "region": pricing.REGION,
            "pricesChecked": pricing.CHECKED,
            "components": {
                line.component: {"label": line.label, "quantity": line.quantity,
                                 "unitUsd": line.unit_usd, "usd": round(line.usd, 6)}
                for line in self.lines
            },
            "total_usd": round(self.total_usd, 6),
            "facts": self.facts,
            "assumptions": {f.name: getattr(a, f.name) for f in fields(a)},
        }


def _definition(template: Mapping[str, Any], region: str) -> dict[str, Any]:
    from fanout_kit.local.template import state_machine_definitions

    definitions = state_machine_definitions(template, region)
    if len(definitions) != 1:
        raise ValueError(f"expected one state machine in the template, found {len(definitions)}")
    return next(iter(definitions.values()))


def _logging(template: Mapping[str, Any]) -> tuple[bool, bool, bool]:
    """(logs at Level ALL, with execution data, traced) of the template's state machine."""
    for res in template.get("Resources", {}).values():
        if res.get("Type") == "AWS::StepFunctions::StateMachine":
            props = res.get("Properties", {})
            log = props.get("LoggingConfiguration") or {}
            traced = bool((props.get("TracingConfiguration") or {}).get("Enabled"))
            return log.get("Level") == "ALL", bool(log.get("IncludeExecutionData")), traced
    return False, False, False


@dataclass(frozen=True)
class Execution:
    """A state machine's success path priced once, for ``walk``."""

    usage: Usage
    seconds: float
    events: int


def walk(states: Mapping[str, Any], start: str, functions: Mapping[str, Function], a: Assumptions,
         *, standard: bool, work_seconds: float = 0.0, on_map=None, on_task=None) -> Execution:
    """Price a success path: one transition per state (Standard), each Task's calls, Parallel
    branches walked in turn (they run side by side: the slowest sets the duration); a Map state is
    handed to ``on_map`` and a Task with a Lambda worker to ``on_task`` (failure modelling)."""
    usage, seconds, events = Usage(), 0.0, 0
    for _name, state in success_path(states, start):
        if standard:
            usage.transitions += 1
        events += _events(state)
        kind = state["Type"]
        if kind == "Task":
            task_usage, task_seconds = _task_usage(state, functions, a, work_seconds)
            if on_task is not None:
                task_usage, task_seconds, extra_events = on_task(state, task_usage, task_seconds)
                events += extra_events
            usage, seconds = usage + task_usage, seconds + task_seconds
        elif kind == "Parallel":
            slowest = 0.0
            for branch in state["Branches"]:
                run = walk(branch["States"], branch["StartAt"], functions, a, standard=standard,
                           work_seconds=work_seconds, on_map=on_map, on_task=on_task)
                usage, events, slowest = usage + run.usage, events + run.events, max(slowest, run.seconds)
            seconds += slowest
        elif kind == "Map" and on_map is not None:
            usage = usage + on_map(state)
        else:
            seconds += a.state_overhead_seconds
    return Execution(usage, seconds, events)


def _failed_task(p_fail: float, functions: Mapping[str, Function], a: Assumptions, work_seconds: float,
                 *, standard: bool):
    """on_task for a Task that fails (probability ``p_fail``) on every attempt: its retries (extra
    invocations, transitions in Standard, waits in Express) and the dead-letter send."""

    def on_task(state, usage: Usage, seconds: float):
        fn = _function_of(state, functions)
        if fn is None or p_fail <= 0 or not state.get("Catch"):
            return usage, seconds, 0
        attempts, wait = retry_attempts_and_wait(state)
        extra = Usage()
        billed = math.ceil(round((a.invoke_overhead_seconds + work_seconds) / LAMBDA_DURATION_STEP_S, 6))
        extra.add_lambda(fn.architecture, (attempts - 1) * billed * LAMBDA_DURATION_STEP_S * fn.gb,
                         requests=attempts - 1)
        extra.log_bytes += (attempts - 1) * a.log_bytes_per_invocation
        if standard:
            extra.transitions += attempts - 1  # "each retry will be charged as an additional state transition"
        # the Catch: the dead-letter Task (an SQS send) and the state after it
        extra.sqs_requests += 1
        extra.transitions += 2 if standard else 0
        extra_seconds = (attempts - 1) * (a.invoke_overhead_seconds + work_seconds) + wait
        return usage + p_fail * extra, seconds + p_fail * extra_seconds, round(p_fail * (attempts - 1) * 3 + 4 * p_fail)

    return on_task


def estimate(template: Mapping[str, Any], workflow: str, items: int, region: str,
             a: Assumptions | None = None, *, map_changes: Mapping[str, Any] | None = None) -> Estimate:
    """The usage of one batch of ``items`` items (Parallel: task runs) from the synthesized
    ``template`` of ``workflow``; ``map_changes`` (the cost table's alternatives) edits its Map states."""
    a = a or Assumptions()
    if workflow == "ledger":
        return _estimate_ledger(template, items, a)
    functions = functions_of(template)
    definition = _definition(template, region)
    if map_changes:
        _edit_maps(definition["States"], map_changes)
    level_all, with_data, traced = _logging(template)
    event_bytes = a.log_bytes_per_event * (2 if with_data else 1)
    facts: list[str] = []

    if workflow == "parallel":
        branches = _parallel_branches(definition)
        executions = math.ceil(items / max(branches, 1))
        run = walk(definition["States"], definition["StartAt"], functions, a, standard=True,
                   work_seconds=a.work_seconds,
                   on_task=_failed_task(a.failure_rate, functions, a, a.work_seconds, standard=True))
        per_execution = run.usage + Usage(eventbridge_service_events=1.0)
        if level_all:
            per_execution.log_bytes += (run.events + 2) * event_bytes
        if traced:
            per_execution.xray_traces += a.xray_sampled
        facts += [
            f"{branches} Parallel branches: {items} task runs = {executions} execution(s)",
            f"{run.usage.transitions:g} state transitions per execution on the success path"
            f"{' (with the expected retries and dead-letter states)' if a.failure_rate else ''}",
        ]
        facts += _logging_facts(level_all, with_data, traced)
        return Estimate(workflow, items, per_execution * executions, facts, a,
                        {"branches": branches, "executions": executions})

    if workflow != "map":
        raise ValueError(f"unknown workflow {workflow!r}")
    children_usage: list[Usage] = []
    shape: dict[str, Any] = {}

    def on_map(state: Mapping[str, Any]) -> Usage:
        usage, child_facts, child_shape = _map_children(state, items, functions, a, level_all, event_bytes, traced)
        facts.extend(child_facts)
        shape.update(child_shape)
        children_usage.append(usage)
        return usage

    run = walk(definition["States"], definition["StartAt"], functions, a, standard=True, on_map=on_map)
    if not children_usage:
        raise ValueError("no Map state on the map workflow's success path")
    parent = run.usage + Usage(eventbridge_service_events=1.0)
    if level_all:
        parent.log_bytes += (run.events + 2) * event_bytes
    if traced:
        parent.xray_traces += a.xray_sampled
    own = parent.transitions - children_usage[0].transitions
    facts.insert(0, f"{own:g} state transitions in the parent execution on the success path")
    facts += _logging_facts(level_all, with_data, traced)
    return Estimate(workflow, items, parent, facts, a, shape)


def _logging_facts(level_all: bool, with_data: bool, traced: bool) -> list[str]:
    return [
        f"state machine logs: {'Level ALL' if level_all else 'not ALL (not counted)'}"
        f"{', with execution data' if with_data else ''}; X-Ray tracing {'on' if traced else 'off'}"
    ]


def _parallel_branches(definition: Mapping[str, Any]) -> int:
    return sum(len(s["Branches"]) for _n, s in success_path(definition["States"], definition["StartAt"])
               if s["Type"] == "Parallel")


def _map_children(state: Mapping[str, Any], items: int, functions: Mapping[str, Function], a: Assumptions,
                  level_all: bool, event_bytes: int, traced: bool) -> tuple[Usage, list[str], dict[str, Any]]:
    processor = state.get("ItemProcessor") or state.get("Iterator") or {}
    config = processor.get("ProcessorConfig") or {}
    distributed = config.get("Mode") == "DISTRIBUTED"
    express = config.get("ExecutionType") == "EXPRESS"
    per_batch = int((state.get("ItemBatcher") or {}).get("MaxItemsPerBatch") or 1)
    if not (state.get("ItemBatcher") or {}):
        per_batch = 1
    children = math.ceil(items / per_batch)
    p_fail = 1 - (1 - a.failure_rate) ** per_batch
    child = walk(processor["States"], processor["StartAt"], functions, a, standard=not express,
                 work_seconds=a.work_seconds * per_batch,
                 on_task=_failed_task(p_fail, functions, a, a.work_seconds * per_batch, standard=not express))
    usage = Usage()
    if distributed:
        usage.transitions += children  # one transition per child execution started
    usage = usage + child.usage * children
    if express:
        billed = math.ceil(round(child.seconds / EXPRESS_DURATION_STEP_S, 6)) * EXPRESS_DURATION_STEP_S
        usage.express_requests += children
        usage.express_gb_seconds += children * billed * EXPRESS_MEMORY_CHUNK_GB
    if level_all:
        usage.log_bytes += children * (child.events + 2) * event_bytes
    if traced:
        usage.xray_traces += children * a.xray_sampled
    reader, writer = state.get("ItemReader"), state.get("ResultWriter")
    if reader:
        usage.s3_get_requests += 1  # one manifest object
    if writer:
        usage.s3_put_requests += 1 + (2 if a.failure_rate else 1)  # manifest.json + one file per status
    facts = [
        f"Distributed Map: {per_batch} item(s) per child (ItemBatcher), {children} "
        f"{'Express' if express else 'Standard'} child execution(s) for {items} items",
        f"child success path: {len(success_path(processor['States'], processor['StartAt']))} state(s), "
        f"about {child.seconds:.2f} s each"
        + (f"; {p_fail:.2%} of children fail (retried, dead-lettered)" if p_fail else ""),
    ]
    return usage, facts, {"items_per_batch": per_batch, "children": children,
                          "child_execution_type": "EXPRESS" if express else "STANDARD"}


def estimate_sqs_per_item(template: Mapping[str, Any], items: int, a: Assumptions | None = None) -> Estimate:
    """What a user builds instead of a fan-in: each item an SQS message, one Lambda invocation per
    item (event source BatchSize 1), the ledger template's consumer function, and nothing that
    tracks completion (no ledger writes, no final status)."""
    return _estimate_ledger(template, items, a or Assumptions(), batch_size=1, ledger=False)


def _estimate_ledger(template: Mapping[str, Any], items: int, a: Assumptions, *,
                     batch_size: int | None = None, ledger: bool = True) -> Estimate:
    functions = functions_of(template)
    consumer, batch_size_read, shards = None, 10, 1
    for res in template.get("Resources", {}).values():
        if res.get("Type") != "AWS::Lambda::EventSourceMapping":
            continue
        props = res.get("Properties", {})
        target = props.get("FunctionName")
        lid = target.get("Ref") if isinstance(target, Mapping) else str(target)
        fn = functions.get(lid)
        if fn is not None and fn.handler == "ledger_sqs_consumer.handler":
            consumer, batch_size_read = fn, int(props.get("BatchSize", 10))
            env = (template["Resources"][lid]["Properties"].get("Environment") or {}).get("Variables", {})
            shards = int(env.get("LEDGER_COUNTER_SHARDS", 1))
    if consumer is None:
        raise ValueError("no SQS consumer (ledger_sqs_consumer.handler) with an event source in the template")
    batch_size = batch_size or batch_size_read
    if not ledger:
        shards = 0
    finisher = next((f for f in functions.values() if f.handler == "update_final_status.handler"), None)
    invocations = math.ceil(items / batch_size)
    seconds = a.invoke_overhead_seconds + batch_size * a.work_seconds
    usage = Usage()
    billed = math.ceil(round(seconds / LAMBDA_DURATION_STEP_S, 6)) * LAMBDA_DURATION_STEP_S
    usage.add_lambda(consumer.architecture, invocations * billed * consumer.gb, requests=invocations)
    usage.log_bytes += invocations * a.log_bytes_per_invocation
    # producer SendMessageBatch, the event source's ReceiveMessage and DeleteMessageBatch
    usage.sqs_requests += math.ceil(items / SQS_BATCH_MAX) + 2 * invocations
    if ledger:
        # per child: TransactWriteItems of the mark and the counter, 2 write units each (transactional),
        # and the work record's claim and outcome (fanout_kit.patterns.completion_ledger.work_record), 1 write unit each
        usage.dynamodb_write_units += (4 + 2) * items
        # per child: the decision check, strongly consistent: GetItem (1) or BatchGetItem of K shards + batch
        usage.dynamodb_read_units += items * (1 if shards <= 1 else shards + 1)
        # per batch: register_batch, the verdict's conditional write, and UpdateFinalStatus
        usage.dynamodb_write_units += 2
    if finisher is not None and ledger:
        usage.add_lambda(finisher.architecture, finisher.gb * a.invoke_overhead_seconds)
        usage = usage + HANDLER_USAGE.get(finisher.handler, Usage())
    p_fail = a.failure_rate
    if p_fail:
        # a failing child is redelivered until maxReceiveCount, then the DLQ recorder counts it
        receives = _ledger_max_receive(template)
        usage.add_lambda(consumer.architecture, p_fail * items * (receives - 1) * billed * consumer.gb / batch_size,
                         requests=p_fail * items * (receives - 1) / batch_size)
        usage.sqs_requests += p_fail * items * (receives - 1) * 2 / batch_size + p_fail * items * 3
        # the failure counted once (4), each further receive's claim and FAILED outcome (2), the
        # DLQ recorder's settling write on the work record (1)
        usage.dynamodb_write_units += p_fail * items * (4 + 2 * (receives - 1) + 1) if ledger else 0
    if not ledger:
        return Estimate("sqs-per-item", items, usage, [
            f"one SQS message and one Lambda invocation per item ({consumer.memory_mb} MB "
            f"{consumer.architecture}), no completion tracking"], a, {"batch_size": batch_size})
    facts = [
        f"SQS consumer: {batch_size} messages per invocation (event source BatchSize), "
        f"{consumer.memory_mb} MB {consumer.architecture}: {invocations} invocation(s)",
        f"ledger: {shards} counter shard(s); per child one TransactWriteItems (mark + counter), two writes "
        "of its work record (claim, outcome) and one strongly consistent decision read",
        "not counted: empty ReceiveMessage polls of idle queues, the sweeper's schedule (per hour, not per batch)",
    ]
    return Estimate("ledger", items, usage, facts, a, {"batch_size": batch_size, "counter_shards": shards})


def _ledger_max_receive(template: Mapping[str, Any]) -> int:
    for res in template.get("Resources", {}).values():
        if res.get("Type") == "AWS::SQS::Queue":
            policy = (res.get("Properties") or {}).get("RedrivePolicy") or {}
            if "maxReceiveCount" in policy:
                return int(policy["maxReceiveCount"])
    return 1


def _edit_maps(states: dict[str, Any], changes: Mapping[str, Any]) -> None:
    """The alternatives' Distributed Map: ``items_per_batch`` (None: no ItemBatcher),
    ``execution_type`` ("STANDARD" / "EXPRESS")."""
    for state in states.values():
        if state.get("Type") != "Map":
            continue
        if "items_per_batch" in changes:
            if changes["items_per_batch"] is None:
                state.pop("ItemBatcher", None)
            else:
                state.setdefault("ItemBatcher", {})["MaxItemsPerBatch"] = changes["items_per_batch"]
        if "execution_type" in changes:
            state["ItemProcessor"]["ProcessorConfig"]["ExecutionType"] = changes["execution_type"]


def iter_lines(estimate_: Estimate) -> Iterator[str]:
    """The human-readable estimate, line by line."""
    yield (f"estimate: {estimate_.workflow} workflow, {estimate_.items:,} item(s), list prices "
           f"{pricing.REGION}")
    for fact in estimate_.facts:
        yield f"  from the template: {fact}"
    for assumption in estimate_.assumptions.lines():
        yield f"  assumed: {assumption}"
    width = max((len(line.label) for line in estimate_.lines), default=10)
    for line in estimate_.lines:
        yield f"  {line.label:<{width}}  {line.quantity:>16,.2f} x ${line.unit_usd:.10f} = ${line.usd:,.4f}"
    yield f"  {'total':<{width}}  {'':>16}   {'':>12}   ${estimate_.total_usd:,.4f}"


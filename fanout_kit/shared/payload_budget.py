"""Worst-case payload size of every state of a workflow, computed from its ASL and the kit's caps
(pure logic; ``python -m fanout_kit.cli.budget`` prints it, the constructs run it at synth).

AWS fails a state whose input (also after Parameters), connector output or output is over 262,144
bytes with ``States.DataLimitExceeded``, which no Catch catches (``fanout_kit.shared.limits``). This
module follows the data through the definition with JSONPath's rules and an upper bound for
every value, and refuses a definition where one of those can exceed the limit:

* a value is an object of known fields (each bounded), an array, or a *leaf*: any JSON of at
  most N bytes (a part of a leaf is at most N bytes too);
* the execution input is a leaf of the workflow's input cap; a Lambda task's Payload is its
  function's bound (``function_outputs``: the kit's functions, and ``TASK_OUTPUT_MAX_BYTES`` for
  a child task), wrapped in the Invoke envelope; SQS, DynamoDB and DescribeMapRun results have
  fixed bounds; a Parallel state's result is the array of its branches' outputs; a Distributed
  Map's child gets ``{"Items": MaxItemsPerBatch x ItemSelector, "BatchInput": ...}`` with items
  of the manifest's item cap, and its result (ResultWriter) is the map run's ARN and S3 location;
* the error a Catch merges is ``{"Error": 256 characters, "Cause": 32,768 characters}`` at 3 bytes
  a character (``CAUSE_MAX_BYTES``), merged by the Catcher's ResultPath into the state's input;
* per state: InputPath, then Parameters (context object fields and intrinsic functions bounded;
  ``States.Format`` and ``States.JsonToString`` count every argument twice, for escaping), the
  task's result, ResultSelector, ResultPath (null: the input; ``$``: the result; a path: the input
  with that field replaced), OutputPath; where several states lead to one, its input is the
  largest of theirs (field by field).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from fanout_kit.shared.limits import (
    CAUSE_MAX_BYTES,
    ERROR_MAX_BYTES,
    STATE_PAYLOAD_LIMIT_BYTES,
    TASK_OUTPUT_MAX_BYTES,
)
from fanout_kit.shared.checks import ConfigError

# Bounds of what AWS puts in the state besides the kit's data (bytes of JSON, generous).
ARN_BYTES = 2 + 256 * 4  # an ARN is at most 256 characters (API reference), non-ASCII names allowed
NAME_BYTES = 2 + 80 * 4  # execution and state names: 80 characters
TIMESTAMP_BYTES = 40
NUMBER_BYTES = 24
LAMBDA_ENVELOPE = {  # lambda:invoke's result around Payload
    "ExecutedVersion": 2 + 1024,
    "SdkHttpMetadata": 4096,  # response headers
    "SdkResponseMetadata": 256,
    "StatusCode": NUMBER_BYTES,
}
SERVICE_RESULT_BYTES = {  # other integrations' results
    "arn:aws:states:::sqs:sendMessage": 1024,
    "arn:aws:states:::dynamodb:getItem": 8192,  # a projection of three attributes
    "arn:aws:states:::dynamodb:updateItem": 4096,  # no ReturnValues
    "arn:aws:states:::aws-sdk:sfn:describeMapRun": 16384,  # its ItemCounts are numbers (below)
}
MAP_RUN_COUNTS = (
    "Pending", "Running", "Succeeded", "Failed", "TimedOut", "Aborted", "Total", "ResultsWritten",
    "FailuresNotRedrivable", "PendingRedrive",
)
MAP_RESULT_WRITER_BYTES = 4096  # {"MapRunArn", "ResultWriterDetails": {"Bucket", "Key"}}


class PayloadBudgetError(ConfigError):
    """A state can exceed 256 KiB in the worst case; the message names it, its bytes and the fix."""


# ------------------------------------------------------------------------------- values
@dataclass
class Leaf:
    """Any JSON value of at most ``size`` bytes (``text``: a string)."""

    size: int
    text: bool = False


@dataclass
class Obj:
    """An object with these fields, plus unknown ones of at most ``rest`` bytes in all."""

    fields: dict[str, "Value"] = field(default_factory=dict)
    rest: int = 0


@dataclass
class Arr:
    """An array of these items; ``repeat`` copies of the one item if set."""

    items: list["Value"]
    repeat: int = 0


Value = Union[Leaf, Obj, Arr]
NULL = Leaf(4)


def _key_size(key: str) -> int:
    return len(json.dumps(key, ensure_ascii=False).encode("utf-8"))


def size(value: Value) -> int:
    """The largest JSON text (UTF-8 bytes, compact) the value can be."""
    if isinstance(value, Leaf):
        return value.size
    if isinstance(value, Obj):
        parts = [_key_size(k) + 1 + size(v) for k, v in value.fields.items()]
        if value.rest:
            parts.append(value.rest)
        return 2 + sum(parts) + max(len(parts) - 1, 0)
    if value.repeat:
        return 2 + value.repeat * size(value.items[0]) + value.repeat - 1
    return 2 + sum(size(v) for v in value.items) + max(len(value.items) - 1, 0)


def literal(data: Any) -> Value:
    """The exact value of a constant in the definition."""
    if isinstance(data, dict):
        return Obj({k: literal(v) for k, v in data.items()})
    if isinstance(data, list):
        return Arr([literal(v) for v in data])
    return Leaf(len(json.dumps(data, ensure_ascii=False).encode("utf-8")), isinstance(data, str))


def join(a: Value, b: Value) -> Value:
    """The smallest bound covering both (where two paths meet)."""
    if isinstance(a, Obj) and isinstance(b, Obj):
        fields = dict(a.fields)
        for k, v in b.fields.items():
            fields[k] = join(fields[k], v) if k in fields else v
        return Obj(fields, max(a.rest, b.rest))
    if isinstance(a, Arr) and isinstance(b, Arr) and not a.repeat and not b.repeat and len(a.items) == len(b.items):
        return Arr([join(x, y) for x, y in zip(a.items, b.items)])
    text = isinstance(a, Leaf) and isinstance(b, Leaf) and a.text and b.text
    return Leaf(max(size(a), size(b)), text)


# ------------------------------------------------------------------------------- paths
_TOKEN = re.compile(r"\.([^.\[]+)|\[(\d+|\*)\]|\['([^']+)'\]")


def _steps(path: str) -> list[str]:
    if not path.startswith("$"):
        raise PayloadBudgetError(f"path {path!r}: not a JSONPath")
    rest, steps = path[1:], []
    while rest:
        match = _TOKEN.match(rest)
        if not match:
            raise PayloadBudgetError(f"path {path!r}: not understood by the payload budget")
        steps.append(match.group(1) or match.group(2) or match.group(3))
        rest = rest[match.end():]
    return steps


def get(value: Value, path: str) -> Value:
    return _get(value, _steps(path))


def _get(value: Value, steps: list[str]) -> Value:
    if not steps:
        return value
    step, rest = steps[0], steps[1:]
    if isinstance(value, Leaf):
        return Leaf(value.size)  # a part of a value is no larger than the value
    if isinstance(value, Obj):
        if step in value.fields:
            return _get(value.fields[step], rest)
        return _get(Leaf(value.rest), rest) if value.rest else NULL
    if step == "*":
        items = [value.items[0]] * value.repeat if value.repeat else value.items
        return Arr([_get(v, rest) for v in items])
    if step.isdigit():
        index = int(step)
        if value.repeat:
            return _get(value.items[0], rest) if index < value.repeat else NULL
        return _get(value.items[index], rest) if index < len(value.items) else NULL
    return NULL


def put(value: Value, path: str | None, result: Value) -> Value:
    """ResultPath: null keeps the input, ``$`` is the result, a path replaces that field."""
    if path is None:
        return value
    return _put(value, _steps(path), result)


def _put(value: Value, steps: list[str], result: Value) -> Value:
    if not steps:
        return result
    step, rest = steps[0], steps[1:]
    if isinstance(value, Obj):
        inner = value.fields.get(step, Obj())
        return Obj({**value.fields, step: _put(inner, rest, result)}, value.rest)
    if isinstance(value, Leaf):  # unknown structure: the field is added next to all of it
        return Obj({step: _put(Obj(), rest, result)}, value.size)
    raise PayloadBudgetError(f"ResultPath into an array ({step}) is not budgeted")


# --------------------------------------------------------------------------- templates
CONTEXT: dict[str, Value] = {
    "$$.Execution.Id": Leaf(ARN_BYTES, True),
    "$$.Execution.Name": Leaf(NAME_BYTES, True),
    "$$.Execution.StartTime": Leaf(TIMESTAMP_BYTES, True),
    "$$.StateMachine.Id": Leaf(ARN_BYTES, True),
    "$$.StateMachine.Name": Leaf(NAME_BYTES, True),
    "$$.State.EnteredTime": Leaf(TIMESTAMP_BYTES, True),
    "$$.State.Name": Leaf(NAME_BYTES, True),
    "$$.State.RetryCount": Leaf(NUMBER_BYTES),
    "$$.Map.Item.Index": Leaf(NUMBER_BYTES),
}

INTRINSIC = re.compile(r"^(States\.[A-Za-z0-9]+)\((.*)\)$", re.S)


def _split_args(text: str) -> list[str]:
    args, depth, quoted, current = [], 0, False, ""
    i = 0
    while i < len(text):
        char = text[i]
        if quoted:
            current += char
            if char == "\\" and i + 1 < len(text):
                current += text[i + 1]
                i += 1
            elif char == "'":
                quoted = False
        elif char == "'":
            quoted, current = True, current + char
        elif char == "(":
            depth, current = depth + 1, current + char
        elif char == ")":
            depth, current = depth - 1, current + char
        elif char == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += char
        i += 1
    if current.strip():
        args.append(current.strip())
    return args


def _reference(expr: str, data: Value, context: Mapping[str, Value]) -> Value:
    expr = expr.strip()
    if expr.startswith("$$."):
        if expr in context:
            return context[expr]
        raise PayloadBudgetError(f"context object path {expr}: no bound known to the payload budget")
    if expr.startswith("$"):
        return get(data, expr)
    if expr.startswith("'"):
        return Leaf(len(expr.encode("utf-8")), True)  # a string literal: its JSON is no longer
    match = INTRINSIC.match(expr)
    if not match:
        return literal(json.loads(expr))  # a number, true, false, null
    name, args = match.group(1), [_reference(a, data, context) for a in _split_args(match.group(2))]
    if name == "States.Format":
        # a string argument goes in as its characters (escaped as in its own JSON); any other
        # value as its JSON text, whose quotes and backslashes are escaped again: twice at most
        return Leaf(sum(size(a) if isinstance(a, Leaf) and a.text else 2 * size(a) for a in args), True)
    if name == "States.JsonToString":
        return Leaf(2 + 2 * size(args[0]), True)
    if name == "States.StringToJson":
        return Leaf(size(args[0]))
    if name == "States.Array":
        return Arr(args)
    if name in ("States.ArrayLength", "States.MathAdd", "States.MathRandom", "States.ArrayContains"):
        return Leaf(NUMBER_BYTES)
    if name == "States.ArrayGetItem":
        return Leaf(size(args[0]))
    if name == "States.UUID":
        return Leaf(40)
    if name == "States.Hash":
        return Leaf(132)
    if name == "States.Base64Encode":
        return Leaf(4 + (size(args[0]) * 4 + 2) // 3)
    raise PayloadBudgetError(f"intrinsic function {name}: no bound known to the payload budget")


def evaluate(template: Any, data: Value, context: Mapping[str, Value]) -> Value:
    """Parameters / ResultSelector / ItemSelector / BatchInput: the bound of what they build."""
    if isinstance(template, dict):
        out: dict[str, Value] = {}
        for key, value in template.items():
            if key.endswith(".$") and isinstance(value, str):
                out[key[:-2]] = _reference(value, data, context)
            else:
                out[key] = evaluate(value, data, context)
        return Obj(out)
    if isinstance(template, list):
        return Arr([evaluate(v, data, context) for v in template])
    return literal(template)


# ------------------------------------------------------------------------------- states
@dataclass(frozen=True)
class StateSize:
    """The worst-case sizes of one state (bytes of JSON)."""

    scope: str  # "" at the top level, "RunTasks/branch0", "ProcessItems JSON/items"
    state: str
    input: int
    effective_input: int  # after InputPath and Parameters
    result: int  # a task's result (connector output), a Parallel's branches, ...; 0 if none
    output: int  # 0 for a Fail state

    @property
    def worst(self) -> int:
        return max(self.input, self.effective_input, self.result, self.output)

    @property
    def where(self) -> str:
        return f"{self.scope}/{self.state}" if self.scope else self.state


FunctionOutputs = Callable[[str, Mapping[str, Any]], Value]  # (state name, state) -> the Payload


@dataclass
class Budget:
    """What the definition is evaluated with."""

    execution_input: Value
    function_output: FunctionOutputs
    map_item_bytes: int | None = None  # the largest manifest item (Distributed Map)
    sizes: list[StateSize] = field(default_factory=list)

    def largest(self, count: int = 5) -> list[StateSize]:
        return sorted(self.sizes, key=lambda s: s.worst, reverse=True)[:count]


ERROR_OUTPUT = Obj({"Error": Leaf(ERROR_MAX_BYTES + 2, True), "Cause": Leaf(CAUSE_MAX_BYTES + 2, True)})


def _order(states: Mapping[str, Any], start: str) -> list[str]:
    """The states reachable from ``start``, each after every state that leads to it."""
    order: list[str] = []
    marks: dict[str, int] = {}

    def visit(name: str) -> None:
        if marks.get(name) == 2:
            return
        if marks.get(name) == 1:
            raise PayloadBudgetError(f"state {name!r} is on a cycle: its payload cannot be bounded")
        marks[name] = 1
        for target in _targets(states[name]):
            visit(target)
        marks[name] = 2
        order.append(name)

    visit(start)
    return order[::-1]


def _targets(state: Mapping[str, Any]) -> list[str]:
    out = [state["Next"]] if "Next" in state else []
    out += [c["Next"] for c in state.get("Choices", [])]
    out += [state["Default"]] if "Default" in state else []
    out += [c["Next"] for c in state.get("Catch", [])]
    return out


def _task_result(name: str, state: Mapping[str, Any], params: Value, budget: Budget) -> Value:
    resource = state.get("Resource", "")
    generic = re.sub(r"^arn:[^:]+:", "arn:aws:", resource)
    if generic == "arn:aws:states:::lambda:invoke":
        payload = budget.function_output(name, state)
        return Obj({"Payload": payload, **{k: Leaf(v) for k, v in LAMBDA_ENVELOPE.items()}})
    if generic == "arn:aws:states:::aws-sdk:sfn:describeMapRun":
        counts = Obj({k: Leaf(NUMBER_BYTES) for k in MAP_RUN_COUNTS})
        return Obj({"ItemCounts": counts, "ExecutionCounts": counts}, rest=SERVICE_RESULT_BYTES[generic])
    if generic in SERVICE_RESULT_BYTES:
        return Leaf(SERVICE_RESULT_BYTES[generic])
    raise PayloadBudgetError(f"state {name!r}: no result bound for {resource}")


MAX_ALTERNATIVES = 64  # inputs kept apart per state (paths); beyond, they are joined


def _run(asl: Mapping[str, Any], start_input: Value, budget: Budget, scope: str, context: Mapping[str, Value]) -> Value:
    """Evaluate one state machine (or branch, or item processor); returns its output's bound.
    Each state is evaluated once per distinct input that reaches it (one per path, so a Catch's
    error on one path is never counted together with another path's)."""
    states = asl["States"]
    inputs: dict[str, list[Value]] = {asl["StartAt"]: [start_input]}
    finals: list[Value] = []

    def reach(target: str, value: Value) -> None:
        alternatives = inputs.setdefault(target, [])
        if value not in alternatives:
            alternatives.append(value)

    for name in _order(states, asl["StartAt"]):
        state = states[name]
        alternatives = inputs[name]
        if len(alternatives) > MAX_ALTERNATIVES:
            merged = alternatives[0]
            for value in alternatives[1:]:
                merged = join(merged, value)
            alternatives = [merged]
        worst = [0, 0, 0, 0]
        for raw in alternatives:
            sizes = _state(name, state, raw, budget, scope, context, reach, finals)
            worst = [max(a, b) for a, b in zip(worst, sizes)]
        budget.sizes.append(StateSize(scope.rstrip("/"), name, *worst))
    if not finals:
        return Leaf(0)
    out = finals[0]
    for value in finals[1:]:
        out = join(out, value)
    return out


def _state(
    name: str, state: Mapping[str, Any], raw: Value, budget: Budget, scope: str, context: Mapping[str, Value],
    reach: Callable[[str, Value], None], finals: list[Value],
) -> tuple[int, int, int, int]:
    """One state on one input: passes its output (and its Catchers' inputs) on; returns its sizes
    (input, input after Parameters, result, output)."""
    kind = state["Type"]
    data = get(raw, state["InputPath"]) if state.get("InputPath") else raw
    if "Parameters" in state:
        data = evaluate(state["Parameters"], data, context)
    result: Value | None = None
    if kind == "Task":
        result = _task_result(name, state, data, budget)
    elif kind == "Parallel":
        result = Arr([_run(b, data, budget, f"{scope}{name}/branch{i}/", context) for i, b in enumerate(state["Branches"])])
    elif kind == "Map":
        result = _map_result(name, state, data, budget, scope, context)
    if kind in ("Task", "Parallel", "Map"):
        selected = evaluate(state["ResultSelector"], result, context) if "ResultSelector" in state else result
        output = put(raw, state.get("ResultPath", "$"), selected)
    elif kind == "Pass":
        output = put(raw, state.get("ResultPath", "$"), literal(state["Result"]) if "Result" in state else data)
    else:
        output = data
    if state.get("OutputPath"):
        output = get(output, state["OutputPath"])
    for catcher in state.get("Catch", []):
        reach(catcher["Next"], put(raw, catcher.get("ResultPath", "$"), ERROR_OUTPUT))
    if kind == "Choice":
        for target in [c["Next"] for c in state.get("Choices", [])] + [state.get("Default")]:
            if target:
                reach(target, output)
    elif "Next" in state:
        reach(state["Next"], output)
    elif kind != "Fail":
        finals.append(output)
    return (
        size(raw), size(data), size(result) if result is not None else 0, 0 if kind == "Fail" else size(output)
    )


def _map_result(name: str, state: Mapping[str, Any], data: Value, budget: Budget, scope: str, context: Mapping[str, Value]) -> Value:
    processor = state.get("ItemProcessor") or state.get("Iterator")
    distributed = (processor.get("ProcessorConfig") or {}).get("Mode") == "DISTRIBUTED"
    if not distributed or budget.map_item_bytes is None:
        raise PayloadBudgetError(f"state {name!r}: only a Distributed Map with a known item size is budgeted")
    item_context = {**context, "$$.Map.Item.Value": Leaf(budget.map_item_bytes)}
    selected = evaluate(state["ItemSelector"], data, item_context) if "ItemSelector" in state else Leaf(budget.map_item_bytes)
    batcher = state.get("ItemBatcher")
    if batcher:
        child = Obj({"Items": Arr([selected], repeat=int(batcher.get("MaxItemsPerBatch", 1)))})
        if "BatchInput" in batcher:
            child.fields["BatchInput"] = evaluate(batcher["BatchInput"], data, context)
    else:
        child = selected
    # A child execution has its own context: its own ids, no Map item.
    _run(processor, child, budget, f"{scope}{name}/items/", CONTEXT)
    if "ResultWriter" not in state:
        raise PayloadBudgetError(f"state {name!r}: a Distributed Map without ResultWriter returns every child's output")
    return Leaf(MAP_RESULT_WRITER_BYTES)


def payload_budget(asl: Mapping[str, Any], budget: Budget) -> Budget:
    """Every state's worst-case sizes (``budget.sizes``); PayloadBudgetError if one can exceed the
    limit, naming the largest."""
    budget.sizes.clear()
    _run(asl, budget.execution_input, budget, "", CONTEXT)
    over = [s for s in budget.sizes if s.worst > STATE_PAYLOAD_LIMIT_BYTES]
    if over:
        worst = max(over, key=lambda s: s.worst)
        raise PayloadBudgetError(
            f"state {worst.where!r} can reach {worst.worst:,} bytes in the worst case, over AWS's "
            f"{STATE_PAYLOAD_LIMIT_BYTES:,}-byte limit (States.DataLimitExceeded, not catchable); "
            f"{len(over)} state(s) over in all"
        )
    return budget


def kit_function_outputs(*, input_cap: int, named: Mapping[str, Value] | None = None) -> FunctionOutputs:
    """The Payload bound of the kit's Lambda states by name: the input checks return the normalized
    input; the bookkeeping functions small objects; any other (a child task, the Map worker) at
    most TASK_OUTPUT_MAX_BYTES (``fanout_runtime.events``: the tasks' contract; this repository's
    example tasks refuse more)."""
    known: dict[str, Value] = {
        # ValidateInput: {"batchId", "tasks", "redriveOf"}, the tasks as given (within the cap)
        "ValidateInput": Obj({"batchId": Leaf(82), "tasks": Leaf(input_cap), "redriveOf": Leaf(ARN_BYTES)}),
        # PrepareBatch: {"batchId", "manifest": {"bucket", "key", "format", ...}, "total", "redriveOf"}
        "PrepareBatch": Obj(
            {"batchId": Leaf(82), "manifest": Leaf(8192), "total": Leaf(NUMBER_BYTES), "redriveOf": Leaf(ARN_BYTES)},
            rest=8192,
        ),
        "UpdateFinalStatus": Leaf(8192),
        "ForwardFailedItems": Leaf(8192),
        # RetryFailedItems: {"error", "cause", "failed"}; the cause is a Fail state's (32,768 characters)
        "Retry failed items": Obj({"error": Leaf(2 + ERROR_MAX_BYTES), "cause": Leaf(2 + CAUSE_MAX_BYTES), "failed": Leaf(NUMBER_BYTES),
                                  "processed": Leaf(1024)}),
        **(named or {}),
    }

    def output(name: str, state: Mapping[str, Any]) -> Value:
        # a Map child's states are named per manifest format: "Retry failed items (JSON)"
        return known.get(name) or known.get(re.sub(r" \((JSON|CSV)\)$", "", name), Leaf(TASK_OUTPUT_MAX_BYTES))

    return output


def report_lines(budget: Budget, count: int = 5) -> list[str]:
    """The largest states: ``bytes / 262,144 (percent)  state  (which size)``."""
    lines = []
    for s in budget.largest(count):
        which = max(
            ("input", s.input), ("input after Parameters", s.effective_input), ("result", s.result), ("output", s.output),
            key=lambda pair: pair[1],
        )[0]
        lines.append(
            f"{s.worst:>9,} / {STATE_PAYLOAD_LIMIT_BYTES:,} ({100 * s.worst / STATE_PAYLOAD_LIMIT_BYTES:5.1f}%)  "
            f"{s.where}  ({which})"
        )
    return lines

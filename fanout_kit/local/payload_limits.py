"""AWS's payload limit, enforced by the local engine as AWS enforces it (moto 5.2.5 does part of it,
differently).

AWS: every state's input and output, a task's parameters and a connector's output are at most
262,144 bytes of UTF-8 JSON ("Maximum input or output size for a task, state, or execution:
256 KiB", Step Functions service quotas; ``StateEnteredEventDetails.input``,
``StateExitedEventDetails.output``, ``TaskScheduledEventDetails.parameters``: "Maximum length of
262144", API reference). Past it the state fails with ``States.DataLimitExceeded``, "a terminal
error that can't be caught by the States.ALL error type", reported when "the output of a connector
is larger than payload size quota", "the output of a state is larger than payload size quota" or
"after Parameters processing, the input of a state is larger than the payload size quota"
("Handling errors in Step Functions workflows", error names).

moto checks a state's output and a connector's output, but with ``<`` (262,144 bytes exactly is
refused), lets ``States.ALL`` catch and retry the error, does not check the input after
Parameters, and turns the error into ``States.Runtime`` when it leaves a Parallel branch (a
``States.`` name may not be a custom error name there). ``enforced_payload_limits()`` makes all of
that as AWS has it:

* each state's input when it is entered, and the value Parameters produce, are checked too;
* the limit is inclusive (262,144 bytes pass, 262,145 fail), counted on compact UTF-8 JSON;
* ``States.ALL`` (in a Retrier or a Catcher) does not match ``States.DataLimitExceeded``: the
  execution fails;
* a ``States.`` error leaving a Parallel branch or a Map iteration keeps its name.

Each violation is appended to ``violations`` (state, what, bytes), for tests.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from fanout_kit.shared.limits import STATE_PAYLOAD_LIMIT_BYTES

DATA_LIMIT_EXCEEDED = "States.DataLimitExceeded"
_PARSER = "moto.stepfunctions.parser.asl.component."
_MODULES = (  # loaded before patching: the modules whose names are replaced
    _PARSER + "state.exec.state_task.state_task_lambda",
    _PARSER + "state.exec.state_task.service.state_task_service",
    _PARSER + "state.exec.state_parallel.branches_decl",
    _PARSER + "state.exec.state_map.iteration.iteration_worker",
)


@dataclass(frozen=True)
class Violation:
    state: str
    what: str  # "input", "input after Parameters", "output", "connector output"
    size: int


def _size(value: Any) -> int:
    """Compact UTF-8 JSON bytes, as AWS counts them; timestamps in service results (datetime
    objects inside moto) as moto writes them."""
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    from moto.stepfunctions.parser.asl.utils.encoding import _DateTimeEncoder

    text = json.dumps(value, cls=_DateTimeEncoder, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8"))


def _data_limit_exception(env: Any, state: str, what: str, size: int) -> Exception:
    from moto.stepfunctions.parser.api import HistoryEventType, TaskFailedEventDetails
    from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
        FailureEvent,
        FailureEventException,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

    cause = (
        f"The {what} of state '{state}' is {size} bytes, over the {STATE_PAYLOAD_LIMIT_BYTES}-byte "
        "payload size quota"
    )
    return FailureEventException(
        failure_event=FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=StatesErrorNameType.StatesStatesDataLimitExceeded),
            event_type=HistoryEventType.TaskFailed,
            event_details=EventDetails(
                taskFailedEventDetails=TaskFailedEventDetails(
                    error=DATA_LIMIT_EXCEEDED, cause=cause, resource="", resourceType=""
                )
            ),
        )
    )


def _error_name_factory(original: type) -> Any:
    """``CustomErrorName`` as the branch and iteration workers use it, keeping ``States.`` names."""
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )

    def make(error_name: str | None = None) -> Any:
        if isinstance(error_name, str) and error_name.startswith("States."):
            try:
                return StatesErrorName(typ=StatesErrorNameType.from_name(error_name))
            except ValueError:
                pass
        return original(error_name=error_name)

    return make


@contextmanager
def enforced_payload_limits(violations: list[Violation] | None = None) -> Iterator[list[Violation]]:
    """While active, moto's interpreter holds every state to the limit as AWS does (module doc)."""
    from moto.stepfunctions.parser import quotas
    from moto.stepfunctions.parser.asl.component.common import parargs
    from moto.stepfunctions.parser.asl.component.common.error_name import custom_error_name, error_equals_decl
    from moto.stepfunctions.parser.asl.component.state import state as state_module

    for module_name in _MODULES:
        importlib.import_module(module_name)
    found: list[Violation] = violations if violations is not None else []
    limit = STATE_PAYLOAD_LIMIT_BYTES
    current = threading.local()  # .state: the state this thread evaluates (for the messages)

    def within(value: Any) -> bool:  # AWS: at most 262,144 bytes (moto: fewer than)
        return _size(value) <= limit

    def check(env: Any, state: str, what: str, value: Any) -> None:
        size = _size(value)
        if size > limit:
            found.append(Violation(state, what, size))
            raise _data_limit_exception(env, state, what, size)

    stack = ExitStack()

    def patch(owner: Any, name: str, value: Any) -> None:
        original = getattr(owner, name)
        setattr(owner, name, value)
        stack.callback(setattr, owner, name, original)

    # 1. moto's own output checks (state output, connector output), with AWS's inclusive limit;
    #    a violation is recorded when the check that refuses it runs.
    def recorded_within(value: Any) -> bool:
        ok = within(value)
        if not ok:
            found.append(Violation(getattr(current, "state", "?"), "output", _size(value)))
        return ok

    moto_check = quotas.is_within_size_quota
    for name, module in list(sys.modules.items()):
        if name.startswith("moto.stepfunctions.parser") and getattr(module, "is_within_size_quota", None) is moto_check:
            patch(module, "is_within_size_quota", recorded_within)

    # 2. each state's input when entered
    state_class = state_module.CommonStateField
    original_body = state_class._eval_body

    def eval_body(self: Any, env: Any) -> None:
        current.state = self.name
        check(env, self.name, "input", env.states.get_input())
        return original_body(self, env)

    patch(state_class, "_eval_body", eval_body)

    # 3. the input after Parameters processing (Pass, Task, Parallel)
    original_parargs = parargs.Parargs._eval_body

    def parargs_body(self: Any, env: Any) -> None:
        original_parargs(self, env)
        state = (env.states.context_object.context_object_data.get("State") or {}).get("Name", "?")
        check(env, state, "input after Parameters", env.stack[-1])

    patch(parargs.Parargs, "_eval_body", parargs_body)

    # 4. States.ALL neither retries nor catches States.DataLimitExceeded
    decl = error_equals_decl.ErrorEqualsDecl
    original_equals = decl._eval_body

    def equals_body(self: Any, env: Any) -> None:
        error_name = env.stack[-1]
        if getattr(error_name, "error_name", None) == DATA_LIMIT_EXCEEDED and not any(
            getattr(n, "error_name", None) == DATA_LIMIT_EXCEEDED for n in self.error_names
        ):
            env.stack.pop()
            env.stack.append(False)
            return
        original_equals(self, env)

    patch(decl, "_eval_body", equals_body)

    # 5. a States. error leaving a Parallel branch or a Map iteration keeps its name
    factory = _error_name_factory(custom_error_name.CustomErrorName)
    for name, module in list(sys.modules.items()):
        if name in _MODULES and getattr(module, "CustomErrorName", None) is custom_error_name.CustomErrorName:
            patch(module, "CustomErrorName", factory)
    with stack:
        yield found

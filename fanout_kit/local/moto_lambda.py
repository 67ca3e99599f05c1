"""Route moto's Lambda Invoke to the project's real Python handlers, in-process.

Written against **moto 5.2.5** (``MOTO_VERSION`` below; ``test_moto_adapter.py`` fails loudly when
the installed moto differs or the patched method changes shape). With ``lambda.use_docker`` off,
moto's ``LambdaSimpleBackend.invoke(function_name, qualifier, body, headers, response_headers)``
returns a canned answer; this module replaces it with one that imports the function's handler (the
kit's by its module in the kit, ``KIT_HANDLERS``; an app's by its name when importable, else from its
synthesized code asset) and calls it, and answers an unhandled exception the way the AWS Python
runtime does:
status 200, header ``X-Amz-Function-Error: Unhandled`` and the payload
``{"errorMessage", "errorType", "requestId", "stackTrace"}``, so that Step Functions' Retry and
Catch see the real error name (the exception's class name).

The app's own functions (a code asset that is not the kit's) do not run in this process: they run
in sandboxes as strict as Lambda (``fanout_kit/local/sandbox.py``; ``LocalFunction.sandboxed``). Faults
of an app's functions can be injected here without touching their code (``task_faults``,
``item_faults``: ``fanout run --app --fail / --fail-item``).

Faults of the Lambda *service* itself (``Lambda.ServiceException`` and friends, which the Retry
rules also cover) are injected here too: the invoke is answered with that API error, as AWS does.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
import sys
import json
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import moto
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.core.exceptions import JsonRESTError

from fanout_kit.shared.assets import KIT_HANDLERS, kit_handler_file

MOTO_VERSION = "5.2.5"


class FunctionStopped(BaseException):
    """Lambda stopped the function mid-invocation (BaseException, so the handler's own
    ``except Exception`` cannot swallow it). ``error_type``: the Lambda runtime's name for it."""

    error_type = "Runtime.ExitError"

    def message(self, fn: "LocalFunction") -> str:
        return "Runtime exited with error: exit status 1"


class FunctionTimedOut(FunctionStopped):
    """Raised by the local stand-in of ``fanout_runtime.faults.hang``: the function runs until its
    timeout ("Task timed out after N seconds", error type Sandbox.Timedout in Lambda's
    troubleshooting guide)."""

    error_type = "Sandbox.Timedout"

    def message(self, fn: "LocalFunction") -> str:
        return f"Task timed out after {fn.timeout_s:.2f} seconds"


class FunctionOutOfMemory(FunctionStopped):
    """The stand-in of ``fanout_runtime.faults.exhaust_memory``: the function outgrew its memory size."""

    error_type = "Runtime.OutOfMemory"

    def message(self, fn: "LocalFunction") -> str:
        return f"Runtime exited with error: signal: killed (memory size {fn.memory_mb} MB)"


class RuntimeCrashed(FunctionStopped):
    """The stand-in of ``fanout_runtime.faults.crash``: the runtime process exited."""


# How Step Functions names an unhandled Lambda error in the task's error output. AWS's Step
# Functions guide ("Handle Lambda service exceptions"): "Unhandled errors in Lambda are reported as
# Lambda.Unknown ... These include out-of-memory errors and function timeouts"; the Lambda runtime's
# own names (Sandbox.Timedout, Runtime.OutOfMemory, Runtime.ExitError) are what the function's error
# payload carries. The engine reports either (``LocalEngine(unhandled_errors=...)``), so a test can
# show that the Retry rules treat both the same.
RUNTIME_NAMES = "runtime"
DOCUMENTED_NAME = "Lambda.Unknown"
UNHANDLED_ERROR_NAMES = (RUNTIME_NAMES, DOCUMENTED_NAME)


def _local_hang(seconds: float) -> None:
    raise FunctionTimedOut(seconds)


def _local_exhaust_memory() -> None:
    raise FunctionOutOfMemory()


def _local_crash() -> None:
    raise RuntimeCrashed()


_ASSET_IMPORT = threading.Lock()  # Parallel branches invoke at once: one of them loads the module


def asset_module(name: str, code_dir: Path) -> Any:
    """The handler module ``name`` of another app's function, loaded from its code asset
    ``code_dir`` under its own name, as the Lambda runtime imports it from /var/task: a module of
    a package (``tasks.handler``) loads its package from the asset, so its sibling modules import
    too. A top-level name already loaded from another folder is refused."""
    top = name.split(".")[0]
    with _ASSET_IMPORT:
        loaded = sys.modules.get(top)
        if loaded is not None:
            where = [Path(p).resolve() for p in (getattr(loaded, "__path__", None) or [getattr(loaded, "__file__", "") or ""])]
            if not any(p == (code_dir / top).resolve() or p == (code_dir / f"{top}.py").resolve() for p in where):
                raise RuntimeError(f"handler module {name!r} of {code_dir} is already loaded from "
                                   f"{', '.join(map(str, where))}")
        else:
            spec = importlib.machinery.PathFinder.find_spec(top, [str(code_dir)])
            if spec is None:
                raise RuntimeError(f"handler module {name!r} not found in the function's code asset ({code_dir})")
            module = importlib.util.module_from_spec(spec)
            sys.modules[top] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[top]
                raise
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as error:
            raise RuntimeError(f"handler module {name!r} not found in the function's code asset ({code_dir})") from error


def kit_module(handler: str) -> Any:
    """The module of the kit's handler ``handler`` ("prepare_map_batch.handler"), imported from the
    kit by its own name (``KIT_HANDLERS``), so its clients and settings are the kit's one copy."""
    return importlib.import_module(KIT_HANDLERS[handler.rpartition(".")[0]])


class RetryableTaskError(Exception):
    """An injected failure (``--fail``/``--fail-item``), named as the kit's Retry rule matches it."""


class NonRetryableTaskError(Exception):
    """An injected failure the workflows never retry (dead-lettered at once)."""


@dataclass(frozen=True)
class InjectedFault:
    """A fault of a user's function injected by the engine, without touching its code: ``mode``
    transient (its first ``times`` attempts), permanent, fatal, timeout (or hang), oom or crash."""

    mode: str
    times: int = 1


PER_ITEM_MODES = ("transient", "permanent", "fatal")  # reported per item (batchItemFailures)


def _fault_error(fault: InjectedFault, where: str, attempt: int) -> BaseException | None:
    where = f"{where} (attempt {attempt + 1})"
    if fault.mode in ("timeout", "hang"):
        return FunctionTimedOut(0)
    if fault.mode == "oom":
        return FunctionOutOfMemory()
    if fault.mode == "crash":
        return RuntimeCrashed()
    if fault.mode == "fatal":
        return NonRetryableTaskError(f"injected non-retryable failure of {where}")
    if fault.mode == "permanent":
        return RetryableTaskError(f"injected permanent failure of {where}")
    if attempt < fault.times:
        return RetryableTaskError(f"injected transient failure of {where}")
    return None


def injected_failure(event: Any, task_faults: dict, item_faults: dict) -> BaseException | None:
    """The exception a task (``{"batchId", "task", "attempt", ...}``) or a Map worker's batch
    (``{"items": [{"index", "item"}...], "attempt", ...}``) raises under an injected fault. A Map
    item's transient, permanent or fatal fault fails that item only (``injected_item_failures``);
    a timeout, oom or crash stops the whole invocation, as it would in Lambda."""
    if not isinstance(event, dict) or not (task_faults or item_faults):
        return None
    attempt = event.get("attempt") if isinstance(event.get("attempt"), int) else 0
    fault, where = None, None
    if task_faults and isinstance(event.get("task"), str) and "batchId" in event:
        fault, where = task_faults.get(event["task"]), event["task"]
    elif item_faults and isinstance(event.get("items"), list):
        hits = [
            e.get("index") for e in event["items"]
            if isinstance(e, dict) and e.get("index") in item_faults and item_faults[e.get("index")].mode not in PER_ITEM_MODES
        ]
        if hits:
            fault, where = item_faults[hits[0]], f"item {hits[0]}"
    elif item_faults and "payload" in event and str(event.get("childId", "")).isdigit():
        # a ledger processing function's child ({"batchId", "childId", "payload", "attempt"})
        fault, where = item_faults.get(int(event["childId"])), f"child {event['childId']}"
    if fault is None:
        return None
    return _fault_error(fault, where, attempt)


def injected_item_failures(event: Any, item_faults: dict) -> tuple[Any, list[dict[str, Any]]]:
    """A Map worker's event without its items that fail under a per-item fault (transient,
    permanent, fatal), and their ``batchItemFailures`` entries (fanout_runtime.events): the
    function runs the other items only, and the engine adds the failed ones to its answer."""
    if not item_faults or not isinstance(event, dict) or not isinstance(event.get("items"), list) or "task" in event:
        return event, []
    attempt = event.get("attempt") if isinstance(event.get("attempt"), int) else 0
    kept, failures = [], []
    for entry in event["items"]:
        index = entry.get("index") if isinstance(entry, dict) else None
        fault = item_faults.get(index) if isinstance(index, int) else None
        error = _fault_error(fault, f"item {index}", attempt) if fault and fault.mode in PER_ITEM_MODES else None
        if error is None:
            kept.append(entry)
        else:
            failures.append({"itemIndex": index, "error": type(error).__name__, "cause": str(error)})
    return ({**event, "items": kept} if failures else event), failures


def merge_item_failures(result: Any, failures: list[dict[str, Any]]) -> Any:
    """The function's answer with the injected per-item failures added to its batchItemFailures."""
    if not failures:
        return result
    answer = dict(result) if isinstance(result, dict) else {"processed": result}
    reported = answer.get("batchItemFailures")
    answer["batchItemFailures"] = (list(reported) if isinstance(reported, list) else []) + failures
    return answer


class RuntimeReported(Exception):
    """An error the Lambda runtime itself reports (its payload as the runtime words it)."""

    def __init__(self, payload: dict[str, Any]):
        super().__init__(payload.get("errorMessage"))
        self.payload = payload


METRICS_NAMESPACE_ENV = "POWERTOOLS_METRICS_NAMESPACE"


_METRICS_SEEN: dict[str, Any] = {"modules": -1, "objects": []}


def _handler_metrics() -> list[Any]:
    """The Powertools Metrics objects created at import by the modules run in this process from
    the handlers' folder (the kit's ``fanout_kit.shared.observability``, this app's example tasks'
    ``tasks.handler``), found again only when more modules were loaded."""
    if _METRICS_SEEN["modules"] == len(sys.modules):
        return _METRICS_SEEN["objects"]
    metrics_type = getattr(sys.modules.get("aws_lambda_powertools.metrics.metrics"), "Metrics", None)
    found: list[Any] = []
    if metrics_type is not None:
        for name, module in list(sys.modules.items()):
            path = getattr(module, "__file__", None) or ""
            if name != "fanout_kit.shared.observability" and not is_handler_file(path):
                continue
            for value in list(vars(module).values()):
                if isinstance(value, metrics_type) and not any(value is seen for seen in found):
                    found.append(value)
    _METRICS_SEEN.update(modules=len(sys.modules), objects=found)
    return found


def metrics_namespaces() -> list[tuple[Any, str | None]]:
    """The handlers' Metrics objects with their namespaces (to put back after a run)."""
    return [(metrics, metrics.namespace) for metrics in _handler_metrics()]


def restore_metrics_namespaces(saved: list[tuple[Any, str | None]] | None) -> None:
    for metrics, namespace in saved or []:
        metrics.namespace = namespace


def use_metrics_namespace(namespace: str | None) -> None:
    """The handlers' Powertools Metrics objects take this invocation's function's namespace, as a
    fresh Lambda environment would read it from the function's own variables at import (in this
    process they were created once, possibly before the stack's variables were set). A function
    without one fails its metrics flush (SchemaValidationError), as on AWS."""
    for metrics in _handler_metrics():
        if metrics.namespace != namespace:
            metrics.namespace = namespace


# This repository's own app's handlers (tasks.*, map_item_worker), when the engine runs from it
_APP_LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"
_KIT_HANDLER_FILES = frozenset(str(kit_handler_file(name)) for name in KIT_HANDLERS)


def is_handler_file(path: str) -> bool:
    """Whether ``path`` is the file of a handler module run in this process: one of the kit's
    (``KIT_HANDLERS``) or of this repository's app (``lambdas/``)."""
    return path in _KIT_HANDLER_FILES or path.startswith(f"{_APP_LAMBDAS}/")


def is_kit_handler(handler: str) -> bool:
    """Whether ``handler`` names one of the kit's handler modules."""
    return handler.rpartition(".")[0] in KIT_HANDLERS


@functools.cache
def is_kit_code(code_dir: Path, handler: str) -> bool:
    """Whether a function's code asset holds the kit's own handler (the same file as the kit's)."""
    module_name = handler.rpartition(".")[0]
    if module_name not in KIT_HANDLERS:
        return False
    mine = code_dir / f"{module_name}.py"
    return mine.is_file() and mine.read_bytes() == kit_handler_file(module_name).read_bytes()


@functools.cache
def runs_in_process(code_dir: Path, handler: str) -> bool:
    """Whether the engine runs this function in its own process rather than in a sandbox: the
    kit's handlers, and this repository's own app's (the same file as in ``lambdas/``: the
    reference app whose faults the tests inject in-process)."""
    if is_kit_code(code_dir, handler):
        return True
    relative = Path(*handler.rpartition(".")[0].split(".")).with_suffix(".py")
    mine, ours = code_dir / relative, _APP_LAMBDAS / relative
    return mine.is_file() and ours.is_file() and mine.read_bytes() == ours.read_bytes()


@functools.cache
def _importable_as(module_name: str, code_dir: Path) -> bool:
    """Whether ``module_name`` imports here by its name from the same file as in ``code_dir`` (an
    asset's directory is named by its content's hash: its answer never changes)."""
    loaded = sys.modules.get(module_name)
    origin = getattr(loaded, "__file__", None) if loaded is not None else None
    if origin is None:
        try:
            spec = importlib.util.find_spec(module_name)
        except (ImportError, ValueError):
            return False
        origin = spec.origin if spec is not None else None
    mine = code_dir.joinpath(*module_name.split(".")).with_suffix(".py")
    return bool(origin) and Path(origin).is_file() and mine.is_file() and Path(origin).read_bytes() == mine.read_bytes()


class LambdaServiceError(JsonRESTError):
    """A Lambda API error (HTTP 5xx/429), as Step Functions sees from a failing Invoke call."""

    def __init__(self, code: str, message: str, status: int = 500):
        super().__init__(code, message)
        self.code = status


@dataclass
class LocalFunction:
    name: str
    handler: str  # "module.function", as the function's Handler names it
    memory_mb: int = 256
    timeout_s: int = 30
    code_dir: Path | None = None  # the function's synthesized code asset (None: inline code)
    sandboxed: bool = False  # the app's own function: run in its own process (fanout_kit/local/sandbox.py)
    environment: dict[str, str] | None = None  # its template's variables (None: not from a template)


@dataclass
class InvocationRecord:
    function: str
    event: Any
    error_type: str | None
    seconds: float = 0.0  # the handler's duration (a hang: the function's timeout), for metering


class LambdaContext:
    """The attributes of the Lambda context object the handlers (and Powertools) read."""

    def __init__(self, fn: LocalFunction, region: str, account: str):
        self.function_name = fn.name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:{account}:function:{fn.name}"
        self.memory_limit_in_mb = fn.memory_mb
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{fn.name}"
        self.log_stream_name = "local"
        self._timeout_ms = fn.timeout_s * 1000

    def get_remaining_time_in_millis(self) -> int:
        return self._timeout_ms


@dataclass
class LambdaRouter:
    """Which handler serves which function name, plus the service faults still to inject."""

    region: str = "eu-west-1"
    account: str = "123456789012"
    functions: dict[str, LocalFunction] = field(default_factory=dict)
    # function name -> Lambda API error codes to answer with, one per invoke, in order. A fault
    # "before" rejects the invoke (the handler does not run); "after" runs the handler and then
    # loses its response (the caller sees the error although the work was done).
    service_faults: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    invocations: list[InvocationRecord] = field(default_factory=list)
    on_invoke: Callable[[str, Any], None] | None = None
    # (function, event, result): called after a handler returned (tests change the world there)
    after_invoke: Callable[[str, Any, Any], None] | None = None
    # (event, seconds): a function hung until its timeout; the engine charges the child's clock
    on_hang: Callable[[Any, float], None] | None = None
    # (event, seconds): RetryFailedItems waits before a retry round; the engine's retry clock
    on_backoff: Callable[[Any, float], None] | None = None
    # Faults of the app's own functions, injected here (fanout run --app --fail / --fail-item):
    # task name -> InjectedFault, Map item index -> InjectedFault
    sandboxes: Any = None  # fanout_kit.local.sandbox.Sandboxes of the app's own functions
    task_faults: dict[str, InjectedFault] = field(default_factory=dict)
    item_faults: dict[int, InjectedFault] = field(default_factory=dict)
    # the error name of a function Lambda stopped (timeout, out of memory, crash): RUNTIME_NAMES
    # (Sandbox.Timedout, ...) or DOCUMENTED_NAME (Lambda.Unknown for all three)
    unhandled_errors: str = RUNTIME_NAMES
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def register(self, fn: LocalFunction) -> None:
        self.functions[fn.name] = fn

    def count(self, function: str) -> int:
        return Counter(r.function for r in self.invocations)[function]

    def _handler(self, fn: LocalFunction) -> Callable[[Any, Any], Any]:
        module_name, _, attr = fn.handler.rpartition(".")
        if is_kit_handler(fn.handler) and (fn.code_dir is None or is_kit_code(fn.code_dir, fn.handler)):
            return getattr(kit_module(fn.handler), attr)
        if fn.code_dir is None or _importable_as(module_name, fn.code_dir):
            # An app's handler importable here by its one name (this repository's lambdas/ is an
            # import root under pytest), the same file as its code asset's
            return getattr(importlib.import_module(module_name), attr)
        return getattr(asset_module(module_name, fn.code_dir), attr)

    def invoke(self, function_name: str, body: Any, response_headers: dict) -> bytes:
        name = function_name.split(":function:")[-1].split(":")[0]
        fn = self.functions.get(name)
        if fn is None:
            raise LambdaServiceError(
                "ResourceNotFoundException", f"Function not found: {function_name}", 404
            )
        event = json.loads(body) if body else {}
        with self._lock:
            faults = self.service_faults.get(name)
            fault, when = faults.pop(0) if faults else (None, None)
        if self.on_invoke:
            self.on_invoke(name, event)
        if fault and when == "before":
            with self._lock:
                self.invocations.append(InvocationRecord(name, event, f"Lambda.{fault}"))
            raise _service_error(fault)
        context = LambdaContext(fn, self.region, self.account)
        running = _RUNNING.__dict__.setdefault("stack", [])
        running.append(name)
        events = _RUNNING.__dict__.setdefault("events", [])
        events.append(event)
        began = time.perf_counter()
        # Map item faults belong to the Map's worker. RetryFailedItems is invoked with the same
        # {"items": [...]} shape (the child's whole batch, to check the worker's batchItemFailures
        # against): injecting there would drop the failed item from the batch it checks and answer
        # for it (InvalidBatchItemFailures); its own worker invocations are injected as the worker's.
        item_faults = {} if _receives_batch_only(fn) else self.item_faults
        try:
            injected = injected_failure(event, self.task_faults, item_faults)
            if injected is not None:
                raise injected
            # the worker runs its other items (the caller's event and the record keep them all)
            run_event, item_failures = injected_item_failures(event, item_faults)
            if fn.sandboxed:  # the app's own function: its own process (fanout_kit/local/sandbox.py)
                payload, runtime_error = self.sandboxes.invoke(name, run_event, context)
                if runtime_error is not None:
                    raise RuntimeReported(runtime_error)
                result = merge_item_failures(json.loads(payload), item_failures)
                payload = json.dumps(result)
            else:
                handler = self._handler(fn)
                if fn.environment is not None:
                    use_metrics_namespace(fn.environment.get(METRICS_NAMESPACE_ENV))
                result = merge_item_failures(handler(run_event, context), item_failures)
                try:
                    payload = json.dumps(result)
                except (TypeError, ValueError) as exc:  # what the Python runtime answers
                    raise RuntimeReported({"errorMessage": f"Unable to marshal response: {exc}",
                                           "errorType": "Runtime.MarshalError",
                                           "requestId": context.aws_request_id, "stackTrace": []}) from None
            error_type = None
        except RuntimeReported as reported:
            error_type = reported.payload["errorType"]
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = json.dumps(reported.payload)
        except FunctionStopped as stopped:
            # What Lambda answers when it stops a function (timeout, out of memory, runtime exit).
            # No real waiting for a timeout: the Express child's clock is charged the function's
            # timeout instead.
            if isinstance(stopped, FunctionTimedOut) and self.on_hang:
                self.on_hang(event, float(fn.timeout_s))
            if isinstance(stopped, FunctionTimedOut):
                began -= float(fn.timeout_s)  # Lambda bills a timed-out invocation to its timeout
            error_type = stopped.error_type if self.unhandled_errors == RUNTIME_NAMES else DOCUMENTED_NAME
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = json.dumps({"errorType": error_type, "errorMessage": stopped.message(fn)})
        except Exception as exc:  # the runtime reports any unhandled exception this way
            error_type = type(exc).__name__
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = json.dumps(
                {
                    "errorMessage": str(exc),
                    "errorType": error_type,
                    "requestId": context.aws_request_id,
                    "stackTrace": traceback.format_tb(exc.__traceback__),
                }
            )
        finally:
            running.pop()
            events.pop()
        seconds = time.perf_counter() - began
        if error_type is None and self.after_invoke:  # (outside the function: not its own calls)
            self.after_invoke(name, event, result)
        with self._lock:
            self.invocations.append(InvocationRecord(name, event, error_type, seconds))
        if fault:  # "after": the work happened, the response is lost
            raise _service_error(fault)
        return payload.encode()


def _service_error(code: str) -> LambdaServiceError:
    status = 429 if code == "TooManyRequestsException" else 500
    return LambdaServiceError(code, f"injected Lambda service fault {code}", status)


_RUNNING = threading.local()


def current_function() -> str | None:
    """The function whose handler this thread is running (innermost), or None."""
    stack = getattr(_RUNNING, "stack", None)
    return stack[-1] if stack else None


_ACTIVE: list[LambdaRouter] = []
_ORIGINAL_INVOKE = LambdaSimpleBackend.invoke


def _routed_invoke(self, function_name, qualifier, body, headers, response_headers):
    if not _ACTIVE:
        return _ORIGINAL_INVOKE(self, function_name, qualifier, body, headers, response_headers)
    payload = _ACTIVE[-1].invoke(function_name, body, response_headers)
    response_headers["Content-Length"] = str(len(payload))
    return payload


def check_moto_version() -> None:
    if moto.__version__ != MOTO_VERSION:
        raise RuntimeError(
            f"fanout_kit.local.moto_lambda was written for moto {MOTO_VERSION}, found "
            f"{moto.__version__}: re-check LambdaSimpleBackend.invoke and the Step Functions "
            "interpreter's error mapping, then update MOTO_VERSION (tests/test_moto_adapter.py)"
        )


class routed_lambdas:
    """Context manager: while active, moto's Lambda Invoke runs ``router``'s handlers."""

    def __init__(self, router: LambdaRouter):
        self.router = router

    def __enter__(self) -> LambdaRouter:
        check_moto_version()
        LambdaSimpleBackend.invoke = _routed_invoke
        _ACTIVE.append(self.router)
        self._worker = _worker_module()
        self._saved = {name: getattr(self._worker, name) for name in ("hang", "exhaust_memory", "crash")}
        self._worker.hang = _local_hang
        self._worker.exhaust_memory = _local_exhaust_memory
        self._worker.crash = _local_crash
        self._retry_module = _retry_module()
        self._saved_backoff = self._retry_module.backoff_sleep
        router = self.router

        def backoff_sleep(seconds: float) -> None:
            stack = getattr(_RUNNING, "events", None)
            if router.on_backoff is not None:
                router.on_backoff(stack[-1] if stack else None, seconds)
            else:
                time.sleep(seconds)

        self._retry_module.backoff_sleep = backoff_sleep
        return self.router

    def __exit__(self, *exc: Any) -> None:
        _ACTIVE.remove(self.router)
        for name, original in self._saved.items():
            setattr(self._worker, name, original)
        self._retry_module.backoff_sleep = self._saved_backoff
        if not _ACTIVE:
            LambdaSimpleBackend.invoke = _ORIGINAL_INVOKE


RETRY_FAILED_ITEMS_MODULE = "retry_failed_items"  # the kit's RetryFailedItems handler module


def _receives_batch_only(fn: LocalFunction) -> bool:
    """Whether ``fn`` is the kit's RetryFailedItems (run in this process, by its module name as
    ``LambdaRouter._handler`` loads the kit's handlers): it receives a Map child's batch but is not
    the worker that processes its items, so item faults are not injected into it."""
    return not fn.sandboxed and fn.handler.rpartition(".")[0] == RETRY_FAILED_ITEMS_MODULE


def _retry_module():
    """RetryFailedItems' handler module (its backoff waits go to the engine's retry clock), the
    one the router runs (``kit_module``)."""
    return kit_module(f"{RETRY_FAILED_ITEMS_MODULE}.handler")


def _worker_module():
    """The fault switch's module (``fanout_runtime.faults``), under the name the handlers import it by."""
    return importlib.import_module("fanout_runtime.faults")

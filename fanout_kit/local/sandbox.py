"""The app's own Lambda functions, run locally as strictly as Lambda runs them.

Each function of the app (a function whose code asset is not the kit's) runs in execution
environments of its own: ``python -I -S fanout_kit/local/sandbox_runner.py`` processes, each serving
one invocation at a time and reused while warm, as Lambda reuses an execution environment
(a new one is started when all are busy, as Lambda scales out for concurrent invocations).
In each:

* the environment is exactly the function's template ``Environment.Variables`` plus what the
  Lambda runtime defines ("Defined runtime environment variables", AWS Lambda Developer Guide,
  configuration-envvars.html: _HANDLER, AWS_REGION, AWS_DEFAULT_REGION, AWS_EXECUTION_ENV,
  AWS_LAMBDA_FUNCTION_NAME / _MEMORY_SIZE / _VERSION, AWS_LAMBDA_INITIALIZATION_TYPE,
  AWS_LAMBDA_LOG_GROUP_NAME / _STREAM_NAME, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY /
  AWS_SESSION_TOKEN, LAMBDA_TASK_ROOT, LAMBDA_RUNTIME_DIR, TZ, LANG, PATH, and _X_AMZN_TRACE_ID per
  invocation): never the caller's shell. The credentials are placeholders and AWS_ENDPOINT_URL
  points at a closed local port, so an AWS call from the function fails at once locally instead of
  reaching AWS (the engine's AWS stand-ins live in the engine's process);
* ``sys.path`` is the code asset (LAMBDA_TASK_ROOT), then its layers (``python/`` and
  ``python/lib/python3.X/site-packages`` of a layer asset, as Lambda extracts layers to /opt),
  then the runtime's own libraries (boto3, botocore and their dependencies, which the Python
  runtime includes), then the standard library: a module of the kit that is not in the asset or a
  layer is ``Runtime.ImportModuleError`` locally, as on AWS;
* a result that is not JSON is ``Runtime.MarshalError``; an exception is reported by its class
  name; a function that outlives its timeout is stopped: ``Sandbox.Timedout``;
* the handler's output is that invocation's log, between START / END / REPORT lines
  (``InvocationLog``); nothing of another function's log context can reach it.

Layers by ARN: the Powertools layer (publisher account 017000801446) is provided from the
installed aws-lambda-powertools; any other layer that is not an asset of the app is refused when
the stack is deployed locally (one line naming it), rather than run without it.
"""

from __future__ import annotations

import importlib.util
import json
import select
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RUNNER = Path(__file__).with_name("sandbox_runner.py")
POWERTOOLS_ACCOUNT = "017000801446"
# What the Lambda Python runtime itself provides on the path (the AWS SDK and its dependencies)
RUNTIME_MODULES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six")
POWERTOOLS_MODULES = ("aws_lambda_powertools", "aws_xray_sdk", "wrapt", "typing_extensions", "jsonpath_ng", "ply")
CLOSED_ENDPOINT = "http://127.0.0.1:9"  # the discard port: nothing listens, a call fails at once
START_TIMEOUT_SECONDS = 30.0


class SandboxError(RuntimeError):
    """The local sandbox cannot run a function as deployed (e.g. a layer it cannot provide)."""


@dataclass
class InvocationLog:
    function: str
    request_id: str
    text: str  # START ... END ... REPORT, the handler's output between


@dataclass
class SandboxSpec:
    """What a function's execution environment is made of, from its synthesized template."""

    name: str
    handler: str
    code_dir: Path
    environment: dict[str, str]
    layer_paths: list[Path] = field(default_factory=list)
    memory_mb: int = 128
    timeout_s: float = 3


def _module_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin in (None, "namespace"):
        if spec is not None and spec.submodule_search_locations:
            return Path(next(iter(spec.submodule_search_locations)))
        return None
    origin = Path(spec.origin)
    return origin.parent if origin.name == "__init__.py" else origin


def linked_modules(folder: Path, names: tuple[str, ...]) -> Path:
    """A folder holding links to the host's installed ``names`` (a stand-in for what the runtime
    or a public layer provides)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = _module_dir(name)
        if source is None:
            continue
        link = folder / source.name
        if not link.exists():
            link.symlink_to(source, target_is_directory=source.is_dir())
    return folder


def layer_paths(layer_refs: list[Any], template: Mapping[str, Any], outdir: Path, resolve: Any,
                provided: Path, function: str) -> list[Path]:
    """The sys.path entries a function's layers give it, in order."""
    python = f"python{sys.version_info.major}.{sys.version_info.minor}"
    paths: list[Path] = []
    for ref in layer_refs:
        logical_id = ref.get("Ref") if isinstance(ref, Mapping) else None
        resource = template["Resources"].get(logical_id) if logical_id else None
        if resource and resource["Type"] == "AWS::Lambda::LayerVersion":
            key = resource["Properties"].get("Content", {}).get("S3Key", "")
            folder = outdir / f"asset.{key.removesuffix('.zip')}" if isinstance(key, str) else None
            if folder is None or not folder.is_dir():
                raise SandboxError(f"function {function}: layer {logical_id} has no asset folder in the assembly")
            paths += [folder / "python", folder / "python" / "lib" / python / "site-packages"]
            continue
        arn = str(resolve(ref))
        if f":{POWERTOOLS_ACCOUNT}:layer:" in arn:
            paths.append(provided)
            continue
        raise SandboxError(
            f"function {function}: layer {arn} is not available locally (only layers of the app's own "
            "assets and the Powertools layer are); the local run refuses to run the function without it"
        )
    return paths


class _Worker:
    """One execution environment: a runner process and its log file."""

    def __init__(self, spec: SandboxSpec, runtime_dir: Path, log_dir: Path, region: str, account: str):
        self.spec = spec
        self.log_path = log_dir / f"{spec.name}-{uuid.uuid4().hex[:8]}.log"
        self.log_path.touch()
        self.offset = 0
        env = runtime_environment(spec, runtime_dir, region, account)
        env["_FANOUT_SANDBOX_LOG"] = str(self.log_path)
        paths = [str(spec.code_dir), *(str(p) for p in spec.layer_paths), str(runtime_dir)]
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(RUNNER), spec.handler, *paths],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=spec.code_dir, env=env,
        )

    def wait_ready(self, timeout: float) -> None:
        assert self.process.stdout
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else b""
        if not line:
            self.stop()
            raise SandboxError(f"function {self.spec.name}: its local execution environment did not start "
                               f"within {timeout:g} s: {self.read_log()[-500:]}")

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """The runner's answer, or None when the function ran past ``timeout`` (then stopped)."""
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            self.stop()
            return None
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            return {"payload": None, "error": {
                "errorType": "Runtime.ExitError",
                "errorMessage": f"RequestId: {request['context']['aws_request_id']} Error: Runtime exited with error: exit status {code}"}}
        return json.loads(line)

    def read_log(self) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        self.offset += len(data)
        return data.decode(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream:
                stream.close()


def runtime_environment(spec: SandboxSpec, runtime_dir: Path, region: str, account: str) -> dict[str, str]:
    """The function's template variables plus the Lambda runtime's own (see the module doc)."""
    env = {str(k): str(v) for k, v in spec.environment.items()}
    env.update({
        "_HANDLER": spec.handler,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13",
        "AWS_LAMBDA_FUNCTION_NAME": spec.name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "local",
        "AWS_ACCESS_KEY_ID": "local-sandbox",
        "AWS_SECRET_ACCESS_KEY": "local-sandbox",
        "AWS_SESSION_TOKEN": "local-sandbox",
        "AWS_ENDPOINT_URL": CLOSED_ENDPOINT,
        "LAMBDA_TASK_ROOT": str(spec.code_dir),
        "LAMBDA_RUNTIME_DIR": str(runtime_dir),
        "TZ": ":UTC",
        "LANG": "en_US.UTF-8",
        "PATH": "/usr/local/bin:/usr/bin/:/bin",
    })
    return env


class Sandboxes:
    """The execution environments of the app's functions (``invoke``); ``close()`` stops them."""

    def __init__(self, region: str, account: str):
        self.region = region
        self.account = account
        self._tmp = tempfile.TemporaryDirectory(prefix="fanout-sandbox-")
        self.root = Path(self._tmp.name)
        self.runtime_dir = linked_modules(self.root / "runtime", RUNTIME_MODULES)
        self.powertools_dir = self.root / "powertools-layer"
        self.specs: dict[str, SandboxSpec] = {}
        self._idle: dict[str, list[_Worker]] = {}
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self.logs: list[InvocationLog] = []
        self.started = 0  # execution environments started (cold starts)

    def provided_powertools(self) -> Path:
        return linked_modules(self.powertools_dir, POWERTOOLS_MODULES)

    def register(self, spec: SandboxSpec) -> None:
        self.specs[spec.name] = spec

    def _take(self, name: str) -> _Worker:
        with self._lock:
            idle = self._idle.setdefault(name, [])
            if idle:
                return idle.pop()
            self.started += 1
        worker = _Worker(self.specs[name], self.runtime_dir, self.root, self.region, self.account)
        with self._lock:
            self._all.append(worker)
        worker.wait_ready(START_TIMEOUT_SECONDS)
        return worker

    def invoke(self, name: str, event: Any, context: Any) -> tuple[str | None, dict[str, Any] | None]:
        """(JSON payload, None) or (None, the runtime's error payload)."""
        spec = self.specs[name]
        worker = self._take(name)
        request_id = context.aws_request_id
        request = {
            "event": event,
            "trace_id": f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=0",
            "context": {
                "function_name": spec.name,
                "invoked_function_arn": context.invoked_function_arn,
                "memory_limit_in_mb": spec.memory_mb,
                "aws_request_id": request_id,
                "log_group_name": f"/aws/lambda/{spec.name}",
                "log_stream_name": "local",
                "timeout_ms": int(spec.timeout_s * 1000),
            },
        }
        started = time.monotonic()
        answer = worker.call(request, spec.timeout_s)
        duration_ms = (time.monotonic() - started) * 1000
        text = worker.read_log()
        if answer is None or duration_ms > spec.timeout_s * 1000:
            if answer is not None:  # it returned, but later than its timeout allows
                worker.stop()
            answer = {"payload": None, "error": {
                "errorType": "Sandbox.Timedout",
                "errorMessage": f"RequestId: {request_id} Error: Task timed out after {spec.timeout_s:.2f} seconds"}}
        elif worker.process.poll() is None:
            with self._lock:
                self._idle.setdefault(name, []).append(worker)
        log = (f"START RequestId: {request_id} Version: $LATEST\n{text}"
               f"END RequestId: {request_id}\n"
               f"REPORT RequestId: {request_id}\tDuration: {duration_ms:.2f} ms\tMemory Size: {spec.memory_mb} MB\n")
        with self._lock:
            self.logs.append(InvocationLog(name, request_id, log))
        return answer.get("payload"), answer.get("error")

    def close(self) -> None:
        for worker in self._all:
            worker.stop()
        self._tmp.cleanup()

"""The inside of a local Lambda execution environment (``fanout_kit/local/sandbox.py`` starts it as
``python -I -S sandbox_runner.py``): no site-packages, no user site, no PYTHON* variables, no
working directory on the path. It puts only the function's code asset, its layers and the
runtime's libraries on ``sys.path`` (argv), imports the handler once (Lambda's init), then answers
one invocation per request line on its protocol pipe, as the Lambda Python runtime reports them:
an unhandled exception by its class name, a module that cannot be imported as
``Runtime.ImportModuleError``, a missing handler as ``Runtime.HandlerNotFound``, a result that is
not JSON as ``Runtime.MarshalError``. The handler's stdout/stderr are the invocation's log.

Standard library only: it must run with nothing of the kit on its path."""

import importlib
import json
import os
import sys
import time
import traceback

LOG_SEPARATOR = "\x1e"  # record separator: never in a JSON text


class _Context:
    def __init__(self, data):
        self.function_name = data["function_name"]
        self.function_version = "$LATEST"
        self.invoked_function_arn = data["invoked_function_arn"]
        self.memory_limit_in_mb = data["memory_limit_in_mb"]
        self.aws_request_id = data["aws_request_id"]
        self.log_group_name = data["log_group_name"]
        self.log_stream_name = data["log_stream_name"]
        self._deadline = time.monotonic() + data["timeout_ms"] / 1000

    def get_remaining_time_in_millis(self):
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _init(handler_spec):
    """(handler, None) or (None, error payload): Lambda's init phase."""
    module_name, _, attr = handler_spec.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # as the runtime words it (awslambdaric bootstrap)
        return None, {"errorMessage": f"Unable to import module '{module_name}': {exc}",
                      "errorType": "Runtime.ImportModuleError", "requestId": "", "stackTrace": []}
    handler = getattr(module, attr, None)
    if handler is None:
        return None, {"errorMessage": f"Handler '{attr}' missing on module '{module_name}'",
                      "errorType": "Runtime.HandlerNotFound", "requestId": "", "stackTrace": []}
    return handler, None


def main():
    handler_spec, paths = sys.argv[1], sys.argv[2:]
    sys.path[:0] = paths
    protocol_in = os.fdopen(os.dup(0), "rb")
    protocol_out = os.fdopen(os.dup(1), "wb", buffering=0)
    log_path = os.environ.pop("_FANOUT_SANDBOX_LOG")
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the handler reads nothing from stdin
    os.close(null)
    handler, init_error = _init(handler_spec)
    protocol_out.write(b'{"ready": true}\n')  # init done (Lambda's init phase has its own limit)
    for line in protocol_in:
        request = json.loads(line)
        os.environ["_X_AMZN_TRACE_ID"] = request["trace_id"]
        context = _Context(request["context"])
        error = init_error
        payload = None
        if error is None:
            try:
                result = handler(request["event"], context)
            except Exception as exc:
                error = {"errorMessage": str(exc), "errorType": type(exc).__name__,
                         "requestId": context.aws_request_id, "stackTrace": traceback.format_tb(exc.__traceback__)}
            else:
                try:
                    payload = json.dumps(result)
                except (TypeError, ValueError) as exc:
                    error = {"errorMessage": f"Unable to marshal response: {exc}", "errorType": "Runtime.MarshalError",
                             "requestId": context.aws_request_id, "stackTrace": []}
        sys.stdout.flush()
        sys.stderr.flush()
        answer = {"payload": payload, "error": error}
        protocol_out.write(json.dumps(answer).encode() + b"\n")


if __name__ == "__main__":
    main()

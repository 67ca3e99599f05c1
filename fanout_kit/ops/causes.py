"""An execution's or a Lambda function's error and cause as one line of text (no printing here:
the command line's views print them)."""

from __future__ import annotations

import json
from typing import Any


def cause_message(cause: Any) -> Any:
    """The errorMessage inside a Lambda error's JSON cause (``{"errorMessage", "errorType",
    "requestId", "stackTrace"}``), else the cause as it is."""
    try:
        parsed = json.loads(cause)
    except (TypeError, ValueError):
        return cause
    return parsed.get("errorMessage", cause) if isinstance(parsed, dict) else cause


def error_line(error: str | None, cause: str | None) -> str:
    """An execution's error and cause as one line: ``InvalidInput: tasks.Foo: unknown task ...``."""
    message = " ".join(str(cause_message(cause) or "").split())  # one line, whatever the cause held
    return f"{error}: {message}" if message else str(error)

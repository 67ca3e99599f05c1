"""What the execution input of every workflow shares (pure): the batch id's and the redriven
execution ARN's formats, and the JSON type names the validation messages use."""

from __future__ import annotations

import re
from typing import Any

BATCH_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,79}$")
EXECUTION_ARN_PATTERN = re.compile(r"^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:execution:[^:]+:[^:]+$")


def json_type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number" if isinstance(value, (int, float)) else type(value).__name__
    )

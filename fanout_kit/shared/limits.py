"""The payload caps of the kit, in one place (pure constants; the Lambdas, the CLI, the construct
settings and the static size check ``fanout_kit/shared/payload_budget.py`` import them).

AWS limits every state's input and output, a task's parameters and a connector's output to
262,144 bytes of UTF-8 JSON ("Maximum input or output size for a task, state, or execution:
256 KiB", Step Functions service quotas; ``StateEnteredEventDetails.input``,
``StateExitedEventDetails.output`` and ``TaskScheduledEventDetails.parameters``: "Maximum length of
262144 ... bytes in UTF-8 encoding", API reference). Past it a state fails with
``States.DataLimitExceeded``, a terminal error that ``States.ALL`` does not catch ("Handling errors
in Step Functions workflows"): the whole execution fails, its Parallel siblings are cancelled and
no DLQ message is sent. So the kit's caps are chosen so that no state can reach it, failures
included: a Catch merges the error into the state, and AWS allows a ``Cause`` of up to 32,768
characters and an ``Error`` of up to 256 (``TaskFailedEventDetails``, API reference).
``python -m fanout_kit.cli.budget`` shows the worst case of every state computed from these caps.
"""

from __future__ import annotations

STATE_PAYLOAD_LIMIT_BYTES = 256 * 1024  # 262,144: AWS's limit on every state's input and output

# The error a Catch merges into the state: Error up to 256 characters, Cause up to 32,768. In
# the state's JSON text a character costs at most 3 bytes: an ASCII character at most 2 (`"` and
# `\` are escaped; JSON-producing runtimes, Python's included, escape control characters in
# their cause) and any other UTF-16 unit at most 3 bytes of UTF-8 (a surrogate pair: 4 for 2).
BYTES_PER_CHARACTER_WORST = 3
CAUSE_MAX_CHARACTERS = 32_768
ERROR_MAX_CHARACTERS = 256
CAUSE_MAX_BYTES = CAUSE_MAX_CHARACTERS * BYTES_PER_CHARACTER_WORST  # 98,304
ERROR_MAX_BYTES = ERROR_MAX_CHARACTERS * BYTES_PER_CHARACTER_WORST  # 768

# The execution input of the Parallel workflow (all task payloads together), as JSON bytes. The
# worst state is a failed task's DLQ send (its payload, a full-size Cause, the ids): with the
# kit's definition, caps up to 159,571 bytes fit (``python -m fanout_kit.cli.budget`` prints the largest);
# 150,000 keeps about 9.5 KB for fields added to the messages.
PARALLEL_INPUT_MAX_BYTES = 150_000
# The execution input of the Map workflow (inline items or a manifest reference): PrepareBatch
# receives it wrapped with the execution name, and nothing after PrepareBatch carries it.
MAP_INPUT_MAX_BYTES = 256_000
# What a child task's function may return (JSON bytes): part of your functions' contract, so it is
# defined in fanout_runtime.events (the runtime layer) and used here by that one name.
from fanout_runtime.events import TASK_OUTPUT_MAX_BYTES  # noqa: E402, F401


def payload_size(value: object) -> int:
    """Bytes of ``value`` as Step Functions holds it: compact JSON text in UTF-8 (how the
    history shows state input and output), which is what the caps are compared with."""
    import json

    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def over_cap_message(what: str, size: int, cap: int, fix: str) -> str:
    """One line: ``what: N bytes of JSON, over the cap of M bytes; fix``."""
    return f"{what}: {size:,} bytes of JSON, over the {cap:,}-byte cap; {fix}"

# The completion ledger's sharded counter: the batch item and K shards in one BatchGetItem (100
# keys at most); the ledger and its settings (fanout_kit.shared.settings.LedgerSettings) check it.
MAX_COUNTER_SHARDS = 99

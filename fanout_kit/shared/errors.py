"""The kit's one kind of user-facing error: the command line prints it as one line (``fanout: ...``),
with an exit code (2 for usage: a bad flag, input file, environment or cdk.json). No traceback
reaches the user. Raised by the ops, the local engine and the command line alike."""

from __future__ import annotations


class CliError(Exception):
    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code

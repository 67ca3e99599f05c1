"""The ledger consumers run each child's work by the app's processing function (CHILD_FUNCTION_NAME):
one synchronous invoke per child attempt, a function error fails the attempt (the message is retried)."""

from __future__ import annotations

import io
import json

import pytest

from fanout_kit.patterns.completion_ledger import runtime as ledger_runtime
from fanout_kit.patterns.completion_ledger.runtime import ChildMessage, ChildWorkFailed, do_child_work, invoke_processing_function


class RecordingLambda:
    def __init__(self, *answers: tuple[bytes, str | None]):
        self.answers = list(answers)
        self.calls: list[dict] = []

    def invoke(self, **kwargs):
        self.calls.append({**kwargs, "Payload": json.loads(kwargs["Payload"])})
        body, error = self.answers.pop(0)
        return {"Payload": io.BytesIO(body), **({"FunctionError": error} if error else {})}


MESSAGE = ChildMessage.parse({"batchId": "b-1", "childId": "line-7", "total": 3, "payload": {"sku": "A"}})


def test_the_processing_function_gets_the_child_and_its_attempt():
    client = RecordingLambda((b'{"ok": true}', None))
    assert invoke_processing_function(client, "process", MESSAGE, attempt=2) == {"ok": True}
    (call,) = client.calls
    assert call["FunctionName"] == "process" and call["InvocationType"] == "RequestResponse"
    assert call["Payload"] == {"batchId": "b-1", "childId": "line-7", "payload": {"sku": "A"}, "attempt": 2}


def test_a_function_error_fails_the_childs_attempt():
    client = RecordingLambda((b'{"errorType": "ValueError"}', "Unhandled"))
    with pytest.raises(ChildWorkFailed, match=r"child line-7 of batch b-1: process failed: .*ValueError"):
        invoke_processing_function(client, "process", MESSAGE, attempt=0)


def test_without_a_processing_function_the_example_work_runs(monkeypatch):
    monkeypatch.delenv("CHILD_FUNCTION_NAME", raising=False)
    assert do_child_work(MESSAGE, 0) == {"childId": "line-7", "processed": True}
    client = RecordingLambda((b"null", None))
    monkeypatch.setenv("CHILD_FUNCTION_NAME", "process")
    monkeypatch.setattr(ledger_runtime, "lambda_client", lambda: client)
    assert do_child_work(MESSAGE, 1) is None and client.calls[0]["Payload"]["attempt"] == 1

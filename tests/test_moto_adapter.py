"""The moto adapter is pinned to the moto it was written for; these tests fail loudly on drift."""

import inspect
import json

import boto3
from botocore.config import Config
import moto
import pytest
from moto import mock_aws
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.stepfunctions.parser.asl.utils.json_path import extract_json

from fanout_kit.local.engine import MOTO_CONFIG
from fanout_kit.local.moto_lambda import (
    MOTO_VERSION,
    LambdaRouter,
    LocalFunction,
    check_moto_version,
    routed_lambdas,
)


def test_installed_moto_is_the_version_the_adapter_was_written_for():
    assert moto.__version__ == MOTO_VERSION, (
        "moto changed: re-check fanout_kit/local/moto_lambda.py and the engine's workarounds"
    )
    check_moto_version()


def test_patched_method_still_has_the_expected_signature():
    params = list(inspect.signature(LambdaSimpleBackend.invoke).parameters)
    assert params == ["self", "function_name", "qualifier", "body", "headers", "response_headers"]


@pytest.fixture
def lambda_client():
    router = LambdaRouter()
    router.register(LocalFunction("Validate", "validate_input.handler"))
    with mock_aws(config=MOTO_CONFIG), routed_lambdas(router):
        yield boto3.client("lambda", region_name="eu-west-1"), router


def test_unhandled_exception_is_answered_like_the_python_runtime(lambda_client, monkeypatch):
    client, router = lambda_client
    monkeypatch.setenv("TASK_NAMES", "A")
    response = client.invoke(FunctionName="Validate", Payload=json.dumps({"input": {"tasks": 1}}))
    assert response["StatusCode"] == 200
    assert response["FunctionError"] == "Unhandled"
    payload = json.loads(response["Payload"].read())
    assert set(payload) == {"errorMessage", "errorType", "requestId", "stackTrace"}
    assert payload["errorType"] == "InvalidInput"
    assert "tasks: must be an object" in payload["errorMessage"]
    assert router.invocations[-1].error_type == "InvalidInput"


def test_success_returns_the_handler_result(lambda_client, monkeypatch):
    client, _ = lambda_client
    monkeypatch.setenv("TASK_NAMES", "A")
    response = client.invoke(FunctionName="Validate", Payload=json.dumps({"input": {"batchId": "b", "tasks": {"A": {}}}}))
    assert "FunctionError" not in response
    assert json.loads(response["Payload"].read()) == {"batchId": "b", "tasks": {"A": {}}, "redriveOf": None}


def test_injected_service_fault_is_a_lambda_api_error(lambda_client):
    _, router = lambda_client
    # no SDK retries here, so the single injected fault reaches the caller
    client = boto3.client("lambda", region_name="eu-west-1", config=Config(retries={"total_max_attempts": 1}))
    router.service_faults["Validate"] = [("ServiceException", "before")]
    with pytest.raises(client.exceptions.ServiceException):
        client.invoke(FunctionName="Validate", Payload="{}")
    assert router.invocations[-1].error_type == "Lambda.ServiceException"


def test_known_gap_index_then_field_path_returns_a_list():
    """moto 5.2.5 evaluates $.a[0].b to [value] (AWS: value). The Parallel workflow keys branch
    results by task name to avoid such paths; when this test fails, moto fixed it."""
    assert extract_json("$.a[0].b", {"a": [{"b": "x"}]}) == ["x"]
    assert extract_json("$.a.b", {"a": {"b": "x"}}) == "x"

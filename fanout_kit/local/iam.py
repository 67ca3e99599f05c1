"""IAM proven by the calls the code makes: record every AWS API call each handler and each state
machine makes in the local engine, map it to its IAM action and resource ARN, and evaluate it
against the synthesized policies of the role that makes it (``fanout_kit/local/iam_policy.py``).

Recording: every boto3/botocore client call in this process goes through
``botocore.client.BaseClient._make_api_call(operation_name, api_params)``; the recorder wraps it
(a class-level hook, so clients the handlers cached before recording started are seen too). Who
makes the call:

* a handler: the Lambda router marks the thread while it runs a function
  (``moto_lambda.current_function``);
* a state machine: the clients moto's Step Functions interpreter creates for its service
  integrations (Lambda Invoke, DynamoDB, SQS, the Distributed Map's S3 ItemReader and
  ResultWriter) are marked when created;
* anything else (the engine, a test, the CLI) is the harness and is not evaluated.

What local runs cannot show (each listed with a reason in ``fanout_kit/local/iam_expected.py``): calls
the AWS services make on the role's behalf outside the SDK (Lambda's log delivery, X-Ray, the SQS
event source mapping's polling, Step Functions' log delivery and the Distributed Map's child
executions, which moto starts internally).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fanout_kit.local.iam_policy import Request, as_list, evaluate, wildcard_match
from fanout_kit.local.template import LOCAL_ACCOUNT, local_names, make_resolver, resources_of_type

STATE_MACHINE = "StateMachine"
# boto3 client name -> IAM service prefix, where they differ.
IAM_PREFIX = {"stepfunctions": "states"}


class UnmappedCall(ValueError):
    """An API call this module cannot map to an IAM action and resource: counted as denied."""


@dataclass(frozen=True)
class Permission:
    action: str
    resource: str


@dataclass(frozen=True)
class Call:
    caller_kind: str  # "function" | "stateMachine"
    caller: str  # function logical id, or "" for the interpreter (resolved per engine)
    service: str  # boto3 client name
    operation: str
    region: str
    permissions: tuple[Permission, ...]
    error: str | None = None  # why it could not be mapped


# ----------------------------------------------------------------- call -> IAM
def _arn(service: str, region: str, account: str, resource: str) -> str:
    return f"arn:aws:{service}:{region}:{account}:{resource}"


def _queue_arn(url: str, region: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 2:
        raise UnmappedCall(f"queue URL {url}: expected /<account>/<name>")
    if host.startswith("sqs.") and host.endswith(".amazonaws.com"):
        region = host.split(".")[1]
    return _arn("sqs", region, segments[-2], segments[-1])


def _function_arn(name: str, qualifier: str | None, region: str, account: str) -> str:
    arn = name if name.startswith("arn:") else _arn("lambda", region, account, f"function:{name}")
    if qualifier and arn.count(":") == 6:
        arn = f"{arn}:{qualifier}"
    return arn


_DYNAMODB_TRANSACT = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
_S3_OBJECT_ACTIONS = {
    "GetObject": "s3:GetObject", "HeadObject": "s3:GetObject", "PutObject": "s3:PutObject",
    "CreateMultipartUpload": "s3:PutObject", "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject", "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "ListParts": "s3:ListMultipartUploadParts", "DeleteObject": "s3:DeleteObject",
}
_S3_BUCKET_ACTIONS = {
    "ListObjectsV2": "s3:ListBucket", "ListObjects": "s3:ListBucket", "HeadBucket": "s3:ListBucket",
    "ListMultipartUploads": "s3:ListBucketMultipartUploads",
}
_SQS_BATCH = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
              "ChangeMessageVisibilityBatch": "ChangeMessageVisibility"}


def permissions_for(service: str, operation: str, params: Mapping[str, Any], region: str,
                    account: str = LOCAL_ACCOUNT) -> tuple[Permission, ...]:
    """The IAM action(s) and resource ARN(s) AWS authorizes for one API call (the Service
    Authorization Reference's action and resource types, for the operations the kit uses)."""
    prefix = IAM_PREFIX.get(service, service)
    if service == "dynamodb":
        if operation == "TransactWriteItems" or operation == "TransactGetItems":
            out = []
            for entry in params.get("TransactItems", []):
                (kind, op), = entry.items()
                out.append(Permission(f"dynamodb:{_DYNAMODB_TRANSACT[kind]}",
                                      _arn("dynamodb", region, account, f"table/{op['TableName']}")))
            return tuple(out)
        if operation in ("BatchWriteItem", "BatchGetItem"):
            out = []
            for table, requests in params.get("RequestItems", {}).items():
                arn = _arn("dynamodb", region, account, f"table/{table}")
                if operation == "BatchGetItem":
                    out.append(Permission("dynamodb:BatchGetItem", arn))
                    continue
                for request in requests:
                    out.append(Permission("dynamodb:PutItem" if "PutRequest" in request else "dynamodb:DeleteItem", arn))
            return tuple(out)
        if "TableName" not in params:
            raise UnmappedCall(f"dynamodb:{operation} without TableName")
        resource = f"table/{params['TableName']}"
        if params.get("IndexName"):
            resource += f"/index/{params['IndexName']}"
        return (Permission(f"dynamodb:{operation}", _arn("dynamodb", region, account, resource)),)
    if service == "sqs":
        action = f"sqs:{_SQS_BATCH.get(operation, operation)}"
        if "QueueUrl" in params:
            return (Permission(action, _queue_arn(params["QueueUrl"], region)),)
        if "QueueName" in params:
            return (Permission(action, _arn("sqs", region, params.get("QueueOwnerAWSAccountId", account), params["QueueName"])),)
        raise UnmappedCall(f"sqs:{operation} without a queue")
    if service == "s3":
        bucket = params.get("Bucket")
        if operation in _S3_OBJECT_ACTIONS and bucket and "Key" in params:
            action = _S3_OBJECT_ACTIONS[operation]
            if action == "s3:GetObject" and params.get("VersionId"):
                action = "s3:GetObjectVersion"  # a given version (Service Authorization Reference, Amazon S3)
            return (Permission(action, f"arn:aws:s3:::{bucket}/{params['Key']}"),)
        if operation in _S3_BUCKET_ACTIONS and bucket:
            return (Permission(_S3_BUCKET_ACTIONS[operation], f"arn:aws:s3:::{bucket}"),)
        raise UnmappedCall(f"s3:{operation}: not mapped")
    if service == "lambda":
        if operation in ("Invoke", "InvokeAsync"):
            return (Permission("lambda:InvokeFunction",
                               _function_arn(params["FunctionName"], params.get("Qualifier"), region, account)),)
        raise UnmappedCall(f"lambda:{operation}: not mapped")
    if service == "stepfunctions":
        for key in ("executionArn", "mapRunArn", "stateMachineArn", "activityArn"):
            if key in params:
                return (Permission(f"states:{operation}", params[key]),)
        raise UnmappedCall(f"states:{operation}: not mapped")
    if service == "kinesis":
        if "StreamARN" in params:
            arn = params["StreamARN"]
        elif "StreamName" in params:
            arn = _arn("kinesis", region, account, f"stream/{params['StreamName']}")
        else:
            raise UnmappedCall(f"kinesis:{operation} without a stream")
        return (Permission(f"kinesis:{operation}", arn),)
    if service == "sns" and "TopicArn" in params:
        return (Permission(f"sns:{operation}", params["TopicArn"]),)
    if service == "cloudwatch" and operation == "PutMetricData":
        return (Permission("cloudwatch:PutMetricData", "*"),)  # no resource-level permissions
    raise UnmappedCall(f"{prefix}:{operation}: not mapped")


# ----------------------------------------------------------------- recording
_INTERPRETER_CLIENTS: "weakref.WeakSet[Any]" = weakref.WeakSet()
_ACTIVE: list["CallRecorder"] = []
_LOCK = threading.Lock()


class CallRecorder:
    """While active, records every attributed API call (see the module docstring)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def record(self, client: Any, operation: str, params: Mapping[str, Any]) -> None:
        from fanout_kit.local.moto_lambda import current_function

        function = current_function()
        if function is not None:
            kind, caller = "function", function
        elif client in _INTERPRETER_CLIENTS:
            kind, caller = "stateMachine", ""
        else:
            return  # the harness
        service = client.meta.service_model.service_name
        region = client.meta.region_name
        try:
            permissions, error = permissions_for(service, operation, params, region), None
        except (UnmappedCall, KeyError, ValueError) as exc:
            permissions, error = (), str(exc)
        with self._lock:
            self.calls.append(Call(kind, caller, service, operation, region, permissions, error))

    def __enter__(self) -> "CallRecorder":
        with _LOCK:
            if not _ACTIVE:
                _install()
            _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        with _LOCK:
            _ACTIVE.remove(self)
            if not _ACTIVE:
                _uninstall()


_ORIGINALS: dict[str, Any] = {}


def _install() -> None:
    import sys

    from botocore.client import BaseClient

    original_call = BaseClient._make_api_call
    _ORIGINALS["call"] = original_call

    def _make_api_call(self, operation_name, api_params):
        for recorder in list(_ACTIVE):
            recorder.record(self, operation_name, api_params)
        return original_call(self, operation_name, api_params)

    BaseClient._make_api_call = _make_api_call
    # Mark the clients moto's Step Functions interpreter creates for its service integrations.
    patched = []
    for name, module in list(sys.modules.items()):
        factory = getattr(module, "boto_client_for", None)
        if name.startswith("moto.stepfunctions.parser") and callable(factory):
            def marking(*args, _factory=factory, **kwargs):
                client = _factory(*args, **kwargs)
                _INTERPRETER_CLIENTS.add(client)
                return client

            patched.append((module, factory))
            module.boto_client_for = marking
    _ORIGINALS["factories"] = patched


def _uninstall() -> None:
    from botocore.client import BaseClient

    BaseClient._make_api_call = _ORIGINALS.pop("call")
    for module, factory in _ORIGINALS.pop("factories"):
        module.boto_client_for = factory


# ----------------------------------------------------------------- roles and verdicts
@dataclass
class Principal:
    """One role of a stack: who uses it, and its identity policy documents (resolved)."""

    stack: str
    label: str  # the function's service name, or "StateMachine"
    logical_id: str  # the function's / state machine's logical id
    role: str  # the role's logical id
    documents: list[dict[str, Any]]
    managed: list[Any] = field(default_factory=list)  # managed policy ARNs: not read, never allow
    calls: list[tuple[Call, Permission | None, str]] = field(default_factory=list)  # (call, permission, decision)


def stack_principals(stack: str, template: Mapping[str, Any], region: str) -> dict[tuple[str, str], Principal]:
    """(kind, logical id) -> Principal for every function and state machine of a template."""
    resolve = make_resolver(*local_names(template, region), region)
    policies_by_role: dict[str, list[dict[str, Any]]] = {}
    managed_by_role: dict[str, list[Any]] = {}
    for res in resources_of_type(template, "AWS::IAM::Policy").values():
        for role in res["Properties"].get("Roles", []):
            policies_by_role.setdefault(role["Ref"], []).append(resolve(res["Properties"]["PolicyDocument"]))
    for lid, res in resources_of_type(template, "AWS::IAM::Role").items():
        for inline in res["Properties"].get("Policies", []):
            policies_by_role.setdefault(lid, []).append(resolve(inline["PolicyDocument"]))
        # Managed policies (CDK's own custom-resource providers use AWSLambdaBasicExecutionRole)
        # are not read: a call that needs one is reported denied (fail closed).
        managed_by_role[lid] = list(res["Properties"].get("ManagedPolicyArns", []))
    out: dict[tuple[str, str], Principal] = {}
    for lid, res in resources_of_type(template, "AWS::Lambda::Function").items():
        role = res["Properties"]["Role"]["Fn::GetAtt"][0]
        label = res["Properties"].get("Environment", {}).get("Variables", {}).get("POWERTOOLS_SERVICE_NAME", lid)
        out[("function", lid)] = Principal(
            stack, label, lid, role, policies_by_role.get(role, []), managed_by_role.get(role, [])
        )
    for lid, res in resources_of_type(template, "AWS::StepFunctions::StateMachine").items():
        role = res["Properties"]["RoleArn"]["Fn::GetAtt"][0]
        out[("stateMachine", lid)] = Principal(stack, STATE_MACHINE, lid, role, policies_by_role.get(role, []))
    return out


@dataclass(frozen=True)
class Grant:
    stack: str
    label: str
    action: str
    resource: str


@dataclass
class IamReport:
    principals: list[Principal]
    unattributed: list[Call]
    unused: list[Grant]

    @property
    def calls(self) -> int:
        return sum(len(p.calls) for p in self.principals) + len(self.unattributed)

    def denied(self) -> list[tuple[Principal | None, Call, Permission | None, str]]:
        out = [(p, c, perm, d) for p in self.principals for c, perm, d in p.calls if d != "Allow"]
        return out + [(None, c, None, "unattributed") for c in self.unattributed]


def _grants(principal: Principal) -> Iterator[tuple[str, str]]:
    for document in principal.documents:
        for statement in as_list(document.get("Statement", [])):
            if statement.get("Effect") != "Allow" or "Action" not in statement or "Resource" not in statement:
                continue
            for action in as_list(statement["Action"]):
                for resource in as_list(statement["Resource"]):
                    yield action, resource


def check(calls: Iterable[Call], principals: Mapping[tuple[str, str], Principal]) -> IamReport:
    """Evaluate every call against its principal's role; list the grants no call used."""
    machines = [key for key in principals if key[0] == "stateMachine"]
    unattributed: list[Call] = []
    for call in calls:
        if call.caller_kind == "stateMachine":
            key = machines[0] if len(machines) == 1 else None
        else:
            key = ("function", call.caller)
        principal = principals.get(key) if key else None
        if principal is None:
            unattributed.append(call)
            continue
        if call.error or not call.permissions:
            principal.calls.append((call, None, f"unmapped: {call.error}"))
            continue
        for permission in call.permissions:
            decision = evaluate(principal.documents, Request(permission.action, permission.resource))
            principal.calls.append((call, permission, decision))
    unused: list[Grant] = []
    for principal in principals.values():
        allowed = [perm for _, perm, d in principal.calls if d == "Allow" and perm is not None]
        seen = set()
        for action, resource in _grants(principal):
            if (action, resource) in seen:
                continue
            seen.add((action, resource))
            if not any(
                wildcard_match(action, p.action, case_sensitive=False) and wildcard_match(resource, p.resource)
                for p in allowed
            ):
                unused.append(Grant(principal.stack, principal.label, action, resource))
    return IamReport(list(principals.values()), unattributed, unused)


@contextmanager
def recording() -> Iterator[CallRecorder]:
    with CallRecorder() as recorder:
        yield recorder

"""cdk-nag acknowledgements, each with the rule, the one finding it covers and a specific reason.

cdk-nag v3 reports through CDK's validation plugins; a finding is acknowledged on the construct
that raises it with ``Validations.of(construct).acknowledge``. Rules that report several findings
(IAM5) are acknowledged finding by finding (``AwsSolutions-IAM5[Resource::...]``, what v2 called
``applies_to``), never as a whole rule.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Token, Validations
from aws_cdk import aws_lambda as lambda_
from constructs import IConstruct

PACK = "AwsSolutions"


def acknowledge(construct: IConstruct, rule: str, reason: str, finding: str | None = None) -> None:
    rule_id = f"{PACK}::{PACK}-{rule}" + (f"[{finding}]" if finding else "")
    Validations.of(construct).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def _in_finding(value: str, pseudo: str) -> str:
    """How cdk-nag writes the stack's region or account in a finding: the literal of a stack with
    an ``env``, the pseudo parameter (``<AWS::Region>``) of an env-agnostic one. (A token cannot go
    into the acknowledgement's id: its key must resolve to a string at synth.)"""
    return pseudo if Token.is_unresolved(value) else value


XRAY_REASON = (
    "X-Ray trace submission (xray:PutTraceSegments, xray:PutTelemetryRecords"
    "{extra}) has no resource-level permissions, so Resource must be *"
)


def acknowledge_function(function: lambda_.Function, runtime_name: str, layer: str) -> None:
    acknowledge(
        function,
        "L1",
        f"{runtime_name} is pinned together with the Powertools layer built for it ({layer}); "
        "upgrade the runtime and the layer together",
    )
    acknowledge(function, "IAM5", XRAY_REASON.format(extra=""), finding="Resource::*")


def acknowledge_state_machine_role(role: IConstruct, invoked: list[lambda_.Function]) -> None:
    acknowledge(
        role,
        "IAM5",
        XRAY_REASON.format(extra=", xray:GetSampling*")
        + "; CloudWatch Logs vended delivery (logs:CreateLogDelivery, logs:DescribeLogGroups, ...) "
        "for state machine logging also requires Resource *",
        finding="Resource::*",
    )
    stack = Stack.of(role)
    for fn in invoked:
        if fn.node.default_child is None or Stack.of(fn) is not stack:
            continue  # a function imported or from another stack: its finding is the app's to review
        logical_id = stack.resolve(stack.get_logical_id(fn.node.default_child))
        acknowledge(
            role,
            "IAM5",
            f"lambda:InvokeFunction on the versions/aliases ({logical_id}.Arn:*) of a function this "
            "state machine invokes, as granted by CDK's LambdaInvoke task; no other function",
            finding=f"Resource::<{logical_id}.Arn>:*",
        )


def acknowledge_processing_invoke(role: IConstruct, processing_function: IConstruct) -> None:
    """A ledger consumer's grant to invoke the app's processing function (CDK's grant_invoke also
    covers its versions and aliases, ``<fn>.Arn:*``)."""
    stack = Stack.of(role)
    if processing_function.node.default_child is None or Stack.of(processing_function) is not stack:
        return  # imported, or from another stack: its finding is the app's to review
    logical_id = stack.resolve(stack.get_logical_id(processing_function.node.default_child))
    acknowledge(
        role,
        "IAM5",
        f"lambda:InvokeFunction on the versions/aliases ({logical_id}.Arn:*) of the app's processing "
        "function, which this ledger consumer invokes for each child, as CDK's grant_invoke grants it",
        finding=f"Resource::<{logical_id}.Arn>:*",
    )


def acknowledge_dead_letter_queue(queue: IConstruct) -> None:
    acknowledge(
        queue,
        "SQS3",
        "This queue is itself the dead-letter queue: the state machine sends exhausted tasks to it "
        "directly (sqs:SendMessage); messages stay 14 days and are redriven by `fanout dlq redrive`",
    )


def acknowledge_map_workflow(stack: Stack, state_machine: IConstruct, role: IConstruct, bucket: IConstruct,
                             prepare_function: IConstruct, map_labels: list[str], map_run_policy: IConstruct,
                             forward_function: IConstruct) -> None:
    """The Distributed Map's own grants: child executions of this state machine, map-run redrive,
    and the batch data bucket's objects (ItemReader reads manifests, ResultWriter writes results)."""
    sm_ref = stack.resolve(stack.get_logical_id(state_machine.node.default_child))
    region, account = _in_finding(stack.region, "<AWS::Region>"), _in_finding(stack.account, "<AWS::AccountId>")
    execution = (
        f'arn:<AWS::Partition>:states:{region}:{account}:execution:'
        f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{sm_ref}"}}]}}]}}'
    )
    policy = state_machine.node.find_child("DistributedMapPolicy")
    acknowledge(
        policy,
        "IAM5",
        "states:DescribeExecution/StopExecution on the child executions the Distributed Map "
        "starts from this same state machine (their names are generated), as CDK grants them",
        finding=f"Resource::{execution}:*",
    )
    for label in map_labels:
        acknowledge(
            policy,
            "IAM5",
            f"states:RedriveExecution on the map-run executions of the {label} Distributed Map state "
            "(names generated per run), so a failed map run can be redriven",
            finding=f"Resource::{execution}/{label}:*",
        )
    if bucket.node.default_child is not None and Stack.of(bucket) is stack:
        # (An imported bucket's findings name it differently: they are the app's to review.)
        bucket_ref = stack.resolve(stack.get_logical_id(bucket.node.default_child))
        acknowledge(
            role,
            "IAM5",
            "ItemReader (s3:GetObject) and ResultWriter (s3:PutObject, multipart) act on objects of "
            "the batch data bucket, which holds only this workflow's manifests and results",
            finding=f"Resource::arn:<AWS::Partition>:s3:::<{bucket_ref}>/*",
        )
        acknowledge(
            role,
            "IAM5",
            "The ItemReader reads the manifest version PrepareBatch validated (s3:GetObjectVersion), "
            "under manifests/ only",
            finding=f"Resource::<{bucket_ref}.Arn>/manifests/*",
        )
        acknowledge(
            prepare_function,
            "IAM5",
            "PrepareBatch reads uploaded manifests and writes inline items under manifests/ only",
            finding=f"Resource::<{bucket_ref}.Arn>/manifests/*",
        )
        acknowledge(
            forward_function,
            "IAM5",
            "ForwardFailedItems reads the map runs' ResultWriter output under results/ only (one folder "
            "per map run, named by Step Functions)",
            finding=f"Resource::<{bucket_ref}.Arn>/results/*",
        )
    map_run = (
        f'arn:<AWS::Partition>:states:{region}:{account}:mapRun:'
        f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{sm_ref}"}}]}}]}}'
    )
    for label in map_labels:
        acknowledge(
            map_run_policy,
            "IAM5",
            f"states:DescribeMapRun on the map runs of this state machine's {label} state (one per "
            "execution, ids generated by Step Functions), read by ReadMapRun 1..6 for the item counts",
            finding=f"Resource::{map_run}/{label}:*",
        )
def acknowledge_ledger_queue(queue: IConstruct, purpose: str) -> None:
    """SQS3 (queue without a DLQ) on a queue that is itself where failures land."""
    acknowledge(
        queue,
        "SQS3",
        f"This queue is {purpose}; a message it cannot record stays here (14 days) and raises the "
        "queue's depth and age alarms instead of moving to yet another queue",
    )


def acknowledge_failure_guard(stack: Stack, function: IConstruct, state_machine: IConstruct) -> None:
    """The failure guard may describe this state machine's executions (their names are the
    callers'): it reads the input of an execution whose event carried none, for its batch id."""
    sm_ref = stack.resolve(stack.get_logical_id(state_machine.node.default_child))
    region, account = _in_finding(stack.region, "<AWS::Region>"), _in_finding(stack.account, "<AWS::AccountId>")
    execution = (
        f'arn:<AWS::Partition>:states:{region}:{account}:execution:'
        f'{{"Fn::Select":[6,{{"Fn::Split":[":",{{"Ref":"{sm_ref}"}}]}}]}}'
    )
    acknowledge(
        function,
        "IAM5",
        "states:DescribeExecution on this state machine's executions only (names chosen by the "
        "callers): the failure guard reads the input of an execution whose event carried none",
        finding=f"Resource::{execution}:*",
    )

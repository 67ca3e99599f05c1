"""What a review of the synthesized templates against AWS's documentation found (issue 19, item 5),
checked on every template of both environments so that it cannot come back."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from fanout_kit.local.template import make_resolver, resources_of_type, synthesize
from stacks.config import read_cdk_context
from tests.conftest import ENVIRONMENTS

# Properties that give a resource its physical name: with one, CloudFormation cannot create the
# resource while a retained one of that name exists.
PHYSICAL_NAMES = {
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::Kinesis::Stream": "Name",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::Lambda::Function": "FunctionName",
}


def _strings(node: Any):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_no_named_resource_collides_with_a_retained_one_of_an_earlier_stack(synthesized, env_name):
    """A retained log group named ``/aws/vendedlogs/states/FanOut-prod-map`` outlived a `cdk destroy`
    (or the rollback of a failed first deploy) and the next deploy failed: "already exists". Every
    physical name now ends with the stack id's random part, so a new stack gets new names."""
    app = synthesized(env_name)
    named = 0
    for stack, template in app.templates.items():
        for lid, res in template["Resources"].items():
            prop = PHYSICAL_NAMES.get(res["Type"])
            name = res.get("Properties", {}).get(prop) if prop else None
            if name is None:
                continue
            named += 1
            assert not isinstance(name, str), f"{stack} {lid}: fixed {prop} {name!r}"
            names = {
                _resolve_with_stack_id(name, app.region, stack_uuid)
                for stack_uuid in ("0d3e2c1a-1111-4222-8333-9a8b7c6d5e4f", "5f0c9e7e-aaaa-4bbb-8ccc-123456789abc")
            }
            assert len(names) == 2, f"{stack} {lid}: {prop} does not depend on the stack id: {names}"
    assert named >= 2  # the two workflows' state machine log groups (vended logs want a name)


def _resolve_with_stack_id(value: Any, region: str, stack_uuid: str) -> str:
    resolve = make_resolver({}, {}, region)
    stack_id = f"arn:aws:cloudformation:{region}:123456789012:stack/S/{stack_uuid}"
    return resolve(json.loads(json.dumps(value).replace('{"Ref": "AWS::StackId"}', json.dumps(stack_id))))


def test_the_workflow_log_group_keeps_the_vended_logs_prefix_and_the_readable_name(synthesized):
    app = synthesized("prod")
    for workflow in ("parallel", "map"):
        template = app.template(workflow)
        (sm,) = resources_of_type(template, "AWS::StepFunctions::StateMachine").values()
        (dest,) = sm["Properties"]["LoggingConfiguration"]["Destinations"]
        group = template["Resources"][dest["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]]
        name = _resolve_with_stack_id(group["Properties"]["LogGroupName"], app.region, "0d3e2c1a-1111-4222-8333-9a8b7c6d5e4f")
        assert name == f"/aws/vendedlogs/states/FanOut-prod-{workflow}-9a8b7c6d5e4f"
        assert group["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize(
    ("env_name", "region", "partition"), [("prod", "cn-north-1", "aws-cn"), ("dev", "us-gov-west-1", "aws-us-gov")]
)
def test_no_template_names_a_literal_partition(env_name, region, partition, tmp_path):
    """`arn:aws:states:::aws-sdk:sfn:describeMapRun` was written with a literal `aws` partition: in
    aws-cn or aws-us-gov the state machine would call a resource that does not exist there. Every
    ARN takes the stack's partition (``{"Ref": "AWS::Partition"}``)."""
    context = copy.deepcopy(read_cdk_context())
    context["fanout:environments"][env_name]["region"] = region
    app = synthesize(env_name, tmp_path, context=context)
    for stack, template in app.templates.items():
        literal = sorted({s for s in _strings(template) if "arn:aws:" in s})
        assert literal == [], f"{stack} ({partition}): literal partition in {literal[:3]}"
    definition = json.dumps(app.template("map"))
    assert "aws-sdk:sfn:describeMapRun" in definition


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_prepare_batch_can_check_the_largest_manifest_it_accepts_within_its_timeout(synthesized, env_name):
    """At 256 MB (a seventh of a vCPU) and 300 s, PrepareBatch would have timed out half-way
    through a large manifest (~32 s per million small items at 256 MB, measured by
    benchmarks/prepare_batch_benchmark.py) and failed the execution with States.Timeout instead of a
    verdict. Its memory and timeout now fit the documented maximum (MAX_MANIFEST_ITEMS items in
    MAX_MANIFEST_BYTES) with a safety factor; a larger manifest is refused at once (InvalidManifest)."""
    from fanout_kit.patterns.distributed_map.construct import PREPARE_SAFETY, prepare_worst_case_seconds

    template = synthesized(env_name).template("map")
    (prepare,) = [
        f["Properties"] for f in resources_of_type(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "prepare_map_batch.handler"
    ]
    worst = prepare_worst_case_seconds(prepare["MemorySize"])
    assert worst * PREPARE_SAFETY <= prepare["Timeout"] <= 900, (prepare["MemorySize"], prepare["Timeout"], worst)


def test_the_prod_map_worker_has_the_concurrency_its_children_use():
    """Prod ran MaxConcurrency 500 with no reserved concurrency and one transient retry: when
    the account's other functions used the unreserved pool, children were throttled
    (Lambda.TooManyRequestsException) past their one retry and whole batches dead-lettered. The
    worker now reserves at least MaxConcurrency (each child invokes it once at a time), so the
    Map's own children cannot be throttled for concurrency."""
    from stacks.config import load_environment

    cfg = load_environment(read_cdk_context(), "prod")
    assert cfg.map.worker_reserved_concurrency is not None
    assert cfg.map.worker_reserved_concurrency >= cfg.map.max_concurrency

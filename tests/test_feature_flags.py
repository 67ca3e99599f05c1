"""The constructs synthesize the same thing whatever the app's CDK feature flags (issue 18, item 1):
every flag of this repository's cdk.json is classified in ``fanout_kit.shared.feature_flags.FLAGS``, the
ones that change the kit's resources are pinned on each construct, and the three constructs give
the same state machine definitions, IAM policies and resources in a flagless app (a new user's)
as in this app. The exhaustive flag-by-flag proof is marked slow (``pytest -m slow``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App, Duration, Environment, Stack
from aws_cdk import aws_lambda as lambda_

from fanout_kit import CompletionLedger, ConfigError, DistributedMapFanOut, FanOutTask, ParallelFanOut
from fanout_kit.shared import feature_flags
from fanout_kit.shared.feature_flags import (
    APP_ONLY,
    FLAGS,
    NO_EFFECT,
    PARTITION_FORM,
    PIN,
    PINNED,
    POLICY_FORM,
    is_feature_flag,
)

ROOT = Path(__file__).resolve().parents[1]
CDK_JSON_FLAGS = {k: v for k, v in json.loads((ROOT / "cdk.json").read_text())["context"].items() if is_feature_flag(k)}
ENV = Environment(account="123456789012", region="eu-west-1")
CONSTRUCTS = {"parallel": "Orders", "map": "Items", "ledger": "Ledger"}


def kit_resources(context: dict, env: Environment | None = ENV) -> dict[str, dict[str, dict]]:
    """construct -> its resources (logical id -> resource), for the three constructs with the app's
    own functions in an app with ``context``; the runtime layer is counted with every construct."""
    app = App(context=context, analytics_reporting=False)
    stack = Stack(app, "Flags", env=env)

    def fn(name: str) -> lambda_.Function:
        return lambda_.Function(stack, name, runtime=lambda_.Runtime.PYTHON_3_13, handler="index.handler",
                                code=lambda_.Code.from_inline("x"), timeout=Duration.seconds(10))

    built = {
        "parallel": ParallelFanOut(stack, "Orders", tasks=[FanOutTask("Charge", fn("Work"))]),
        "map": DistributedMapFanOut(stack, "Items", worker=FanOutTask("ProcessItem", fn("Worker"))),
        "ledger": CompletionLedger(stack, "Ledger", processing_function=fn("Process")),
    }
    for construct in built.values():
        construct.add_outputs()
    template = app.synth().get_stack_by_name("Flags").template
    return {
        workflow: {lid: r for lid, r in template["Resources"].items()
                   if lid.startswith((construct_id, "FanOutRuntimeLayer"))}
        for workflow, construct_id in CONSTRUCTS.items()
    }


POLICY_TYPES = ("AWS::IAM::Policy", "AWS::S3::BucketPolicy", "AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy")


def listed(value: object) -> list:
    return value if isinstance(value, list) else [value]


def permissions(document: dict) -> set[tuple]:
    """A policy document as the set of (effect, principal, action, resource, condition) it grants:
    what IAM evaluates, whatever the statements' order and grouping (minimizePolicies' form)."""
    return {
        (s["Effect"], json.dumps(s.get("Principal"), sort_keys=True), action, json.dumps(resource, sort_keys=True),
         json.dumps(s.get("Condition"), sort_keys=True))
        for s in document["Statement"] for action in listed(s["Action"]) for resource in listed(s.get("Resource"))
    }


def definitions_and_policies(resources: dict[str, dict]) -> dict[str, object]:
    """The state machine definitions as synthesized, and every policy and role as its permissions."""
    found: dict[str, object] = {}
    for lid, r in resources.items():
        props = r["Properties"]
        if r["Type"] == "AWS::StepFunctions::StateMachine":
            found[lid] = props["DefinitionString"]
        elif r["Type"] in POLICY_TYPES:
            found[lid] = ({k: v for k, v in props.items() if k != "PolicyDocument"}, permissions(props["PolicyDocument"]))
        elif r["Type"] == "AWS::IAM::Role":
            found[lid] = (permissions(props["AssumeRolePolicyDocument"]), props.get("ManagedPolicyArns"),
                          {p["PolicyName"]: permissions(p["PolicyDocument"]) for p in props.get("Policies", [])})
    return found


def partition_resolved(value: object, partition: str = "aws") -> object:
    """``value`` as CloudFormation deploys it in ``partition``: {"Ref": "AWS::Partition"} resolved and
    every Fn::Join of plain strings joined (the PARTITION_FORM flag's literal form compares equal)."""
    if isinstance(value, list):
        return [partition_resolved(v, partition) for v in value]
    if not isinstance(value, dict):
        return value
    if value == {"Ref": "AWS::Partition"}:
        return partition
    if set(value) == {"Fn::Join"}:
        separator, parts = value["Fn::Join"]
        merged: list[object] = []
        for part in (partition_resolved(p, partition) for p in parts):
            if isinstance(part, str) and merged and isinstance(merged[-1], str):
                merged[-1] = f"{merged[-1]}{separator}{part}"
            else:
                merged.append(part)
        if len(merged) == 1 and isinstance(merged[0], str):
            return merged[0]
        return {"Fn::Join": [separator, merged]}
    return {k: partition_resolved(v, partition) for k, v in value.items()}


def test_partition_resolved_joins_what_cloudformation_would_join():
    joined = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::1:root"]]}
    assert partition_resolved(joined) == "arn:aws:iam::1:root"
    kept = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":sqs:", {"Ref": "Queue"}]]}
    assert partition_resolved(kept) == {"Fn::Join": ["", ["arn:aws:sqs:", {"Ref": "Queue"}]]}


def except_policies(resources: dict[str, dict]) -> dict[str, dict]:
    return {lid: r for lid, r in resources.items() if r["Type"] not in (*POLICY_TYPES, "AWS::IAM::Role")}


@pytest.fixture(scope="module")
def flagless():
    return kit_resources({})


def test_every_flag_of_this_apps_cdk_json_is_classified():
    """A flag added to cdk.json (e.g. by a CDK upgrade) must be classified, with the value it has
    here; a classified flag no longer in cdk.json must go."""
    assert set(FLAGS) == set(CDK_JSON_FLAGS), (
        f"unclassified: {sorted(set(CDK_JSON_FLAGS) - set(FLAGS))}; stale: {sorted(set(FLAGS) - set(CDK_JSON_FLAGS))}")
    assert {k: f.value for k, f in FLAGS.items()} == CDK_JSON_FLAGS
    assert {f.handling for f in FLAGS.values()} == {PIN, POLICY_FORM, PARTITION_FORM, APP_ONLY, NO_EFFECT}
    assert all(f.why for f in FLAGS.values() if f.handling != NO_EFFECT)
    assert PINNED["@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2"] is True
    assert feature_flags.STACK_LEVEL == {}  # no flag the kit relies on is read above the construct


@pytest.mark.parametrize("workflow", sorted(CONSTRUCTS))
def test_each_construct_is_the_same_in_a_flagless_app_and_in_this_app(flagless, workflow, this_app_resources):
    """The state machine definitions, the IAM permissions and every other resource of the construct
    (the policies' form may differ: minimizePolicies, read at the stack level)."""
    assert definitions_and_policies(flagless[workflow]) == definitions_and_policies(this_app_resources[workflow])
    assert except_policies(flagless[workflow]) == except_policies(this_app_resources[workflow])


@pytest.fixture(scope="module")
def this_app_resources():
    return kit_resources(CDK_JSON_FLAGS)


def test_the_map_has_its_result_writer_in_a_flagless_app(flagless):
    """Was: no ResultWriter without useDistributedMapResultWriterV2, and every batch FAILED."""
    (machine,) = [r for r in flagless["map"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    definition = json.dumps(machine["Properties"]["DefinitionString"])
    assert definition.count('\\"ResultWriter\\"') == 2  # JSON and CSV maps


def test_the_pins_are_what_makes_the_flagless_app_the_same(monkeypatch, this_app_resources):
    """Without the pins, a flagless app differs (the Map's ResultWriter and grants, the functions'
    policies): the comparison above can fail."""
    monkeypatch.setattr(feature_flags, "PINNED", {})
    unpinned = kit_resources({})
    assert definitions_and_policies(unpinned["map"]) != definitions_and_policies(this_app_resources["map"])


def test_an_app_that_turns_the_pinned_flags_off_changes_nothing(this_app_resources):
    flipped = {**CDK_JSON_FLAGS, **{name: not value for name, value in PINNED.items()}}
    assert kit_resources(flipped) == this_app_resources


def test_minimize_policies_changes_the_form_of_the_kits_policies_never_a_permission(flagless, this_app_resources):
    """The one flag read above the construct: the ledger's policies are listed differently with
    and without it (so the normalization above matters), with the same permissions."""
    assert flagless["ledger"] != this_app_resources["ledger"]
    assert definitions_and_policies(flagless["ledger"]) == definitions_and_policies(this_app_resources["ledger"])


def test_a_stack_level_flag_the_kit_needs_is_refused_naming_the_flag_and_the_fix(monkeypatch):
    monkeypatch.setattr(feature_flags, "STACK_LEVEL", {"@aws-cdk/core:example": True})
    stack = Stack(App(), "Refused")
    with pytest.raises(ConfigError, match=r'^feature flag @aws-cdk/core:example is unset; the fan-out kit needs '
                                          r'true: set "@aws-cdk/core:example": true in your cdk.json context$'):
        CompletionLedger(stack, "Ledger", processing_function=lambda_.Function.from_function_name(stack, "P", "p"))


@pytest.mark.slow
@pytest.mark.parametrize("flag", sorted(CDK_JSON_FLAGS))
@pytest.mark.parametrize("env", [ENV, None], ids=["env", "env-agnostic"])
def test_each_flag_alone_changes_nothing_the_kit_synthesizes(flagless, flag, env):
    """Flag by flag, at this app's value and the opposite one, with and without env: the kit's
    resources are those of the flagless app (APP_ONLY flags change only the app's functions;
    POLICY_FORM ones only the form of the policies)."""
    base = flagless if env is ENV else kit_resources({}, env)
    value = CDK_JSON_FLAGS[flag]
    for setting in ([value, not value] if isinstance(value, bool) else [value]):
        resources = kit_resources({flag: setting}, env)
        where = f"{flag}={setting!r} ({FLAGS[flag].handling})"
        if FLAGS[flag].handling == POLICY_FORM:
            for workflow in CONSTRUCTS:
                assert definitions_and_policies(resources[workflow]) == definitions_and_policies(base[workflow]), where
                assert except_policies(resources[workflow]) == except_policies(base[workflow]), where
        elif FLAGS[flag].handling == PARTITION_FORM:
            assert partition_resolved(resources) == partition_resolved(base), where
        else:
            assert resources == base, where

"""Synthesize the CDK app and resolve what the local engine needs from the templates.

The state machine definition that runs locally is the ``DefinitionString`` CDK synthesized, with
its CloudFormation intrinsics (``Ref``, ``Fn::GetAtt``, ``Fn::Join``, pseudo parameters) resolved to
the local stand-ins of the same resources: nothing about the workflow is written twice.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCAL_ACCOUNT = "123456789012"  # moto's default account


@dataclass(frozen=True)
class SynthesizedApp:
    env_name: str
    outdir: Path
    templates: dict[str, dict[str, Any]]  # stack name -> template
    workflow_stacks: dict[str, str]  # workflow ("parallel") -> stack name
    region: str

    def template(self, workflow: str) -> dict[str, Any]:
        return self.templates[self.workflow_stacks[workflow]]


def synthesize(env_name: str = "dev", outdir: str | Path | None = None) -> SynthesizedApp:
    """Run the same app builder as ``cdk synth`` (cdk-nag included) and load the templates."""
    from stacks.runtime_node import use_venv_node

    use_venv_node()
    from stacks.app_builder import build_app

    out = Path(outdir or tempfile.mkdtemp(prefix="fanout-cdk-out-"))
    app, cfg, stacks = build_app(env_name, outdir=str(out))
    app.synth()
    templates = {
        stack.stack_name: json.loads((out / f"{stack.artifact_id}.template.json").read_text())
        for stack in stacks.values()
    }
    return SynthesizedApp(
        env_name=env_name,
        outdir=out,
        templates=templates,
        workflow_stacks={k: s.stack_name for k, s in stacks.items()},
        region=cfg.region,
    )


def resources_of_type(template: Mapping[str, Any], cfn_type: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == cfn_type}


def make_resolver(
    refs: Mapping[str, str], attrs: Mapping[tuple[str, str], str], region: str
) -> Callable[[Any], Any]:
    """A function resolving CloudFormation intrinsics against local resources."""
    pseudo = {
        "AWS::Partition": "aws",
        "AWS::Region": region,
        "AWS::AccountId": LOCAL_ACCOUNT,
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::StackName": "local",
    }

    def resolve(value: Any) -> Any:
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                if arg in pseudo:
                    return pseudo[arg]
                if arg not in refs:
                    raise KeyError(f"no local stand-in for Ref {arg}")
                return refs[arg]
            if key == "Fn::GetAtt":
                logical_id, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                if (logical_id, attr) not in attrs:
                    raise KeyError(f"no local stand-in for Fn::GetAtt {logical_id}.{attr}")
                return attrs[(logical_id, attr)]
            if key == "Fn::Join":
                sep, parts = arg
                return sep.join(str(resolve(p)) for p in parts)
            if key.startswith("Fn::"):
                raise KeyError(f"the local engine does not resolve {key}")
        return {k: resolve(v) for k, v in value.items()}

    return resolve


def local_names(
    template: Mapping[str, Any], region: str
) -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """(Ref values, GetAtt values) of each resource's local stand-in, named by its logical id:
    the values moto gives resources created with those names (queue URLs included)."""
    refs: dict[str, str] = {}
    attrs: dict[tuple[str, str], str] = {}
    arn = f"arn:aws:{{}}:{region}:{LOCAL_ACCOUNT}:{{}}"
    for lid, res in template["Resources"].items():
        kind = res["Type"]
        if kind == "AWS::SQS::Queue":
            refs[lid] = attrs[(lid, "QueueUrl")] = (
                f"https://sqs.{region}.amazonaws.com/{LOCAL_ACCOUNT}/{lid}"
            )
            attrs[(lid, "Arn")] = arn.format("sqs", lid)
            attrs[(lid, "QueueName")] = lid
        elif kind == "AWS::DynamoDB::Table":
            refs[lid] = lid
            attrs[(lid, "Arn")] = arn.format("dynamodb", f"table/{lid}")
        elif kind == "AWS::S3::Bucket":
            refs[lid] = bucket_name(lid)
            attrs[(lid, "Arn")] = f"arn:aws:s3:::{bucket_name(lid)}"
        elif kind == "AWS::Lambda::Function":
            refs[lid] = lid
            attrs[(lid, "Arn")] = arn.format("lambda", f"function:{lid}")
        elif kind == "AWS::Kinesis::Stream":
            refs[lid] = lid
            attrs[(lid, "Arn")] = arn.format("kinesis", f"stream/{lid}")
        elif kind == "AWS::StepFunctions::StateMachine":
            refs[lid] = attrs[(lid, "Arn")] = arn.format("states", f"stateMachine:{lid}")
            attrs[(lid, "Name")] = lid
    return refs, attrs


def bucket_name(logical_id: str) -> str:
    return logical_id.lower()[:63]


def state_machine_definitions(template: Mapping[str, Any], region: str) -> dict[str, dict]:
    """Logical id -> the state machine's ASL, resolved against the local names."""
    resolve = make_resolver(*local_names(template, region), region)
    return {
        lid: json.loads(resolve(res["Properties"]["DefinitionString"]))
        for lid, res in resources_of_type(template, "AWS::StepFunctions::StateMachine").items()
    }

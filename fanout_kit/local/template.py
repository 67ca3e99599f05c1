"""Synthesize the CDK app and resolve what the local engine needs from the templates.

The state machine definition that runs locally is the ``DefinitionString`` CDK synthesized, with
its CloudFormation intrinsics (``Ref``, ``Fn::GetAtt``, ``Fn::Join``, pseudo parameters) resolved to
the local stand-ins of the same resources: nothing about the workflow is written twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCAL_ACCOUNT = "123456789012"  # moto's default account
EXTERNAL_APP = "external"  # env_name of an assembly of another app (load_assembly): no cdk.json settings


# What the synthesized templates are made of: a change to any of these files (or to the CDK,
# constructs and cdk-nag versions) means a new synth; otherwise a run reuses the last one.
APP_INPUTS = ("app.py", "cdk.json", "stacks", "lambdas", "fanout_kit", "fanout_runtime")
APP_PACKAGES = ("aws-cdk-lib", "constructs", "cdk-nag")
CACHE_INDEX = "fanout-synth.json"


@dataclass(frozen=True)
class SynthesizedApp:
    env_name: str
    outdir: Path
    templates: dict[str, dict[str, Any]]  # stack name -> template
    workflow_stacks: dict[str, str]  # workflow ("parallel") -> stack name
    region: str
    cached: bool = False  # reused from the synth cache (same app inputs)
    # The settings it was synthesized with, when they are not cdk.json's (synthesize(context=...))
    config: Any = None
    # workflow -> its outputs' values (intrinsics) found in the assembly's metadata
    # (fanout_kit/local/app_source.py); None: the template's Outputs
    workflow_outputs: dict[str, dict[str, Any]] | None = None
    # workflow -> the logical ids of the resources under the workflow's construct (another app)
    workflow_scopes: dict[str, frozenset[str]] | None = None

    def template(self, workflow: str) -> dict[str, Any]:
        return self.templates[self.workflow_stacks[workflow]]


def synthesize(
    env_name: str = "dev", outdir: str | Path | None = None, *, context: Mapping[str, Any] | None = None
) -> SynthesizedApp:
    """Run the app's own builder (``app_builder``: the one ``cdk synth`` runs, cdk-nag included) and
    load the templates.
    ``context`` (with ``outdir``; tests): cdk.json's context with some settings changed.

    Without ``outdir``, the result is kept in one cache folder per environment,
    ``.fanout-cache/synth/ENV-KEY`` (KEY: a hash of the app's inputs), and reused while the inputs
    are unchanged; a new synth replaces the environment's older folder. Nothing is left in the
    temporary directory."""
    if outdir is not None:
        return _synth(env_name, Path(outdir), context)
    if context is not None:
        raise ValueError("synthesize(context=...) needs an outdir: the cache is keyed by cdk.json")
    from fanout_kit.shared import app_config

    root = app_config.app_root()
    cache = root / ".fanout-cache" / "synth"
    folder = cache / f"{env_name}-{app_inputs_key(env_name, root)}"
    if (folder / CACHE_INDEX).is_file():
        return _load(folder)
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{env_name}-", dir=cache))
    try:
        app = _synth(env_name, work)
        index = {"env_name": env_name, "region": app.region, "workflow_stacks": app.workflow_stacks}
        (work / CACHE_INDEX).write_text(json.dumps(index, indent=1))
        try:
            work.rename(folder)
        except OSError:  # another run just wrote the same synth: keep that one
            return _load(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for old in cache.glob(f"{env_name}-*"):
        if old != folder:
            shutil.rmtree(old, ignore_errors=True)
    return dataclasses.replace(app, outdir=folder)


def app_inputs_key(env_name: str, root: Path) -> str:
    """A hash of everything the synthesized templates depend on."""
    from importlib.metadata import version

    digest = hashlib.sha256(env_name.encode())
    for package in APP_PACKAGES:
        digest.update(f"\0{package}={version(package)}".encode())
    for name in APP_INPUTS:
        path = root / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            digest.update(f"\0{file.relative_to(root).as_posix()}\0".encode())
            digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def app_builder(context: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """The app's own builder, named by its cdk.json (``context.fanout:builder``, e.g.
    ``stacks.app_builder:build_app``), imported from the app folder: ``build_app(env_name, *,
    outdir, context) -> (app, config, stacks by workflow)``, the same one its ``app.py`` runs."""
    import importlib
    import sys

    from fanout_kit.shared import app_config

    root = app_config.app_root()
    if context is None or app_config.BUILDER_KEY not in context:  # changed settings name no other builder
        context = app_config.read_cdk_context()
    module_name, _, function = app_config.builder_name(context).partition(":")
    if str(root) not in sys.path:
        sys.path.append(str(root))
    return getattr(importlib.import_module(module_name), function)


def _synth(env_name: str, out: Path, context: Mapping[str, Any] | None = None) -> SynthesizedApp:
    from fanout_kit.shared.jsii_node import use_venv_node

    use_venv_node()
    build_app = app_builder(context)
    app, cfg, stacks = build_app(env_name, outdir=str(out), context=context)
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
        config=cfg if context is not None else None,
    )


def _load(folder: Path) -> SynthesizedApp:
    index = json.loads((folder / CACHE_INDEX).read_text())
    return dataclasses.replace(
        load_assembly(folder, workflow_stacks=index["workflow_stacks"], region=index["region"], env_name=index["env_name"]),
        cached=True,
    )


def load_assembly(
    folder: str | Path, *, workflow_stacks: Mapping[str, str], region: str, env_name: str = EXTERNAL_APP
) -> SynthesizedApp:
    """A cloud assembly synthesized by any CDK app (``cdk synth`` / ``CDK_OUTDIR``), for the local
    engine: ``workflow_stacks`` names the stack that holds each workflow ({"parallel": "MyStack"})."""
    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    templates = {}
    for artifact_id, artifact in manifest["artifacts"].items():
        if artifact.get("type") == "aws:cloudformation:stack":
            stack_name = artifact["properties"].get("stackName", artifact_id)
            templates[stack_name] = json.loads((folder / artifact["properties"]["templateFile"]).read_text())
    missing = sorted(set(workflow_stacks.values()) - set(templates))
    if missing:
        raise ValueError(f"{folder}: no stack named {', '.join(missing)} (stacks: {', '.join(sorted(templates))})")
    return SynthesizedApp(
        env_name=env_name, outdir=folder, templates=templates, workflow_stacks=dict(workflow_stacks), region=region
    )


def code_directory(outdir: Path, function_properties: Mapping[str, Any]) -> Path | None:
    """The synthesized asset folder of a Lambda function's code (``asset.<hash>`` next to the
    templates), or None for code that is not a file asset (inline code)."""
    key = function_properties.get("Code", {}).get("S3Key")
    if not isinstance(key, str) or not key.endswith(".zip"):
        return None
    folder = outdir / f"asset.{key.removesuffix('.zip')}"
    return folder if folder.is_dir() else None


def resources_of_type(template: Mapping[str, Any], cfn_type: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == cfn_type}


def make_resolver(
    refs: Mapping[str, str], attrs: Mapping[tuple[str, str], str], region: str,
    pseudo: Mapping[str, str] | None = None,
) -> Callable[[Any], Any]:
    """A function resolving CloudFormation intrinsics against local resources (``pseudo``: the
    pseudo parameters' values, the local ones by default)."""
    pseudo = pseudo or {
        "AWS::Partition": "aws",
        "AWS::Region": region,
        "AWS::AccountId": LOCAL_ACCOUNT,
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::StackName": "local",
        "AWS::StackId": f"arn:aws:cloudformation:{region}:{LOCAL_ACCOUNT}:stack/local/00000000-0000-4000-8000-000000000000",
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
            if key == "Fn::Split":
                sep, source = arg
                return str(resolve(source)).split(sep)
            if key == "Fn::Select":
                index, items = arg
                return resolve(items)[int(resolve(index))]
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
        # Resources the engine does not create, named for reading their policies (IAM checks).
        elif kind == "AWS::Logs::LogGroup":
            name = res.get("Properties", {}).get("LogGroupName", lid)
            # A name built from pseudo parameters (the kit's: "<name>-<the stack id's suffix>").
            refs[lid] = name if isinstance(name, str) else str(make_resolver({}, {}, region)(name))
            attrs[(lid, "Arn")] = arn.format("logs", f"log-group:{refs[lid]}:*")
        elif kind == "AWS::KMS::Key":
            refs[lid] = lid
            attrs[(lid, "Arn")] = arn.format("kms", f"key/{lid}")
        elif kind == "AWS::SNS::Topic":
            refs[lid] = attrs[(lid, "TopicArn")] = arn.format("sns", lid)
        elif kind == "AWS::Events::Rule":
            refs[lid] = lid
            attrs[(lid, "Arn")] = arn.format("events", f"rule/{lid}")
    return refs, attrs


def bucket_name(logical_id: str) -> str:
    return logical_id.lower()[:63]


class _Placeholders(dict):
    """Ref / GetAtt values shown as ``${LogicalId}`` / ``${LogicalId.Attr}`` (CloudFormation's
    Fn::Sub notation), for any logical id."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str | tuple[str, str]) -> str:
        return "${%s}" % (key if isinstance(key, str) else ".".join(key))


def deployed_definitions(template: Mapping[str, Any]) -> dict[str, dict]:
    """Logical id -> the state machine's ASL as it deploys, every reference to another resource
    or a pseudo parameter shown as ``${LogicalId}``, ``${LogicalId.Attr}``, ``${AWS::Region}``
    (what ``statemachines/`` holds for review)."""
    pseudo = {name: "${%s}" % name for name in (
        "AWS::Partition", "AWS::Region", "AWS::AccountId", "AWS::URLSuffix", "AWS::StackName", "AWS::StackId")}
    resolve = make_resolver(_Placeholders(), _Placeholders(), "", pseudo)
    return {
        lid: json.loads(resolve(res["Properties"]["DefinitionString"]))
        for lid, res in resources_of_type(template, "AWS::StepFunctions::StateMachine").items()
    }


def state_machine_definitions(template: Mapping[str, Any], region: str) -> dict[str, dict]:
    """Logical id -> the state machine's ASL, resolved against the local names."""
    resolve = make_resolver(*local_names(template, region), region)
    return {
        lid: json.loads(resolve(res["Properties"]["DefinitionString"]))
        for lid, res in resources_of_type(template, "AWS::StepFunctions::StateMachine").items()
    }

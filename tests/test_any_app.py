"""The kit in any CDK app (issue 18, item 1): the three constructs in an app of its own (no cdk.json
context) and a stack without ``env`` synthesize, cdk-nag included, with every acknowledgement
matching its finding; ``add_outputs()`` emits every output the command line and the engine read."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import Acknowledgment, App, Duration, Environment, Stack, Validations
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks

from fanout_kit import CompletionLedger, DistributedMapFanOut, FanOutTask, ParallelFanOut
from fanout_kit.shared.outputs import (
    ALL_OUTPUTS,
    LEDGER_INTAKE_OUTPUTS,
    LEDGER_OUTPUTS,
    MAP_OUTPUTS,
    OPTIONAL_OUTPUTS,
    PARALLEL_OUTPUTS,
    REQUIRED_OUTPUTS,
)

ROOT = Path(__file__).resolve().parents[1]


def user_function(stack: Stack, name: str) -> lambda_.Function:
    """The app's own function; its own cdk-nag findings (runtime, the basic execution role) are the
    app's to acknowledge, as a user would."""
    fn = lambda_.Function(
        stack, name, runtime=lambda_.Runtime.PYTHON_3_13, handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return event\n"),
        timeout=Duration.seconds(10),
    )
    for rule in ("AwsSolutions-L1",
                 "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]"):
        Validations.of(fn).acknowledge(Acknowledgment(id=f"AwsSolutions::{rule}", reason="the test app's own function"))
    return fn


def synth_all_three(outdir: Path, env: Environment | None) -> tuple[dict, dict]:
    """(template, validation report) of one stack holding the three constructs, in an app with no
    context at all (no feature flags), as a new user's app."""
    app = App(outdir=str(outdir), analytics_reporting=False)
    stack = Stack(app, "MyFanOut", env=env)
    work = user_function(stack, "Work")
    constructs = [
        ParallelFanOut(stack, "Orders", tasks=[FanOutTask("Charge", work), FanOutTask("Ship", work)]),
        DistributedMapFanOut(stack, "Items", worker=FanOutTask("ProcessItem", user_function(stack, "Worker"))),
        CompletionLedger(stack, "Ledger", processing_function=user_function(stack, "Process"), kinesis_intake=True),
    ]
    for construct in constructs:
        construct.add_outputs()
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    assembly = app.synth()
    return assembly.get_stack_by_name("MyFanOut").template, json.loads((outdir / "validation-report.json").read_text())


@pytest.fixture(scope="module")
def env_agnostic(tmp_path_factory):
    return synth_all_three(tmp_path_factory.mktemp("any-app"), env=None)


def test_all_three_constructs_synthesize_in_a_stack_without_env(env_agnostic):
    """Was: KeyMustResolveToString (a region token in a cdk-nag finding key) for the Map."""
    template, report = env_agnostic
    (plugin,) = report["pluginReports"]
    assert plugin["conclusion"] == "success" and plugin["violations"] == []
    acknowledged = {f["acknowledgedId"] for f in plugin["suppressedViolations"]}
    # the Map's grants, acknowledged with the pseudo parameters cdk-nag writes for an env-agnostic stack
    assert any(":states:<AWS::Region>:<AWS::AccountId>:mapRun:" in a for a in acknowledged)
    assert any(":states:<AWS::Region>:<AWS::AccountId>:execution:" in a for a in acknowledged)
    assert sum(r["Type"] == "AWS::StepFunctions::StateMachine" for r in template["Resources"].values()) == 2


def test_an_explicit_account_and_region_are_acknowledged_as_cdk_nag_writes_them(tmp_path):
    """(Was: the account was always written <AWS::AccountId>, a finding left unacknowledged.)"""
    _, report = synth_all_three(tmp_path, env=Environment(account="123456789012", region="eu-west-2"))
    (plugin,) = report["pluginReports"]
    assert plugin["violations"] == []
    assert any(":states:eu-west-2:123456789012:mapRun:" in f["acknowledgedId"] for f in plugin["suppressedViolations"])


def test_add_outputs_emits_every_output_the_cli_and_engine_read(env_agnostic):
    template, _ = env_agnostic
    by_construct: dict[str, set[str]] = {}
    for logical_id in template["Outputs"]:
        for construct in ("Orders", "Items", "Ledger"):
            if logical_id.startswith(construct):
                by_construct.setdefault(construct, set()).add(logical_id[len(construct):-8])  # CDK appends a hash
    assert by_construct == {
        "Orders": {*PARALLEL_OUTPUTS, *OPTIONAL_OUTPUTS},
        "Items": {*MAP_OUTPUTS, *OPTIONAL_OUTPUTS},  # BatchBucketName included (was missing)
        "Ledger": {*LEDGER_OUTPUTS, *LEDGER_INTAKE_OUTPUTS, *OPTIONAL_OUTPUTS},
    }
    assert "BatchBucketName" in REQUIRED_OUTPUTS["map"]


def outputs_read_by(package: Path) -> set[str]:
    """Every output name the code reads: ``.output("Name")``, ``outputs.get("Name")`` and
    ``outputs["Name"]`` with a literal name."""
    names = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                first = node.args[0]
                reads = node.func.attr == "output" or (
                    node.func.attr == "get" and "outputs" in ast.unparse(node.func.value))
                if reads and isinstance(first, ast.Constant) and isinstance(first.value, str):
                    names.add(first.value)
            if isinstance(node, ast.Subscript) and "outputs" in ast.unparse(node.value) \
                    and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                names.add(node.slice.value)
    return names


def test_the_outputs_lists_cover_what_the_command_line_and_the_engine_read():
    read = outputs_read_by(ROOT / "fanout_kit" / "cli") | outputs_read_by(ROOT / "fanout_kit" / "ops") \
        | outputs_read_by(ROOT / "fanout_kit" / "local")
    assert {"StateMachineArn", "BatchBucketName", "LedgerTableName", "ChildQueueUrl"} <= read  # the scan finds them
    assert read <= ALL_OUTPUTS, sorted(read - ALL_OUTPUTS)
    from fanout_kit.ops.aws import REQUIRED_OUTPUTS as cli_required

    assert cli_required is REQUIRED_OUTPUTS  # one list, the constructs'


def test_a_map_in_a_stack_without_env_runs_locally_in_the_default_region(tmp_path):
    """An env-agnostic stack run with no AWS_REGION set runs in us-east-1, where S3 refuses a
    LocationConstraint: the engine created the batch bucket with one and `fanout run --app` ended
    in a traceback (InvalidLocationConstraint)."""
    functions = tmp_path / "functions"
    functions.mkdir()
    (functions / "worker.py").write_text("def handler(event, context):\n    return {'processed': len(event['items'])}\n")
    app = App(outdir=str(tmp_path / "cdk.out"), analytics_reporting=False)
    stack = Stack(app, "NoEnv")  # no env
    worker = lambda_.Function(stack, "Worker", runtime=lambda_.Runtime.PYTHON_3_13, handler="worker.handler",
                              code=lambda_.Code.from_asset(str(functions)), timeout=Duration.seconds(10))
    DistributedMapFanOut(stack, "Items", worker=FanOutTask("ProcessItem", worker)).add_outputs()
    app.synth()
    # In a fresh process, as `fanout run --app` runs: the kit's handlers keep module-level clients
    # of the first region a process ran (a known limit of the in-process engine: one region per
    # process), so an earlier eu-west-1 run in this test process would hide or fake the result.
    script = (
        "import sys\n"
        "from fanout_kit.local.app_source import load_app\n"
        "from fanout_kit.local.engine import LocalEngine\n"
        f"local, found = load_app({str(tmp_path / 'cdk.out')!r}, kind='map')\n"
        "assert (found.kind, local.region) == ('map', 'us-east-1'), local.region\n"
        "with LocalEngine(local, workflows=('map',), sleep_retries=False) as engine:\n"
        "    result = engine.run('map', {'batchId': 'no-env', 'items': [{'n': i} for i in range(3)]})\n"
        "print(result.status, result.cause)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_REGION", "AWS_DEFAULT_REGION")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("SUCCEEDED"), done.stdout[-2000:]

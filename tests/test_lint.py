"""Every synthesized template passes cfn-lint and cdk-nag; every definition passes asl-validator."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fanout_kit.local.template import state_machine_definitions
from tests.conftest import ENVIRONMENTS, ROOT

ASL_VALIDATOR = ROOT / "node_modules" / ".bin" / "asl-validator"
CFN_LINT = Path(sys.executable).parent / "cfn-lint"


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_cfn_lint_passes(synthesized, env_name):
    app = synthesized(env_name)
    files = [str(app.outdir / f"{name}.template.json") for name in app.templates]
    result = subprocess.run(
        [str(CFN_LINT), "--config-file", str(ROOT / ".cfnlintrc.yaml"), *files],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_asl_validator_accepts_every_definition(synthesized, env_name, tmp_path):
    assert ASL_VALIDATOR.exists(), "run `npm ci` (./setup.sh does) to install asl-validator"
    app = synthesized(env_name)
    paths = []
    for stack_name, template in app.templates.items():
        for lid, definition in state_machine_definitions(template, app.region).items():
            path = tmp_path / f"{stack_name}-{lid}.asl.json"
            path.write_text(json.dumps(definition))
            paths += ["--json-path", str(path)]
    assert paths, "no state machine found"
    node_bin = str(Path(sys.executable).parent)
    env = {"PATH": node_bin + ":" + "/usr/bin:/bin"}
    result = subprocess.run([str(ASL_VALIDATOR), *paths], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("is valid") == len(paths) // 2


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_cdk_nag_has_no_unacknowledged_findings(synthesized, env_name):
    report = json.loads((synthesized(env_name).outdir / "validation-report.json").read_text())
    (plugin,) = report["pluginReports"]
    assert plugin["pluginName"] == "AwsSolutions"
    assert plugin["conclusion"] == "success"
    assert plugin["violations"] == []
    acknowledged = plugin["suppressedViolations"]
    assert acknowledged, "the nag pack ran and found the acknowledged findings"
    for finding in acknowledged:
        assert len(finding["reason"]) > 60, finding["acknowledgedId"]
        if finding["ruleName"] == "AwsSolutions-IAM5":
            # acknowledged finding by finding (v2's applies_to), never the whole rule
            assert "[Resource::" in finding["acknowledgedId"], finding["acknowledgedId"]


def test_cdk_nag_acknowledgements_are_the_documented_ones(dev_app):
    """Every acknowledgement in the app, with logical ids masked: a new one shows up here."""
    report = json.loads((dev_app.outdir / "validation-report.json").read_text())
    ids = sorted(
        {
            re.sub(r"[A-Z][A-Za-z]+[0-9A-F]{8}", "<id>", f["acknowledgedId"].split("::", 1)[1])
            for f in report["pluginReports"][0]["suppressedViolations"]
        }
    )
    execution = (
        'arn:<AWS::Partition>:states:eu-west-1:<AWS::AccountId>:execution:'
        '{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"<id>"}]}]}'
    )
    map_run = execution.replace(":execution:", ":mapRun:")
    assert ids == sorted(
        [
            "AwsSolutions-IAM5[Resource::*]",  # X-Ray, log delivery
            "AwsSolutions-IAM5[Resource::<<id>.Arn>:*]",  # versions of an invoked function
            "AwsSolutions-IAM5[Resource::<<id>.Arn>/manifests/*]",  # PrepareBatch's manifests
            "AwsSolutions-IAM5[Resource::<<id>.Arn>/results/*]",  # ForwardFailedItems reads results
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::<<id>>/*]",  # ItemReader/ResultWriter
            f"AwsSolutions-IAM5[Resource::{execution}:*]",  # Distributed Map child executions
            f"AwsSolutions-IAM5[Resource::{execution}/ProcessItemsCSV:*]",  # map-run redrive
            f"AwsSolutions-IAM5[Resource::{execution}/ProcessItemsJSON:*]",
            f"AwsSolutions-IAM5[Resource::{map_run}/ProcessItemsCSV:*]",  # ReadMapRun: DescribeMapRun
            f"AwsSolutions-IAM5[Resource::{map_run}/ProcessItemsJSON:*]",
            "AwsSolutions-L1",
            "AwsSolutions-SQS3",
        ]
    )

"""fanout_kit/local/app_source.py: finding the kit's workflows in any app's cloud assembly, and the
one-line errors of --app / --stack / --workflow."""

from __future__ import annotations

import json

import pytest

from fanout_kit.cli.main import main
from fanout_kit.local.app_source import AppSourceError, FoundWorkflow, choose, find_workflows
from fanout_kit.shared.discovery import WORKFLOW_METADATA

P = FoundWorkflow("A", "/A/Orders", "parallel", {})
M = FoundWorkflow("B", "/B/Items", "map", {})
M2 = FoundWorkflow("A", "/A/Items", "map", {})


def test_one_workflow_is_chosen_without_flags():
    assert choose([P], ["A"], stack=None, kind=None, where="--app x") == P


def test_several_stacks_need_stack_and_the_error_lists_them():
    with pytest.raises(AppSourceError, match=r"several stacks hold a workflow: A \(parallel\), B \(map\); pass --stack NAME"):
        choose([P, M], ["A", "B"], stack=None, kind=None, where="--app x")
    assert choose([P, M], ["A", "B"], stack="B", kind=None, where="--app x") == M
    assert choose([P, M], ["A", "B"], stack=None, kind="map", where="--app x") == M


def test_unknown_stack_and_missing_kind_are_one_line():
    with pytest.raises(AppSourceError, match=r"--stack C: no such stack in --app x \(stacks: A, B\)"):
        choose([P, M], ["A", "B"], stack="C", kind=None, where="--app x")
    with pytest.raises(AppSourceError, match=r"--workflow ledger: --app x has no ledger workflow; it has: map \(B\), parallel \(A\)"):
        choose([P, M], ["A", "B"], stack=None, kind="ledger", where="--app x")
    with pytest.raises(AppSourceError, match="several workflows: /A/Orders .parallel., /A/Items .map.; pass --workflow"):
        choose([P, M2], ["A"], stack=None, kind=None, where="--app x")
    with pytest.raises(AppSourceError, match="no workflow of the fan-out kit in any stack"):
        choose([], ["A"], stack=None, kind=None, where="--app x")


def test_workflows_are_read_from_the_metadata_file_of_newer_cdk_versions(tmp_path):
    (tmp_path / "S.template.json").write_text(json.dumps({"Resources": {}}))
    entry = {"type": WORKFLOW_METADATA, "data": {"kind": "map", "outputs": {"StateMachineArn": {"Ref": "SM"}}}}
    (tmp_path / "S.metadata.json").write_text(json.dumps({
        "/S/Items": [entry],
        "/S/Items/Workflow/StateMachine/Resource": [{"type": "aws:cdk:logicalId", "data": "SM"}],
        "/S/ItemsOther/Resource": [{"type": "aws:cdk:logicalId", "data": "Other"}],  # not under /S/Items/
    }))
    (tmp_path / "manifest.json").write_text(json.dumps({"artifacts": {"S": {
        "type": "aws:cloudformation:stack", "environment": "aws://unknown-account/unknown-region",
        "properties": {"templateFile": "S.template.json"}, "additionalMetadataFile": "S.metadata.json"}}}))
    found, templates, regions = find_workflows(tmp_path)
    assert found == [FoundWorkflow("S", "/S/Items", "map", {"StateMachineArn": {"Ref": "SM"}}, frozenset({"SM"}))]
    assert list(templates) == ["S"] and regions == {"S": ""}


def test_cli_app_errors_are_one_line_exit_2(tmp_path, capsys):
    batch = tmp_path / "b.json"
    batch.write_text("{}")
    assert main(["run", str(batch), "--app", str(tmp_path / "nowhere")]) == 2
    assert f"--app {tmp_path / 'nowhere'}: no such directory" in capsys.readouterr().err
    assert main(["run", str(batch), "--app", str(tmp_path)]) == 2
    assert "neither a CDK app (cdk.json) nor a cloud assembly (manifest.json)" in capsys.readouterr().err
    (tmp_path / "cdk.json").write_text('{"context": {}}')
    assert main(["run", str(batch), "--app", str(tmp_path)]) == 2
    assert 'cdk.json has no "app" command' in capsys.readouterr().err
    (tmp_path / "cdk.json").write_text('{"app": "python3 -c \\"raise SystemExit(\'no stacks here\')\\""}')
    assert main(["run", str(batch), "--app", str(tmp_path)]) == 2
    assert "synth failed" in (err := capsys.readouterr().err) and "no stacks here" in err and len(err.splitlines()) == 1
    assert main(["run", str(batch), "--stack", "S"]) == 2
    assert "--stack S: needs --app PATH" in capsys.readouterr().err


def test_each_construct_of_this_app_is_found_with_its_outputs(dev_app):
    """The three constructs record their kind and outputs (ledger: its tables and intake)."""
    found, templates, _ = find_workflows(dev_app.outdir)
    by_kind = {w.kind: w for w in found}
    assert sorted(by_kind) == ["ledger", "map", "parallel"]
    for kind, workflow in by_kind.items():
        assert workflow.stack == dev_app.workflow_stacks[kind]
        resources = templates[workflow.stack]["Resources"]
        for value in workflow.outputs.values():  # each a Ref / GetAtt of a resource of the stack
            (intrinsic, arg), = value.items()
            logical_id = arg if intrinsic == "Ref" else arg[0]
            assert logical_id in resources, (kind, value)
    # the values of add_outputs(), one list (fanout_kit.shared.outputs); AlarmTopicArn: alarms are on here
    assert sorted(by_kind["parallel"].outputs) == ["AlarmTopicArn", "DeadLetterQueueUrl", "StateMachineArn", "StatusTableName"]
    assert sorted(by_kind["map"].outputs) == [
        "AlarmTopicArn", "BatchBucketName", "DeadLetterQueueUrl", "StateMachineArn", "StatusTableName"]
    assert {"LedgerTableName", "StatusTableName", "ChildQueueUrl", "ChildStreamArn"} <= set(by_kind["ledger"].outputs)

"""IAM proven by the calls: the policy evaluator, the call -> IAM action/resource mapping, the
recorder in the local engine (a call the role does not allow is caught), and ``fanout iam-report``
over every local scenario (0 denied; every unused grant has its reason)."""

from __future__ import annotations

import copy
import dataclasses
import io

import pytest

from fanout_kit.local.iam import Permission, UnmappedCall, permissions_for
from fanout_kit.local.iam_policy import Request, UnsupportedPolicy, evaluate

ALLOW_TABLE = {"Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"],
               "Resource": "arn:aws:dynamodb:eu-west-1:1:table/T"}


def doc(*statements):
    return {"Version": "2012-10-17", "Statement": list(statements)}


def test_allow_needs_a_matching_action_and_resource():
    assert evaluate([doc(ALLOW_TABLE)], Request("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:1:table/T")) == "Allow"
    assert evaluate([doc(ALLOW_TABLE)], Request("dynamodb:PutItem", "arn:aws:dynamodb:eu-west-1:1:table/T")) == "ImplicitDeny"
    assert evaluate([doc(ALLOW_TABLE)], Request("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:1:table/T2")) == "ImplicitDeny"


def test_actions_are_case_insensitive_and_resources_case_sensitive():
    assert evaluate([doc(ALLOW_TABLE)], Request("DynamoDB:getitem", "arn:aws:dynamodb:eu-west-1:1:table/T")) == "Allow"
    assert evaluate([doc(ALLOW_TABLE)], Request("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:1:table/t")) == "ImplicitDeny"


def test_wildcards_star_and_question_mark_only():
    st = {"Effect": "Allow", "Action": "s3:Get*", "Resource": "arn:aws:s3:::b/results/?.json"}
    assert evaluate([doc(st)], Request("s3:GetObject", "arn:aws:s3:::b/results/1.json")) == "Allow"
    assert evaluate([doc(st)], Request("s3:GetObject", "arn:aws:s3:::b/results/12.json")) == "ImplicitDeny"
    dotted = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/a.b"}
    assert evaluate([doc(dotted)], Request("s3:GetObject", "arn:aws:s3:::b/aXb")) == "ImplicitDeny"  # '.' is literal


def test_an_explicit_deny_wins_across_documents():
    deny = {"Effect": "Deny", "Action": "dynamodb:*", "Resource": "*"}
    assert evaluate([doc(ALLOW_TABLE), doc(deny)], Request("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:1:table/T")) == "ExplicitDeny"


def test_an_allow_whose_condition_does_not_match_does_not_apply_and_is_no_deny():
    conditional = {**ALLOW_TABLE, "Condition": {"StringEquals": {"aws:SourceAccount": "1"}}}
    request = Request("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:1:table/T", context={"aws:SourceAccount": "2"})
    assert evaluate([doc(conditional), doc(ALLOW_TABLE)], request) == "Allow"
    assert evaluate([doc(conditional)], request) == "ImplicitDeny"


def test_not_resource_and_unknown_condition_operators():
    st = {"Effect": "Allow", "Action": "sqs:*", "NotResource": "arn:aws:sqs:eu-west-1:1:secret"}
    assert evaluate([doc(st)], Request("sqs:SendMessage", "arn:aws:sqs:eu-west-1:1:q")) == "Allow"
    assert evaluate([doc(st)], Request("sqs:SendMessage", "arn:aws:sqs:eu-west-1:1:secret")) == "ImplicitDeny"
    odd = {**ALLOW_TABLE, "Condition": {"NumericLessThan": {"aws:x": "1"}}}
    with pytest.raises(UnsupportedPolicy, match="NumericLessThan"):
        evaluate([doc(odd)], Request("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:1:table/T"))


REGION = "eu-west-1"


@pytest.mark.parametrize(
    "service, operation, params, expected",
    [
        ("dynamodb", "GetItem", {"TableName": "T"}, [("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:123456789012:table/T")]),
        ("dynamodb", "Query", {"TableName": "T", "IndexName": "I"}, [("dynamodb:Query", "arn:aws:dynamodb:eu-west-1:123456789012:table/T/index/I")]),
        ("dynamodb", "TransactWriteItems",
         {"TransactItems": [{"Update": {"TableName": "A"}}, {"ConditionCheck": {"TableName": "B"}}]},
         [("dynamodb:UpdateItem", "arn:aws:dynamodb:eu-west-1:123456789012:table/A"),
          ("dynamodb:ConditionCheckItem", "arn:aws:dynamodb:eu-west-1:123456789012:table/B")]),
        ("sqs", "SendMessageBatch", {"QueueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/q"},
         [("sqs:SendMessage", "arn:aws:sqs:eu-west-1:123456789012:q")]),
        ("sqs", "SendMessage", {"QueueUrl": "http://127.0.0.1:5000/123456789012/q"}, [("sqs:SendMessage", "arn:aws:sqs:eu-west-1:123456789012:q")]),
        ("s3", "HeadObject", {"Bucket": "b", "Key": "manifests/x"}, [("s3:GetObject", "arn:aws:s3:::b/manifests/x")]),
        ("s3", "ListObjectsV2", {"Bucket": "b"}, [("s3:ListBucket", "arn:aws:s3:::b")]),
        ("lambda", "Invoke", {"FunctionName": "f", "Qualifier": "live"}, [("lambda:InvokeFunction", "arn:aws:lambda:eu-west-1:123456789012:function:f:live")]),
        ("stepfunctions", "DescribeMapRun", {"mapRunArn": "arn:aws:states:x"}, [("states:DescribeMapRun", "arn:aws:states:x")]),
        ("kinesis", "PutRecords", {"StreamName": "s"}, [("kinesis:PutRecords", "arn:aws:kinesis:eu-west-1:123456789012:stream/s")]),
    ],
)
def test_calls_map_to_their_iam_action_and_resource(service, operation, params, expected):
    assert permissions_for(service, operation, params, REGION) == tuple(Permission(*e) for e in expected)


def test_an_unknown_call_is_not_guessed():
    with pytest.raises(UnmappedCall):
        permissions_for("ec2", "RunInstances", {}, REGION)


def _without_grant(app, workflow, action):
    """The app with ``action`` removed from every policy of that workflow's stack."""
    templates = copy.deepcopy(app.templates)
    template = templates[app.workflow_stacks[workflow]]
    for res in template["Resources"].values():
        if res["Type"] != "AWS::IAM::Policy":
            continue
        for st in res["Properties"]["PolicyDocument"]["Statement"]:
            actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
            kept = [a for a in actions if a != action]
            st["Action"] = kept or ["none:None"]
    return dataclasses.replace(app, templates=templates)


def test_a_call_the_role_does_not_allow_is_reported_denied(dev_app):
    """The state machine's DLQ send, with sqs:SendMessage taken out of its synthesized policy."""
    from fanout_kit.cli.iam_report import _example
    from fanout_kit.local.engine import LocalEngine

    app = _without_grant(dev_app, "parallel", "sqs:SendMessage")
    with LocalEngine(app, sleep_retries=False) as engine:
        engine.run("parallel", _example("denied", NotifyCustomer={"mode": "fatal"}))
        denied = engine.iam_report().denied()
    assert {(p.label, perm.action, decision) for p, _, perm, decision in denied} >= {
        ("StateMachine", "sqs:SendMessage", "ImplicitDeny")
    }


def test_iam_report_finds_no_denied_call_and_a_reason_for_every_unused_grant(dev_app):
    from fanout_kit.cli.iam_report import collect, render

    summary = collect(app=dev_app)
    out = io.StringIO()
    render(summary, out)
    text = out.getvalue()
    assert summary.denied == []
    assert summary.unexplained == []
    assert summary.calls > 100
    last = text.rstrip().splitlines()[-1]
    assert last == f"iam: {summary.calls} calls, 0 denied, {summary.unused} unused grants"
    # The calls the issue named are seen and allowed.
    parallel_sm = summary.roles[("parallel", "StateMachine")].calls
    assert any(a == "dynamodb:GetItem" and d == "Allow" for a, _, d in parallel_sm)  # the duplicate-start read
    guard = summary.roles[("parallel", "RecordExecutionFailure")].calls
    assert {a for a, _, _ in guard} == {"dynamodb:UpdateItem", "sqs:SendMessage"}


def test_prepare_batch_may_list_the_bucket_so_a_missing_manifest_is_a_404(dev_app):
    """AWS behaviour moto does not show: without s3:ListBucket, GetObject of a missing key is 403."""
    from fanout_kit.local.iam import stack_principals
    from fanout_kit.local.template import resources_of_type

    template = dev_app.template("map")
    principals = stack_principals("map", template, dev_app.region)
    (prepare,) = [p for p in principals.values() if p.label == "PrepareBatch"]
    (bucket_id,) = [lid for lid, r in resources_of_type(template, "AWS::S3::Bucket").items() if "LoggingConfiguration" in r["Properties"]]
    from fanout_kit.local.template import bucket_name

    assert evaluate(prepare.documents, Request("s3:ListBucket", f"arn:aws:s3:::{bucket_name(bucket_id)}")) == "Allow"


def test_iam_report_names_an_unknown_environment_in_one_line(capsys):
    from fanout_kit.cli.main import main

    assert main(["iam-report", "--env", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fanout iam-report: --env: unknown environment 'nope': pass -c env=NAME with one of: dev, prod"]


def test_iam_report_flags_of_another_app_are_checked_before_any_synth(capsys, tmp_path):
    from fanout_kit.cli.main import main

    assert main(["iam-report", "--stack", "Shop"]) == 2
    assert capsys.readouterr().err.strip() == (
        "fanout iam-report: --stack NAME goes with --app PATH (this repository's app: --env)")
    bad = tmp_path / "batch.json"
    bad.write_text("{nope")
    assert main(["iam-report", "--app", str(tmp_path), "--input", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fanout: --input {bad}: not valid JSON")
    bad.write_text('{"batchId": "x"}')
    assert main(["iam-report", "--app", str(tmp_path), "--input", str(bad)]) == 2
    assert 'expected a batch input with "tasks" (Parallel) or "items" (Map)' in capsys.readouterr().err
    assert main(["iam-report", "--app", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.strip() == f"fanout: --app {tmp_path / 'missing'}: no such directory"

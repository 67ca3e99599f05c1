"""Alarms per environment: what each watches, its threshold from cdk.json, and its SNS action."""

import pytest

from fanout_kit.local.iam_policy import Request, evaluate
from fanout_kit.local.template import resources_of_type
from stacks.config import load_environment, read_cdk_context
from tests.conftest import ENVIRONMENTS

CONTEXT = read_cdk_context()


def alarm_list(template):
    """(alarm logical id prefix, metric, threshold) of every alarm in a template."""
    out = []
    for lid, alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").items():
        p = alarm["Properties"]
        out.append((lid, p["Namespace"], p["MetricName"], p["Threshold"], p.get("AlarmActions")))
    return sorted(out)


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("workflow", ["parallel", "map"])
def test_workflow_alarms_watch_the_right_metrics_with_configured_thresholds(synthesized, env_name, workflow):
    cfg = load_environment(CONTEXT, env_name)
    template = synthesized(env_name).template(workflow)
    (topic_id,) = resources_of_type(template, "AWS::SNS::Topic")
    alarms = alarm_list(template)
    by_metric = {}
    for lid, namespace, metric, threshold, actions in alarms:
        assert actions == [{"Ref": topic_id}], lid  # every alarm notifies the topic
        by_metric.setdefault((namespace, metric), []).append(threshold)
    assert by_metric[("AWS/SQS", "ApproximateNumberOfMessagesVisible")] == [cfg.alarms.dlq_visible_messages]
    assert by_metric[("AWS/States", "ExecutionsFailed")] == [cfg.alarms.executions_failed]
    assert by_metric[("AWS/States", "ExecutionsTimedOut")] == [cfg.alarms.executions_timed_out]
    # the kit's functions (CDK's own custom-resource providers, e.g. the dev bucket's auto-delete, have none)
    functions = sum(
        "POWERTOOLS_SERVICE_NAME" in f["Properties"].get("Environment", {}).get("Variables", {})
        for f in resources_of_type(template, "AWS::Lambda::Function").values()
    )
    assert by_metric[("AWS/Lambda", "Errors")] == [cfg.alarms.lambda_errors] * functions
    assert by_metric[("AWS/Lambda", "Throttles")] == [cfg.alarms.lambda_throttles] * functions
    for alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["Period"] == cfg.alarms.period_minutes * 60


@pytest.mark.parametrize("workflow", ["parallel", "map"])
def test_alarm_topic_is_encrypted_and_tls_only_and_a_dashboard_exists(dev_app, workflow):
    template = dev_app.template(workflow)
    (topic,) = resources_of_type(template, "AWS::SNS::Topic").values()
    (key_id,) = resources_of_type(template, "AWS::KMS::Key")
    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert resources_of_type(template, "AWS::KMS::Key")[key_id]["Properties"]["EnableKeyRotation"] is True
    (policy,) = resources_of_type(template, "AWS::SNS::TopicPolicy").values()
    deny = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert deny == [{**deny[0], "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]
    assert len(resources_of_type(template, "AWS::CloudWatch::Dashboard")) == 1


# ---- Can CloudWatch actually deliver each alarm? Evaluated from the template's key policy and
# topic policy the way AWS evaluates a resource policy for a service principal: an Allow statement
# must match principal, action, resource and conditions, and no Deny may match. CloudWatch
# publishes as cloudwatch.amazonaws.com, over TLS, with aws:SourceAccount / aws:SourceArn set to
# the alarm's account and ARN (https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html,
# "Enable compatibility between event sources from AWS services and encrypted topics").

ACCOUNT, REGION = "123456789012", "eu-west-1"
PSEUDO = {"AWS::AccountId": ACCOUNT, "AWS::Partition": "aws", "AWS::Region": REGION}


def _resolve(value, refs):
    if isinstance(value, dict) and len(value) == 1:
        (k, v), = value.items()
        if k == "Ref":
            return PSEUDO.get(v) or refs[v]
        if k == "Fn::GetAtt":
            return refs[f"{v[0]}.{v[1]}"]
        if k == "Fn::Join":
            return v[0].join(str(_resolve(p, refs)) for p in v[1])
    if isinstance(value, dict):
        return {k: _resolve(v, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, refs) for v in value]
    return value


def resource_policy_allows(document, *, principal, action, resource, context) -> bool:
    """The same evaluator the IAM check uses (fanout_kit/local/iam_policy.py), for a service principal."""
    request = Request(action, resource, principal_service=principal, context=context)
    return evaluate([document], request) == "Allow"


def undeliverable_alarms(template, *, source_account=ACCOUNT):
    """(alarm, reason) for every alarm action CloudWatch could not deliver."""
    refs = {}
    for lid, res in template["Resources"].items():
        refs[lid] = f"arn:aws:{res['Type'].split('::')[1].lower()}:{REGION}:{ACCOUNT}:{lid}"
        refs[f"{lid}.Arn"] = refs[lid]
    topic_policies = {}
    for res in resources_of_type(template, "AWS::SNS::TopicPolicy").values():
        for topic in res["Properties"]["Topics"]:
            topic_policies[topic["Ref"]] = _resolve(res["Properties"]["PolicyDocument"], refs)
    out = []
    for alarm_id, alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").items():
        context = {
            "aws:SourceAccount": source_account,
            "aws:SourceArn": f"arn:aws:cloudwatch:{REGION}:{source_account}:alarm:{alarm_id}",
            "aws:SecureTransport": "true",
        }
        request = dict(principal="cloudwatch.amazonaws.com", context=context)
        for action in alarm["Properties"].get("AlarmActions", []):
            topic_id = action.get("Ref") if isinstance(action, dict) else None
            topic = template["Resources"].get(topic_id or "", {})
            if topic.get("Type") != "AWS::SNS::Topic":
                out.append((alarm_id, f"action {action} is not a topic of this stack"))
                continue
            policy = topic_policies.get(topic_id)
            if not policy or not resource_policy_allows(policy, action="sns:Publish", resource=refs[topic_id], **request):
                out.append((alarm_id, f"topic {topic_id}: policy does not allow CloudWatch sns:Publish"))
            key = topic["Properties"].get("KmsMasterKeyId")
            if key is None:
                continue
            key_id = key.get("Fn::GetAtt", [None])[0] if isinstance(key, dict) else None
            if key_id not in template["Resources"]:
                out.append((alarm_id, f"topic {topic_id}: key {key} is not a customer-managed key of this stack"))
                continue
            key_policy = _resolve(template["Resources"][key_id]["Properties"]["KeyPolicy"], refs)
            for kms_action in ("kms:Decrypt", "kms:GenerateDataKey"):
                if not resource_policy_allows(key_policy, action=kms_action, resource=refs[key_id], **request):
                    out.append((alarm_id, f"topic {topic_id}: key {key_id} does not allow CloudWatch {kms_action}"))
    return out


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("stack", ["parallel", "map", "ledger"])
def test_cloudwatch_can_deliver_every_alarm(synthesized, env_name, stack):
    template = synthesized(env_name).template(stack)
    assert resources_of_type(template, "AWS::CloudWatch::Alarm")
    assert undeliverable_alarms(template) == []
    # ...and only this account's alarms may use the key and the topic.
    foreign = undeliverable_alarms(template, source_account="210987654321")
    assert len(foreign) >= len(resources_of_type(template, "AWS::CloudWatch::Alarm"))


def test_the_delivery_check_fails_for_the_aws_managed_key_and_a_deny_only_topic_policy(dev_app):
    """What the kit shipped before: alias/aws/sns and the TLS-only Deny as the whole policy."""
    import copy

    template = copy.deepcopy(dev_app.template("parallel"))
    (topic_id,) = resources_of_type(template, "AWS::SNS::Topic")
    template["Resources"][topic_id]["Properties"]["KmsMasterKeyId"] = "alias/aws/sns"
    (policy,) = resources_of_type(template, "AWS::SNS::TopicPolicy").values()
    doc = policy["Properties"]["PolicyDocument"]
    doc["Statement"] = [s for s in doc["Statement"] if s["Effect"] == "Deny"]
    reasons = {reason.split(":", 1)[1].strip() for _, reason in undeliverable_alarms(template)}
    assert reasons == {
        "policy does not allow CloudWatch sns:Publish",
        "key alias/aws/sns is not a customer-managed key of this stack",
    }


def test_prod_alarms_are_stricter_than_dev(synthesized):
    dev = {a[2]: a[3] for a in alarm_list(synthesized("dev").template("parallel"))}
    prod = {a[2]: a[3] for a in alarm_list(synthesized("prod").template("parallel"))}
    assert prod["Errors"] < dev["Errors"] and prod["Throttles"] < dev["Throttles"]


def test_ledger_alarms_notify_their_topic(dev_app):
    template = dev_app.template("ledger")
    (topic_id,) = resources_of_type(template, "AWS::SNS::Topic")
    alarms = alarm_list(template)
    assert {m for _, _, m, _, _ in alarms} == {
        "LedgerBatchFailed", "ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage",
    }
    assert all(actions == [{"Ref": topic_id}] for *_, actions in alarms)

"""Alarms per environment: what each watches, its threshold from cdk.json, and its SNS action."""

import pytest

from fanout.local.template import resources_of_type
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
    functions = len(resources_of_type(template, "AWS::Lambda::Function"))
    assert by_metric[("AWS/Lambda", "Errors")] == [cfg.alarms.lambda_errors] * functions
    assert by_metric[("AWS/Lambda", "Throttles")] == [cfg.alarms.lambda_throttles] * functions
    for alarm in resources_of_type(template, "AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["Period"] == cfg.alarms.period_minutes * 60


@pytest.mark.parametrize("workflow", ["parallel", "map"])
def test_alarm_topic_is_encrypted_and_tls_only_and_a_dashboard_exists(dev_app, workflow):
    template = dev_app.template(workflow)
    (topic,) = resources_of_type(template, "AWS::SNS::Topic").values()
    key = topic["Properties"]["KmsMasterKeyId"]["Fn::Join"][1]
    assert key[-1] == ":alias/aws/sns"  # the AWS-managed SNS key
    (policy,) = resources_of_type(template, "AWS::SNS::TopicPolicy").values()
    (deny,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert len(resources_of_type(template, "AWS::CloudWatch::Dashboard")) == 1


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

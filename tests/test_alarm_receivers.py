"""A first deploy's alarms reach someone: ``alarm_email_addresses`` subscribes e-mail addresses
to the alarm topic (all three constructs), and a new topic nobody subscribes to is a synth
warning naming the props that fix it; a reserved concurrency the account's Lambda quota cannot
hold is refused at synth (``ResourceSettings.account_concurrency_limit``)."""

import pytest
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Annotations, Match, Template

from fanout_kit import (
    AlarmThresholds,
    CompletionLedger,
    DistributedMapFanOut,
    FanOutTask,
    MapSettings,
    ParallelFanOut,
    ResourceSettings,
)
from fanout_kit.shared.alarms import NO_RECEIVER_WARNING
from fanout_kit.shared.app_config import load_environment, read_cdk_context
from fanout_kit.shared.checks import ConfigError
from tests.test_constructs import bare_stack, user_function

BUILDERS = {
    "parallel": lambda s, **kw: ParallelFanOut(s, "W", tasks=[FanOutTask("Ship", user_function(s, "Ship"))], **kw),
    "map": lambda s, **kw: DistributedMapFanOut(s, "W", worker=FanOutTask("Work", user_function(s, "Work")), **kw),
    "ledger": lambda s, **kw: CompletionLedger(s, "W", processing_function=user_function(s, "Process"),
                                               kinesis_intake=False, **kw),
}


def warnings(stack) -> list:
    return Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp("nobody subscribes"))


@pytest.mark.parametrize("pattern", BUILDERS)
def test_each_address_is_subscribed_and_nothing_is_warned(pattern):
    stack = bare_stack()
    BUILDERS[pattern](stack, alarm_email_addresses=["oncall@example.com", "team@example.org"])
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::SNS::Subscription", 2)
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"})
    assert warnings(stack) == []


@pytest.mark.parametrize("pattern", BUILDERS)
def test_a_new_topic_nobody_subscribes_to_is_a_synth_warning(pattern):
    stack = bare_stack()
    BUILDERS[pattern](stack)
    (warning,) = warnings(stack)
    text = str(warning.entry.data)
    assert "alarm_email_addresses" in text and "existing_alarm_topic" in text and NO_RECEIVER_WARNING in text
    Template.from_stack(stack).resource_count_is("AWS::SNS::Subscription", 0)


def test_an_existing_topic_is_taken_as_subscribed():
    stack = bare_stack()
    BUILDERS["parallel"](stack, existing_alarm_topic=sns.Topic(stack, "Mine"))
    assert warnings(stack) == []


@pytest.mark.parametrize(("props", "message"), [
    ({"alarm_email_addresses": "oncall@example.com"}, "alarm_email_addresses: must be a list of e-mail addresses"),
    ({"alarm_email_addresses": ["oncall"]}, "alarm_email_addresses: 'oncall' is not an e-mail address"),
    ({"alarm_email_addresses": ["a@example.com"], "alarms": None}, "alarm_email_addresses: alarms are off"),
])
def test_wrong_receivers_are_refused_naming_the_prop(props, message):
    with pytest.raises(ConfigError, match=message):
        BUILDERS["parallel"](bare_stack(), **props)


def test_a_reserved_concurrency_the_account_cannot_hold_is_refused_at_synth():
    # Lambda keeps 100 unreserved: 500 needs a quota of at least 600 (PutFunctionConcurrency)
    reserved = MapSettings(max_concurrency=100, worker_reserved_concurrency=500)
    with pytest.raises(ConfigError, match=r"map.worker_reserved_concurrency: 500 leaves fewer than 100 of the "
                                          r"account's 599 .* at most 499"):
        BUILDERS["map"](bare_stack(), map=reserved, settings=ResourceSettings(account_concurrency_limit=599))
    BUILDERS["map"](bare_stack(), map=reserved, settings=ResourceSettings(account_concurrency_limit=600))
    BUILDERS["map"](bare_stack(), map=reserved)  # no quota given: not checked
    with pytest.raises(ConfigError, match="account_concurrency_limit"):
        ResourceSettings(account_concurrency_limit=0)


def test_cdk_json_names_the_receivers_and_the_quota():
    context = read_cdk_context()
    env = dict(context["fanout:environments"]["prod"])
    cfg = load_environment({**context, "fanout:environments": {"prod": {
        **env, "alarmEmailAddresses": ["oncall@example.com"], "accountConcurrencyLimit": 1000}}}, "prod")
    assert cfg.alarm_email_addresses == ("oncall@example.com",) and cfg.resources.account_concurrency_limit == 1000
    for key, value, message in [("alarmEmailAddresses", "x@y.z", "alarmEmailAddresses: must be a list"),
                                ("accountConcurrencyLimit", "1000", "accountConcurrencyLimit: must be null")]:
        with pytest.raises(ConfigError, match=message):
            load_environment({**context, "fanout:environments": {"prod": {**env, key: value}}}, "prod")
    assert AlarmThresholds()  # the default thresholds stay valid

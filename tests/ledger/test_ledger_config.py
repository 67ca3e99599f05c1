"""cdk.json ``ledger`` settings: parsed per environment, every bad field named."""

from __future__ import annotations

import copy
import re

import pytest

from fanout_kit.shared.settings import LedgerSettings
from stacks.config import ENVIRONMENTS_KEY, ConfigError, cdk_json_name, load_ledger_settings, read_cdk_context

FIELDS = [cdk_json_name(name) for name in LedgerSettings.RANGES]  # the cdk.json names


@pytest.fixture(scope="module")
def environments():
    return read_cdk_context()[ENVIRONMENTS_KEY]


def test_dev_and_prod_settings_load(environments):
    dev = load_ledger_settings(environments["dev"], "dev")
    prod = load_ledger_settings(environments["prod"], "prod")
    assert dev == LedgerSettings(10, 0, 7, 60, 5, 10, 100, 3, 1, 5, counter_shards=1)
    assert (prod.ttl_days, prod.max_receive_count, prod.kinesis_shard_count) == (30, 5, 2)
    assert prod.counter_shards == 8
    assert FIELDS[0] == "consumerMaxConcurrency" and "counterShards" in FIELDS


def test_the_construct_checks_the_same_ranges_with_its_own_prop_names():
    with pytest.raises(ConfigError, match=r"^ledger\.counter_shards: must be a whole number from 1 to 99 "):
        LedgerSettings(counter_shards=100)


def test_max_receive_count_below_aws_guidance_is_refused_in_one_line():
    with pytest.raises(ConfigError) as refused:
        LedgerSettings(max_receive_count=3)
    assert str(refused.value) == (
        "ledger.max_receive_count: must be a whole number from 5 to 1000 (SQS redrive policy maxReceiveCount; "
        "AWS advises at least 5 for a Lambda event source), got 3"
    )


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("consumerMaxConcurrency", 1, "consumerMaxConcurrency: must be a whole number from 2 to 1000"),
        ("failureThreshold", -1, "failureThreshold: must be a whole number from 0"),
        ("batchSize", 11, "batchSize: must be a whole number from 1 to 10"),
        ("maxReceiveCount", "3", "maxReceiveCount: must be a whole number from 5 to 1000 (SQS redrive"),
        ("maxReceiveCount", 4, "maxReceiveCount: must be a whole number from 5 to 1000 (SQS redrive policy "
                               "maxReceiveCount; AWS advises at least 5 for a Lambda event source), got 4"),
        ("ttlDays", True, "ttlDays: must be a whole number"),
        ("counterShards", 0, "counterShards: must be a whole number from 1 to 99 (counter items per batch"),
        ("counterShards", 100, "counterShards: must be a whole number from 1 to 99"),
        ("counterShards", 2.5, "counterShards: must be a whole number from 1 to 99"),
    ],
)
def test_bad_values_name_the_field(environments, field, value, message):
    env = copy.deepcopy(environments["dev"])
    env["ledger"][field] = value
    with pytest.raises(ConfigError, match=re.escape(f"context.fanout:environments.dev.ledger.{message}")):
        load_ledger_settings(env, "dev")


def test_missing_unknown_and_absent_fields(environments):
    env = copy.deepcopy(environments["dev"])
    del env["ledger"]["deadlineMinutes"]
    with pytest.raises(ConfigError, match=r"ledger\.deadlineMinutes: .* got None"):
        load_ledger_settings(env, "dev")
    env["ledger"]["deadlineMinutes"] = 5
    env["ledger"]["shards"] = 4
    with pytest.raises(ConfigError, match=r"ledger\.shards: unknown setting"):
        load_ledger_settings(env, "dev")
    with pytest.raises(ConfigError, match=r"prod\.ledger: missing; must be an object with " + ", ".join(FIELDS)):
        load_ledger_settings({}, "prod")

"""cdk.json settings: per-environment values, per-task Retry overrides, clear errors."""

import copy

import pytest

from stacks.config import ConfigError, load_environment, read_cdk_context
from fanout_kit.shared.retry_policy import RetryConfigError, RetrySettings

CONTEXT = read_cdk_context()


def test_unknown_environment_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown environment 'staging': pass -c env=NAME with one of: dev, prod"):
        load_environment(CONTEXT, "staging")


def test_no_environment_chosen():
    with pytest.raises(ConfigError, match="no environment chosen: pass -c env=NAME"):
        load_environment(CONTEXT, None)


def test_environments_differ_where_they_should():
    dev, prod = load_environment(CONTEXT, "dev"), load_environment(CONTEXT, "prod")
    assert dev.stack_prefix != prod.stack_prefix
    assert (dev.removal_policy, prod.removal_policy) == ("destroy", "retain")
    assert dev.log_retention_days < prod.log_retention_days
    assert dev.tasks[0].retryable != prod.tasks[0].retryable
    assert dev.alarms != prod.alarms


def test_per_task_override_merges_over_the_environment_default():
    dev = load_environment(CONTEXT, "dev")
    by_name = {t.name: t for t in dev.tasks}
    default = RetrySettings._parse(CONTEXT["fanout:environments"]["dev"]["retry"]["retryable"], "x")
    assert by_name["ReserveInventory"].retryable == default
    assert by_name["ChargePayment"].retryable.max_attempts == 4
    assert by_name["ChargePayment"].retryable.interval_seconds == default.interval_seconds


def _with(path, value):
    ctx = copy.deepcopy(CONTEXT)
    node = ctx
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return ctx


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("fanout:environments", "dev", "removalPolicy"), "keep", "dev.removalPolicy: must be 'destroy' or 'retain'"),
        (("fanout:environments", "dev", "region"), "mars", "dev.region: must be an AWS region"),
        (("fanout:environments", "dev", "retry", "transient", "maxAttempts"), -1, "dev.retry.transient.maxAttempts: must be a whole number from 0 to 99999999"),
        (("fanout:environments", "dev", "retry", "dlqSend", "backoffRate"), 0.5, "dev.retry.dlqSend.backoffRate: must be a number >= 1.0"),
        (("fanout:environments", "dev", "alarms", "lambdaErrors"), 0, "dev.alarms.lambdaErrors: must be a whole number >= 1"),
        (("fanout:tasks", 0, "name"), "lower", "fanout:tasks[0].name: must be PascalCase"),
        (("fanout:tasks", 1, "name"), "ReserveInventory", "ReserveInventory is configured twice"),
        (("fanout:tasks", 0, "retry"), {"transient": {"maxAtempts": 1}}, "unknown setting(s) maxAtempts"),
    ],
)
def test_bad_settings_name_the_field(path, value, message):
    with pytest.raises(ConfigError) as err:
        load_environment(_with(path, value), "dev")
    assert message in str(err.value)


def test_backoff_ceilings_are_exponential_and_capped():
    policy = RetrySettings(interval_seconds=2, max_attempts=5, backoff_rate=2.0, max_delay_seconds=10)
    assert policy.backoff_ceilings() == [2, 4, 8, 10, 10]
    assert policy.worst_case_wait_seconds() == 34


def test_max_delay_below_interval_is_refused():
    with pytest.raises(RetryConfigError, match="maxDelaySeconds: must be >= intervalSeconds"):
        RetrySettings._parse({"intervalSeconds": 5, "maxAttempts": 1, "backoffRate": 2, "maxDelaySeconds": 2}, "r")


def test_execution_data_is_logged_in_dev_only():
    context = read_cdk_context()
    assert load_environment(context, "dev").include_execution_data is True
    assert load_environment(context, "prod").include_execution_data is False


def test_include_execution_data_must_be_a_boolean():
    import copy

    context = copy.deepcopy(read_cdk_context())
    context["fanout:environments"]["dev"]["includeExecutionData"] = "no"
    with pytest.raises(ConfigError, match=r"dev\.includeExecutionData: must be true or false"):
        load_environment(context, "dev")


def _with_map(**changes):
    context = copy.deepcopy(CONTEXT)
    context["fanout:environments"]["prod"]["map"].update(changes)
    return context


def test_map_worker_reserved_concurrency_is_optional_and_checked():
    assert load_environment(CONTEXT, "dev").map.worker_reserved_concurrency is None
    assert load_environment(CONTEXT, "prod").map.worker_reserved_concurrency == 500  # cdk.json's prod
    assert load_environment(_with_map(workerReservedConcurrency=600), "prod").map.worker_reserved_concurrency == 600
    with pytest.raises(ConfigError, match=r"prod\.map\.workerReservedConcurrency: 100 is below maxConcurrency 500"):
        load_environment(_with_map(workerReservedConcurrency=100), "prod")
    with pytest.raises(ConfigError, match=r"workerReservedConcurrency: must be a whole number"):
        load_environment(_with_map(workerReservedConcurrency=True), "prod")


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("logRetentionDays", 10, "dev.logRetentionDays: 10 is not a CloudWatch Logs retention; use one of [1, 3, 5, 7, 14,"),
        ("taskTimeoutSeconds", 901, "dev.taskTimeoutSeconds: must be a whole number from 1 to 900 (Lambda allows at most 900 s)"),
    ],
)
def test_settings_the_constructs_would_refuse_are_named_by_their_cdk_json_key(key, value, message):
    with pytest.raises(ConfigError) as err:
        load_environment(_with(("fanout:environments", "dev", key), value), "dev")
    assert message in str(err.value)


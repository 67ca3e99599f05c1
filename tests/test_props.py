"""The public API is documented where it is defined: every construct prop, shared prop and
settings field has an ``Args:`` entry with its default, the documented default is the code's, and
the pattern pages' prop tables are generated from those docstrings (tools/props_tables.py)."""

import dataclasses
import inspect

import pytest

import fanout_kit
from fanout_kit.shared import settings as settings_module
from fanout_kit.shared.checks import ConfigError
from fanout_kit.shared.props import DEFAULTS, SharedProps, WorkflowProps, prop_names, resolve_props
from fanout_kit.shared.retry_policy import RetrySettings
from tools.props_tables import NOT_PROPS, PAGES, ROOT, args, documented_props, props_pages, split_default

CONSTRUCTS = [fanout_kit.ParallelFanOut, fanout_kit.DistributedMapFanOut, fanout_kit.CompletionLedger]
SETTINGS = [fanout_kit.ResourceSettings, fanout_kit.WorkflowRetries, fanout_kit.AlarmThresholds,
            fanout_kit.MapSettings, fanout_kit.LedgerSettings, RetrySettings, fanout_kit.FanOutTask]
NAMESPACE = {**vars(settings_module), **{n: getattr(fanout_kit, n) for n in fanout_kit.__all__}}
MISSING = inspect.Parameter.empty


def documented_default_matches(where: str, documented: str, actual: object) -> None:
    """``X`` (a Python expression) must evaluate to the code's default; "required": no default;
    prose ("a new queue, ..."): the code's default is None (the kit creates the resource)."""
    if documented == "required":  # no default, or None refused with a ConfigError naming the prop
        assert actual is MISSING or actual is dataclasses.MISSING or actual is None, where
    elif documented.startswith("``"):
        expression = documented[2:documented.index("``", 2)]
        if expression.startswith("/"):  # a name pattern, not an expression (log_group_name)
            assert actual is None, where
        else:
            assert eval(expression, dict(NAMESPACE)) == actual, (where, expression, actual)  # noqa: S307
    else:
        assert documented and actual is None, (where, documented, actual)


@pytest.mark.parametrize("construct", CONSTRUCTS, ids=lambda c: c.__name__)
def test_every_construct_prop_is_documented_with_its_default(construct):
    parameters = inspect.signature(construct.__init__).parameters
    own = [name for name in parameters if name not in ("self", *NOT_PROPS)]
    documented = {name: text for name, text in args(construct.__init__).items() if name not in NOT_PROPS}
    assert list(documented) == own  # every prop, in the signature's order
    assert "**props" in args(construct.__init__)
    for name, text in documented.items():
        _, default = split_default(text)
        documented_default_matches(f"{construct.__name__}.{name}", default, parameters[name].default)


@pytest.mark.parametrize("kind", [SharedProps, WorkflowProps], ids=lambda k: k.__name__)
def test_every_shared_prop_is_documented_with_its_default(kind):
    names = [n for n in prop_names(kind) if kind is SharedProps or n not in prop_names(SharedProps)]
    assert list(args(kind)) == names
    for name, text in args(kind).items():
        _, default = split_default(text)
        documented_default_matches(f"{kind.__name__}.{name}", default, DEFAULTS[name])
    assert set(DEFAULTS) == set(prop_names(WorkflowProps))


@pytest.mark.parametrize("kind", SETTINGS, ids=lambda k: k.__name__)
def test_every_settings_field_is_documented_with_its_default(kind):
    fields = dataclasses.fields(kind)
    documented = args(kind)
    assert list(documented) == [f.name for f in fields]
    for field in fields:
        _, default = split_default(documented[field.name])
        documented_default_matches(f"{kind.__name__}.{field.name}", default, field.default)


def test_the_pattern_pages_show_the_generated_tables():
    for path, text in props_pages({}).items():
        assert path.read_text() == text, f"{path} is out of date: run .venv/bin/python -m tools.workflows"
    for page, name in PAGES.items():
        rows = [line for line in (ROOT / page).read_text().splitlines() if line.startswith("| `")]
        assert [row.split("`")[1] for row in rows][: len(documented_props(getattr(fanout_kit, name)))] == [
            p.name for p in documented_props(getattr(fanout_kit, name))]


def test_a_misspelt_shared_prop_is_refused_naming_it_and_the_props():
    with pytest.raises(ConfigError, match=r"ParallelFanOut: no prop alarm; its props are tasks, .*alarms"):
        resolve_props(WorkflowProps, {"alarm": None}, "ParallelFanOut", own=("tasks",))
    assert resolve_props(SharedProps, {"runtime_layer": False}, "X") == {
        "alarms": fanout_kit.AlarmThresholds(), "existing_alarm_topic": None, "alarm_email_addresses": (),
        "settings": fanout_kit.ResourceSettings(), "existing_status_table": None, "status_table_props": None,
        "runtime_layer": False}


def test_a_construct_refuses_an_unknown_prop_before_creating_anything():
    from aws_cdk import App, Stack

    stack = Stack(App(), "S")
    with pytest.raises(ConfigError, match="CompletionLedger: no prop kinesis"):
        fanout_kit.CompletionLedger(stack, "Ledger", kinesis=False)
    assert stack.node.children == []


def test_the_ledger_takes_an_existing_status_table_as_the_workflows_do():
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk.assertions import Template

    from tests.test_constructs import bare_stack, user_function

    stack = bare_stack()
    mine = dynamodb.Table(stack, "Mine", partition_key=dynamodb.Attribute(name="batchId", type=dynamodb.AttributeType.STRING))
    ledger = fanout_kit.CompletionLedger(stack, "Ledger", processing_function=user_function(stack, "P"),
                                         existing_status_table=mine)
    assert ledger.status_table is mine
    tables = Template.from_stack(stack).find_resources("AWS::DynamoDB::Table")
    assert len(tables) == 2  # mine and the ledger's own counter table, no second status table
    with pytest.raises(ConfigError, match="existing_status_table and status_table_props: pass one of them"):
        fanout_kit.CompletionLedger(stack, "Other", processing_function=user_function(stack, "P2"),
                                    existing_status_table=mine, status_table_props={"table_name": "x"})

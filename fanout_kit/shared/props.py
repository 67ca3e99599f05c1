"""The props the kit's constructs share, defined once: ``SharedProps`` (every construct) and
``WorkflowProps`` (the two workflows add the dead-letter queue, the status table and the state
machine's logging). Each construct takes its own props as keyword arguments and these as
``**props`` (typed with ``Unpack``, so an editor completes and checks them as if written out);
``resolve_props`` applies the defaults below and refuses an unknown name.

The defaults live in ``DEFAULTS`` (one per prop); tests/test_props.py checks that every prop has a
default and an ``Attributes:`` entry, and the pattern pages' prop tables are generated from these
docstrings (tools/props_tables.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from fanout_kit.shared.checks import ConfigError
from fanout_kit.shared.settings import AlarmThresholds, ResourceSettings

if TYPE_CHECKING:
    from aws_cdk import aws_dynamodb as dynamodb
    from aws_cdk import aws_sns as sns
    from aws_cdk import aws_sqs as sqs


class SharedProps(TypedDict, total=False):
    """The props every construct of the kit takes (keyword arguments, each optional).

    Attributes:
        alarms: The thresholds of the construct's CloudWatch alarms (dead-letter queue messages,
            failed and timed-out executions, Lambda errors and throttles). ``None``: no alarms and
            no topic (the workflows only). Default ``AlarmThresholds()``: each alarm at 1 per 5
            minutes.
        existing_alarm_topic: An SNS topic the alarms notify. Default: a new topic with its own
            KMS key (output ``AlarmTopicArn``).
        alarm_email_addresses: E-mail addresses subscribed to the alarm topic (each confirms
            from the message SNS sends). With neither these nor ``existing_alarm_topic``, the
            synth warns that the alarms reach no one. Default ``()``.
        settings: What every resource the construct creates shares: the environment's name,
            retention and deletion protection, log retention, the Powertools layer version, the
            kit's function timeout. Default ``ResourceSettings()``.
        existing_status_table: A DynamoDB table (partition key ``batchId``, string) for the
            batches' final status records, instead of a new one (exclusive with
            ``status_table_props``). Default: a new table, on demand, point-in-time recovery,
            encrypted.
        status_table_props: ``dynamodb.Table`` arguments over the kit's defaults for the new
            table (not its key). Default ``None``.
        runtime_layer: Attach the kit's runtime layer (``fanout_runtime``: error classes, event
            definitions) to your functions that are created in this app. Default ``True``.
    """

    alarms: AlarmThresholds | None
    existing_alarm_topic: sns.ITopic | None
    alarm_email_addresses: Sequence[str]
    settings: ResourceSettings
    existing_status_table: dynamodb.ITable | None
    status_table_props: Mapping[str, Any] | None
    runtime_layer: bool


class WorkflowProps(SharedProps, total=False):
    """The props ``ParallelFanOut`` and ``DistributedMapFanOut`` take besides their own: those of
    ``SharedProps`` and these (keyword arguments, each optional).

    Attributes:
        existing_dead_letter_queue: An SQS queue that receives each exhausted task or item with
            its full context, instead of a new one (exclusive with ``dead_letter_queue_props``).
            Default: a new queue, SSE, TLS only, 14 days' retention.
        dead_letter_queue_props: ``sqs.Queue`` arguments over the kit's defaults for the new
            queue. Default ``None``.
        include_execution_data: The state machine's logs carry each state's input and output.
            Default ``False``.
        log_group_name: The beginning of the state machine's log group name, under
            ``/aws/vendedlogs/states/``; the kit appends ``-<the stack id's random part>``.
            Default ``/aws/vendedlogs/states/<stack>-<construct id>``.
    """

    existing_dead_letter_queue: sqs.IQueue | None
    dead_letter_queue_props: Mapping[str, Any] | None
    include_execution_data: bool
    log_group_name: str | None


DEFAULTS: dict[str, Any] = {
    "alarms": AlarmThresholds(),
    "existing_alarm_topic": None,
    "alarm_email_addresses": (),
    "settings": ResourceSettings(),
    "runtime_layer": True,
    "existing_dead_letter_queue": None,
    "dead_letter_queue_props": None,
    "existing_status_table": None,
    "status_table_props": None,
    "include_execution_data": False,
    "log_group_name": None,
}


def prop_names(kind: type) -> tuple[str, ...]:
    """The props of ``SharedProps`` or ``WorkflowProps``, in their order."""
    return tuple(kind.__annotations__)


def resolve_props(kind: type, given: Mapping[str, Any], construct: str, own: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every prop of ``kind``: the given value, or its default. An unknown name is a ConfigError
    listing the construct's props (``own``: the construct's own ones)."""
    names = prop_names(kind)
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise ConfigError(f"{construct}: no prop {', '.join(unknown)}; its props are {', '.join(own + names)}")
    return {name: given.get(name, DEFAULTS[name]) for name in names}

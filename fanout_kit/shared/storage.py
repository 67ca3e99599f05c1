"""The kit's queues and tables, all built to the same rules: encrypted, TLS only (queues), PITR
(tables), removal policy and deletion protection per environment."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from fanout_kit.shared.settings import ResourceSettings
from fanout_kit.shared.checks import ConfigError
from fanout_kit.shared.functions import removal_policy


def checked_overrides(overrides: Mapping[str, Any] | None, construct: type, prop: str) -> dict[str, Any]:
    """``overrides`` if every key is a keyword argument of ``construct``; else a ConfigError
    naming ``prop`` and the key (instead of a TypeError from deep inside the CDK)."""
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"{prop}: must be a dict of {construct.__name__} arguments, got {overrides!r}")
    allowed = set(inspect.signature(construct.__init__).parameters) - {"self", "scope", "id"}
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        raise ConfigError(f"{prop}.{unknown[0]}: not an argument of {construct.__module__}.{construct.__name__}")
    return dict(overrides)


def secure_queue(
    scope: Construct,
    construct_id: str,
    *,
    settings: ResourceSettings,
    visibility_seconds: int,
    retention_days: int = 14,
    dead_letter_queue: sqs.DeadLetterQueue | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> sqs.Queue:
    """``overrides``: ``sqs.Queue`` keyword arguments that replace these defaults (checked by the
    caller, which knows the prop they came from: ``checked_overrides``)."""
    defaults: dict[str, Any] = dict(
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        retention_period=Duration.days(retention_days),
        visibility_timeout=Duration.seconds(visibility_seconds),
        dead_letter_queue=dead_letter_queue,
        removal_policy=removal_policy(settings),
    )
    return sqs.Queue(scope, construct_id, **{**defaults, **(overrides or {})})


def secure_table(
    scope: Construct,
    construct_id: str,
    *,
    settings: ResourceSettings,
    partition_key: str,
    sort_key: str | None = None,
    ttl_attribute: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dynamodb.Table:
    """On-demand, AWS-managed encryption, point-in-time recovery; string keys. ``overrides``:
    ``dynamodb.Table`` keyword arguments that replace these defaults (not the keys)."""
    defaults: dict[str, Any] = dict(
        partition_key=dynamodb.Attribute(name=partition_key, type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name=sort_key, type=dynamodb.AttributeType.STRING) if sort_key else None,
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True
        ),
        time_to_live_attribute=ttl_attribute,
        deletion_protection=settings.retain_data,
        removal_policy=removal_policy(settings),
    )
    return dynamodb.Table(scope, construct_id, **{**defaults, **(overrides or {})})

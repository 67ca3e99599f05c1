"""Who receives this app's alarms: the addresses of cdk.json's ``alarmEmailAddresses``. This
repository's app deploys to no team's account, so with none it acknowledges the kit's synth
warning that the alarms reach no one; a team adds its addresses (or passes
``existing_alarm_topic``) and the acknowledgement goes away."""

from __future__ import annotations

from aws_cdk import Annotations, Stack

from fanout_kit.shared.alarms import NO_RECEIVER_WARNING
from stacks.config import EnvironmentConfig


def acknowledge_unsubscribed_alarms(stack: Stack, cfg: EnvironmentConfig) -> None:
    if not cfg.alarm_email_addresses:
        Annotations.of(stack).acknowledge_warning(
            NO_RECEIVER_WARNING, "the reference app has no on-call; set alarmEmailAddresses in cdk.json")

"""The SQS dead-letter queue that receives exhausted tasks with their full context."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.functions import removal_policy
from stacks.nag_suppressions import acknowledge_dead_letter_queue


class TaskDeadLetterQueue(Construct):
    """Encrypted (SQS-managed SSE), TLS-only, 14-day retention (the SQS maximum), so a failed
    task can be inspected and redriven for two weeks."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig) -> None:
        super().__init__(scope, construct_id)
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
            visibility_timeout=Duration.minutes(5),
            removal_policy=removal_policy(cfg),
        )
        acknowledge_dead_letter_queue(self.queue)

"""The SQS dead-letter queue that receives exhausted tasks with their full context."""

from __future__ import annotations

from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.storage import secure_queue
from stacks.nag_suppressions import acknowledge_dead_letter_queue


class TaskDeadLetterQueue(Construct):
    """Encrypted (SQS-managed SSE), TLS-only, 14-day retention (the SQS maximum), so a failed
    task can be inspected and redriven for two weeks."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig) -> None:
        super().__init__(scope, construct_id)
        self.queue = secure_queue(self, "Queue", cfg=cfg, visibility_seconds=300, retention_days=14)
        acknowledge_dead_letter_queue(self.queue)

"""The SQS dead-letter queue that receives exhausted tasks with their full context."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from constructs import Construct

from fanout_kit.shared.settings import ResourceSettings
from fanout_kit.shared.storage import secure_queue
from fanout_kit.shared.nag import acknowledge_dead_letter_queue


class TaskDeadLetterQueue(Construct):
    """Encrypted (SQS-managed SSE), TLS-only, 14-day retention (the SQS maximum), so a failed
    task can be inspected and redriven for two weeks."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ResourceSettings,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.queue = secure_queue(
            self, "Queue", settings=settings, visibility_seconds=300, retention_days=14, overrides=overrides
        )
        acknowledge_dead_letter_queue(self.queue)

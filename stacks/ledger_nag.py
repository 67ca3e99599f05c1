"""cdk-nag acknowledgements of the completion-ledger stack (same pattern as stacks.nag_suppressions:
the rule, the one construct it covers, a specific reason)."""

from __future__ import annotations

from constructs import IConstruct

from stacks.nag_suppressions import acknowledge


def acknowledge_ledger_queue(queue: IConstruct, purpose: str) -> None:
    """SQS3 (queue without a DLQ) on a queue that is itself where failures land."""
    acknowledge(
        queue,
        "SQS3",
        f"This queue is {purpose}; a message it cannot record stays here (14 days) and raises the "
        "queue's depth and age alarms instead of moving to yet another queue",
    )

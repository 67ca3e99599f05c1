"""Stack: the completion ledger of one environment (CompletionLedger, from cdk.json).

    producer ─▶ SQS ChildQueue ─▶ LedgerSqsConsumer ──(last child: invoke)──▶ UpdateFinalStatus
                  └(maxReceiveCount)▶ ChildDeadLetterQueue ─▶ LedgerDlqRecorder (counts FAILED once)
    producer ─▶ Kinesis ChildStream ─▶ LedgerKinesisConsumer (bisect, partial responses)
                  └(retries exhausted: range metadata)▶ KinesisFailureQueue ─▶ LedgerKinesisFailureRecorder
    EventBridge rate(sweepIntervalMinutes) ─▶ LedgerSweeper (RUNNING past deadline -> FAILED)
"""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct

from fanout_kit.patterns.completion_ledger.construct import CompletionLedger
from fanout_kit.shared.settings import LedgerSettings
from stacks.app_functions import handler_function
from stacks.alarm_receivers import acknowledge_unsubscribed_alarms
from stacks.config import EnvironmentConfig


class CompletionLedgerStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cfg: EnvironmentConfig,
        ledger: LedgerSettings | None = None,
        **kwargs,
    ) -> None:
        """``ledger``: settings other than the environment's (tests)."""
        super().__init__(scope, construct_id, **kwargs)
        # "Default": logical ids stay those of the stack before the construct existed.
        process = handler_function(
            self, "ProcessChild", cfg, "ProcessChild", "ledger_child_work.handler",
            "Example ledger child work (lambdas/ledger_child_work.py)",
        )
        self.ledger = CompletionLedger(
            self, "Default", processing_function=process, ledger=ledger or cfg.ledger, alarms=cfg.alarms,
            alarm_email_addresses=cfg.alarm_email_addresses, settings=cfg.resources,
            kinesis_intake=True,  # this app shows both intakes (the kit's default is SQS only)
        )
        self.ledger.add_outputs()
        acknowledge_unsubscribed_alarms(self, cfg)

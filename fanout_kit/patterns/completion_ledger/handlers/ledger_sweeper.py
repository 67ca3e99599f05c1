"""Scheduled sweeper: fails every RUNNING batch of the ledger whose deadline has passed.

Candidates come from a Query on the sparse index RunningByDeadline (only open batches with a
deadline are in it; see fanout_kit.patterns.completion_ledger.ledger); each is failed by a conditional write, so a batch
that completed meanwhile, or a concurrent sweep, is never overwritten. Each batch this run fails
emits LedgerBatchFailed (the alarm) and an error log line with its batch id.
"""

import time
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from fanout_kit.patterns.completion_ledger.ledger import SWEEPER
from fanout_kit.patterns.completion_ledger.runtime import finish, ledger_from_env
from fanout_kit.shared.observability import ledger_metrics, logger


@ledger_metrics.log_metrics
@logger.inject_lambda_context
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    ledger = ledger_from_env()
    now = int(time.time())
    failed, checked = [], 0
    for batch_id in ledger.overdue_batch_ids(now=now):
        checked += 1
        with logger.append_context_keys(batch_id=batch_id, child_id=SWEEPER):
            result = ledger.fail_overdue(batch_id, now=now)
            if result.must_alarm:
                finish(ledger, result, "ledger:sweeper")
                failed.append(batch_id)
    logger.info("sweep done", extra={"checked": checked, "failed": len(failed)})
    return {"checked": checked, "failed": failed}

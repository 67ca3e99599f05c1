"""The names of the kit's own CloudWatch metrics, defined once: the handlers emit them
(``fanout_kit.common.worker``, ``fanout_kit.common.ledger_runtime``) and the stacks alarm on them.

Constants only, no imports: the CDK app imports this module at synth, where neither boto3 nor
Powertools may be loaded (tests/test_layering.py). The namespace is POWERTOOLS_METRICS_NAMESPACE,
which every function gets from its construct.
"""

# Task functions (fanout_kit.common.worker.task_handler); dimension service = the task's function
# (POWERTOOLS_SERVICE_NAME).
TASK_SUCCEEDED_METRIC = "TaskSucceeded"
TASK_FAILED_METRIC = "TaskFailed"
TASK_RETRIED_METRIC = "TaskRetried"

# Completion ledger functions: one service dimension for all of them, so one alarm covers them
# all; the winner that emits also sets dimension environment = FANOUT_ENV.
METRICS_SERVICE = "CompletionLedger"
BATCH_FAILED_METRIC = "LedgerBatchFailed"
BATCH_COMPLETED_METRIC = "LedgerBatchCompleted"

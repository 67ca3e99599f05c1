"""The names of the kit's own CloudWatch metrics, defined once: the handlers emit them
(``fanout_kit.patterns.completion_ledger.runtime``) and the stacks alarm on them. (This repository's example
tasks emit TaskSucceeded / TaskFailed / TaskRetried from their own code, ``tasks/handler.py``.)

Constants only, no imports: the CDK app imports this module at synth, where neither boto3 nor
Powertools may be loaded (tests/test_layering.py). The namespace is POWERTOOLS_METRICS_NAMESPACE,
which every function gets from its construct.
"""

# Completion ledger functions: one service dimension for all of them, so one alarm covers them
# all; the winner that emits also sets dimension environment = FANOUT_ENV.
METRICS_SERVICE = "CompletionLedger"
BATCH_FAILED_METRIC = "LedgerBatchFailed"
BATCH_COMPLETED_METRIC = "LedgerBatchCompleted"

"""The CloudFormation outputs each construct's ``add_outputs()`` emits: every one the ``fanout``
command line and the local engine read from a deployed (or synthesized) stack. One list per
construct, read by both sides (``fanout_kit.ops.aws.REQUIRED_OUTPUTS``); no CDK import here, so the
command line can read it without loading the CDK.

``AlarmTopicArn`` is emitted as well when the construct has alarms; nothing requires it.
"""

from __future__ import annotations

_WORKFLOW = ("StateMachineArn", "DeadLetterQueueUrl", "StatusTableName")
PARALLEL_OUTPUTS = _WORKFLOW
MAP_OUTPUTS = (*_WORKFLOW, "BatchBucketName")
# ChildQueueUrl / ChildStreamArn: only with that intake (sqs_intake, kinesis_intake).
LEDGER_OUTPUTS = ("LedgerTableName", "StatusTableName")
LEDGER_INTAKE_OUTPUTS = ("ChildQueueUrl", "ChildStreamArn")
OPTIONAL_OUTPUTS = ("AlarmTopicArn",)

# By the workflow names of the command line and the engine ("parallel", "map", "ledger").
REQUIRED_OUTPUTS = {"parallel": PARALLEL_OUTPUTS, "map": MAP_OUTPUTS, "ledger": LEDGER_OUTPUTS}
ALL_OUTPUTS = frozenset((*PARALLEL_OUTPUTS, *MAP_OUTPUTS, *LEDGER_OUTPUTS, *LEDGER_INTAKE_OUTPUTS, *OPTIONAL_OUTPUTS))

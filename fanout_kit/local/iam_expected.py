"""The one list of grants that no local run exercises, each with the reason it is still needed.

``fanout iam-report`` and tests/test_iam.py match every unused grant against this list; a grant
unused and unlisted is reported (and fails the test): remove it, or exercise it, or list it here
with its reason. Entries match by role label (a function's service name, or ``StateMachine``),
action and resource, each with IAM wildcards.
"""

from __future__ import annotations

from dataclasses import dataclass

from fanout_kit.local.iam_policy import wildcard_match


@dataclass(frozen=True)
class Expected:
    label: str
    action: str
    resource: str
    reason: str
    stack: str = "*"

    def covers(self, stack: str, label: str, action: str, resource: str) -> bool:
        return (
            wildcard_match(self.stack, stack)
            and wildcard_match(self.label, label)
            and wildcard_match(self.action, action, case_sensitive=False)
            and wildcard_match(self.resource, resource)
        )


NOT_SDK_CALLS = "made by AWS on the role's behalf, not by the handler's SDK"

EXPECTED_UNUSED: tuple[Expected, ...] = (
    Expected("*", "logs:CreateLogStream", "arn:aws:logs:*", f"the Lambda runtime writes the function's own log group ({NOT_SDK_CALLS})"),
    Expected("*", "logs:PutLogEvents", "arn:aws:logs:*", f"the Lambda runtime writes the function's own log group ({NOT_SDK_CALLS})"),
    Expected("*", "xray:PutTraceSegments", "*", f"X-Ray active tracing sends segments ({NOT_SDK_CALLS}); tracing is off locally"),
    Expected("*", "xray:PutTelemetryRecords", "*", f"X-Ray active tracing ({NOT_SDK_CALLS}); tracing is off locally"),
    Expected("StateMachine", "xray:GetSampling*", "*", f"Step Functions X-Ray tracing ({NOT_SDK_CALLS})"),
    Expected("StateMachine", "logs:*Deliver*", "*", "Step Functions' vended log delivery to its log group, set up at deploy time"),
    Expected("StateMachine", "logs:DescribeLogGroups", "*", "Step Functions' vended log delivery, set up at deploy time"),
    Expected("StateMachine", "logs:*ResourcePolic*", "*", "Step Functions' vended log delivery keeps the Logs resource policy"),
    Expected("StateMachine", "lambda:InvokeFunction", "arn:aws:lambda:*:function:*:*",
             "versions and aliases (<function>:*), granted by CDK's LambdaInvoke; the kit invokes unqualified"),
    Expected("Ledger*", "lambda:InvokeFunction", "arn:aws:lambda:*:function:*:*",
             "versions and aliases (<function>:*) of your processing function, granted by CDK's grant_invoke; "
             "the ledger invokes it unqualified", stack="ledger"),
    # The Distributed Map's own grants: moto runs child executions and map-run bookkeeping inside
    # its interpreter, without API calls.
    Expected("StateMachine", "states:StartExecution", "*", "the Distributed Map starts its child executions (moto: internal)"),
    Expected("StateMachine", "states:DescribeExecution", "*", "the Distributed Map watches its child executions (moto: internal)"),
    Expected("StateMachine", "states:StopExecution", "*", "the Distributed Map stops its children when the map run fails (moto: internal)"),
    Expected("StateMachine", "states:RedriveExecution", "*", "redriving a failed map run (console or API; moto cannot redrive)"),
    Expected("StateMachine", "states:DescribeMapRun", "*", "map-run bookkeeping (moto: internal)"),
    Expected("StateMachine", "states:ListMapRuns", "*", "map-run bookkeeping (moto: internal)"),
    Expected("StateMachine", "states:UpdateMapRun", "*", "map-run bookkeeping (moto: internal)"),
    Expected("StateMachine", "s3:AbortMultipartUpload", "*", "ResultWriter's multipart uploads (moto writes results with PutObject)"),
    Expected("StateMachine", "s3:ListMultipartUploadParts", "*", "ResultWriter's multipart uploads (moto writes results with PutObject)"),
    Expected("StateMachine", "s3:GetObject", "*", "ItemReader/ResultWriter act on bucket objects; grant is bucket/* (see the note on results/)"),
    Expected("StateMachine", "s3:PutObject", "*", "ResultWriter writes results/; grant is bucket/* (see the note on results/)"),
    Expected("RecordExecutionFailure", "states:DescribeExecution", "*", "the failure guard reads an execution's "
             "input only when its event carried none (too large for the event); the local events carry it"),
    Expected("ForwardFailedItems", "sqs:GetQueue*", "*", "CDK's grantSendMessages includes them; the handler "
             "sends by the queue URL it is given", stack="map"),
    Expected("ForwardFailedItems", "sqs:SendMessage", "*", "sends only for children stopped before their own DLQ "
             "step (timed out, aborted, DLQ send failed); the report's scenarios stop none "
             "(tests/e2e/test_map_workflow.py's Express-limit test does, with every call checked)", stack="map"),
    # The ledger's event source mappings poll with the function's role; locally a poller does it.
    Expected("*", "sqs:ReceiveMessage", "*", "the SQS event source mapping polls with the consumer's role (emulated locally)"),
    Expected("*", "sqs:DeleteMessage", "*", "the SQS event source mapping deletes processed messages with the consumer's role"),
    Expected("*", "sqs:ChangeMessageVisibility", "*", "the SQS event source mapping, on partial batch failures"),
    Expected("*", "sqs:GetQueueAttributes", "*", "the SQS event source mapping reads the queue's attributes"),
    Expected("*", "sqs:GetQueueUrl", "*", "CDK's grantConsumeMessages includes it; the event source mapping uses the ARN"),
    Expected("*", "kinesis:*", "arn:aws:kinesis:*", "the Kinesis event source mapping reads the stream with the consumer's role"),
    # Paths the local scenarios do not run.
    Expected("LedgerKinesis*", "*", "*", "the ledger's Kinesis source is not run by the local scenarios (SQS only); "
             "tests/ledger run its handlers on moto without IAM", stack="ledger"),
    Expected("LedgerSweeper", "dynamodb:*", "*", "the sweeper runs on its schedule for batches past their deadline; "
             "no scenario waits that long", stack="ledger"),
    Expected("LedgerSqsConsumer", "dynamodb:UpdateItem", "arn:aws:dynamodb:*:table/*FinalStatus*", "writes the "
             "batch's FAILED status record only when it wins a FAILED verdict; in the report's scenario the "
             "DLQ recorder wins it (the failing child is the last one counted)", stack="ledger"),
    Expected("LedgerDlqRecorder", "lambda:InvokeFunction", "*", "finalizes only when failures are tolerated "
             "(ledger.failureThreshold > 0; 0 in dev and prod)", stack="ledger"),
    *(
        Expected("UpdateFinalStatus", "dynamodb:GetItem", "*", f"the redrive check (input redriveOf) of the shared "
                 f"status store; {what}", stack=stack)
        for stack, what in (
            ("map", "only a redrive reads it: the embedded-engine scenarios start no redrive (tests/ops redrive "
                    "on the moto server)"),
            ("ledger", "the completion ledger passes no redriveOf"),
        )
    ),
    Expected("PrepareBatch", "s3:ListBucket", "arn:aws:s3:::*", "S3 answers GetObject of a missing manifest "
             "with 404 NoSuchKey (named by PrepareBatch) only to a role with s3:ListBucket, else 403; moto "
             "answers 404 regardless (GetObject API reference, Permissions)", stack="map"),
)


def reason_for(stack: str, label: str, action: str, resource: str) -> str | None:
    for expected in EXPECTED_UNUSED:
        if expected.covers(stack, label, action, resource):
            return expected.reason
    return None

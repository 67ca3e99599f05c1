"""The Distributed Map fan-out workflow: N homogeneous items (a few to millions) from an S3
manifest, one child Lambda per batch of items, the same guarantees as the Parallel workflow.

Shape (JSONPath, no variables)::

    PrepareBatch ─▶ ReadBatchStatus (a finished batch ends here: duplicate start)
    ─▶ Manifest format? ─▶ ProcessItems JSON | ProcessItems CSV  (Distributed Map)
        child (Express): Process items ──(Retry; Catch)──▶ DeadLetter items ─▶ ItemsDeadLettered (Fail)
                                                              └─(send failed)─▶ DeadLetterSendFailed (Fail)
            ─▶ Item failures? ─(batchItemFailures)─▶ Retry failed items ─▶ Items failed? ─▶ Items processed
                     └─▶ Items processed             (fails: ItemRetryFailed)   ├─▶ ItemsPartiallyFailed (Fail)
                                                                                └─▶ InvalidBatchItemFailures (Fail)
    ─▶ ReadMapRun 1 (sfn:DescribeMapRun) ─▶ CountsFinal 1? ─▶ (final) CountUnsuccessful ─▶ MapRunConfirmed?
                                            └─▶ Wait 1s ─▶ ReadMapRun 2 ─▶ ... Wait 16s ─▶ ReadMapRun 6
                                                 ─▶ CountsFinal 6? ─▶ (still not final) CountsNotFinal
    MapRunConfirmed?: every item succeeded, map run total == PrepareBatch's ─▶ UpdateFinalStatus
         map run total != PrepareBatch's ─▶ TotalMismatch
         └─▶ ForwardFailedItems (children stopped before their DLQ step: items to the DLQ)
             ─▶ WithinFailureThreshold? ─▶ UpdateFinalStatus | SummarizeFailure ─▶ RecordBatchFailure ─▶ BatchFailed
    Catch on both Distributed Map states and on every ReadMapRun ─▶ MapRunNotConfirmed
    MapRunNotConfirmed | CountsNotFinal | TotalMismatch ─▶ RecordBatchFailure ─▶ BatchNotConfirmed (Fail)

Fan-in comes from Step Functions' own accounting: a child that exhausts its retries sends its items
and context to the DLQ and then *fails*, so the map run counts its items as failed; children
stopped by a timeout or an abort are counted too. A worker may report per-item failures
(``batchItemFailures``, ``fanout_runtime.events``): RetryFailedItems retries only those items and
dead-letters the ones still failing; the child then fails ``ItemsPartiallyFailed`` with a cause
listing them, so the map run counts the whole child failed (fail closed) and ForwardFailedItems,
on the failure path only, counts those children item by item from the FAILED results. No DynamoDB write per item or per child; nothing
grows with N in the parent's state or history (results go to S3 through ResultWriter).

Fail closed: SUCCEEDED needs positive evidence for every item PrepareBatch counted: the map run's
``succeeded`` >= that count - the failure threshold, nothing pending or running, and the map run's
``total`` equal to that count. The ItemReader reads the manifest version PrepareBatch validated
(``VersionId``), so a manifest replaced in between cannot change the items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from fanout_kit.shared.final_status import BATCH_NOT_CONFIRMED, MAP_FAILURE_UPDATE_EXPRESSION
from fanout_kit.patterns.distributed_map.manifest import MANIFEST_PREFIX
from fanout_kit.patterns.distributed_map.result_files import ITEMS_DEAD_LETTERED, ITEMS_PARTIALLY_FAILED, RESULTS_PREFIX
from fanout_runtime.events import BATCH_ITEM_FAILURES
from fanout_kit.patterns.distributed_map.express_budget import EXPRESS_LIMIT_SECONDS, retrier_ceilings
from fanout_kit.shared.retry_policy import (
    KIT_LAMBDA_RETRY_ERRORS,
    SFN_TRANSIENT_ERRORS,
    SQS_TRANSIENT_ERRORS,
    RetrySettings,
)
from fanout_kit.shared.states import (
    WorkflowTask,
    add_task_retries,
    finalize_or_fail,
    finished_batch_check,
    input_check,
    invoke,
    retry_props,
    task_timeout_for,
    TASK_TIMEOUT_MARGIN_SECONDS,
)

FORMATS = ("JSON", "CSV")
# The child's terminal errors: the ResultWriter's FAILED results carry them, so the parent knows
# which failed children already reached the DLQ (ITEMS_DEAD_LETTERED) and which did not.
DEAD_LETTER_SEND_FAILED = "DeadLetterSendFailed"
ITEM_RETRY_FAILED = "ItemRetryFailed"  # RetryFailedItems itself failed: the parent forwards the batch
RESULT_PATH = "$.result"  # the worker's answer, then RetryFailedItems' verdict (one slot: no growth)
ITEM_RETRY_MIN_SECONDS = 5  # RetryFailedItems' shortest timeout (it then only checks and dead-letters)
ITEM_RETRY_SAFETY_SECONDS = 3  # retry_failed_items.SAFETY_SECONDS: no round starts this close to the end
ITEM_INVOKE_OVERHEAD_SECONDS = 2  # fanout_kit.patterns.distributed_map.item_failures.INVOKE_OVERHEAD_SECONDS
LAMBDA_MAX_TIMEOUT_SECONDS = 900
DLQ_SEND_TIMEOUT_SECONDS = 5  # one SQS SendMessage; bounds the child's worst case (Express)
ITEM_COUNTS = ("Succeeded", "Failed", "TimedOut", "Aborted", "Pending", "Running", "Total")
# DescribeMapRun right after the Map state ended: the API reference (DescribeMapRun,
# MapRunItemCounts) documents the counts ("pending": not started yet, "running": in progress) and
# no guarantee that they are final when the Map state has ended; the Developer Guide's "Examining
# Map Run" says nothing either way, and ListExecutions (which also lists a map run's children) is
# documented "eventually consistent ... may not reflect very recent updates". So counts that are
# not final are read again after these waits (seconds; 31 s in all): ReadMapRun 1..6, a fixed
# chain (no loop: the payload budget bounds every state), then the batch is not confirmed.
COUNT_REREAD_WAITS = (1, 2, 4, 8, 16)
MAP_RUN_READS = len(COUNT_REREAD_WAITS) + 1
COUNTS = "$.counts"  # the last DescribeMapRun's item counts
MANIFEST_VERSION_PATH = "$.manifest.versionId"  # PrepareBatch's: the version it validated


@dataclass(frozen=True)
class MapRunSettings:
    """How the Distributed Map runs its children."""

    items_per_batch: int  # ItemBatcher MaxItemsPerBatch: items per child Lambda invoke
    max_concurrency: int  # MaxConcurrency: children at once
    express_children: bool  # EXPRESS (cheap, at-least-once, 5 min) or STANDARD children
    failure_threshold: int  # unsuccessful items that still finalize the batch


def item_retry_timeout_seconds(worker: WorkflowTask, express: bool) -> int:
    """The RetryFailedItems function's timeout: the time the child has left for per-item retry
    rounds. An EXPRESS child must end within AWS's 5 minutes with every Retrier of the worker's
    task exhausted first (``fanout_kit.patterns.distributed_map.express_budget``): what remains after that worst case
    and the task margin. A STANDARD child: the retryable policy's rounds, each the worker's
    timeout and its backoff ceiling, within Lambda's 900 s."""
    task_seconds = task_timeout_for(worker.function)
    worker_seconds = task_seconds - TASK_TIMEOUT_MARGIN_SECONDS
    if not express:
        policy = worker.retryable
        rounds = sum(
            worker_seconds + ITEM_INVOKE_OVERHEAD_SECONDS
            + min(policy.interval_seconds * policy.backoff_rate**n, policy.max_delay_seconds)
            for n in range(policy.max_attempts)
        )
        return int(min(LAMBDA_MAX_TIMEOUT_SECONDS, rounds + ITEM_RETRY_SAFETY_SECONDS + 10))
    retriers = [(0, 0, 1.0, 0)] + [
        (r.interval_seconds, r.max_attempts, r.backoff_rate, r.max_delay_seconds)
        for r in (worker.ambiguous, worker.transient, worker.retryable)
    ]
    attempts = 1 + sum(r[1] for r in retriers)
    waits = sum(
        sum(retrier_ceilings({"IntervalSeconds": i, "MaxAttempts": m, "BackoffRate": b, "MaxDelaySeconds": d}))
        for i, m, b, d in retriers
        if m
    )
    left = EXPRESS_LIMIT_SECONDS - attempts * task_seconds - waits - TASK_TIMEOUT_MARGIN_SECONDS
    # Less than the minimum left: the child is over the limit with it, and the synth-time check
    # (fanout_kit.patterns.distributed_map.express_budget) refuses it naming the path and the settings to change.
    return int(min(LAMBDA_MAX_TIMEOUT_SECONDS, max(left, ITEM_RETRY_MIN_SECONDS)))


def _item_processor(
    scope: Construct,
    fmt: str,
    worker: WorkflowTask,
    dlq_send_retry: RetrySettings,
    dlq: sqs.IQueue,
    retry_items: lambda_.IFunction,
) -> sfn.IChainable:
    suffix = f" ({fmt})"
    process = invoke(
        scope,
        f"Process items{suffix}",
        worker.function,
        {
            "batchId.$": "$.BatchInput.batchId",
            "items.$": "$.Items",
            "attempt.$": "$$.State.RetryCount",
            "executionArn.$": "$$.Execution.Id",
        },
        comment=worker.description,
        # The whole answer (at most TASK_OUTPUT_MAX_BYTES by the payload budget): "Item failures?"
        # looks for batchItemFailures, "Items processed" keeps only processed.
        result_selector={"Payload.$": "$.Payload"},
        result_path=RESULT_PATH,
    )
    add_task_retries(process, worker)
    processed = sfn.Pass(
        scope,
        f"Items processed{suffix}",
        comment="The child's output (in the map run's SUCCEEDED results): the worker's processed field",
        parameters={"processed.$": f"{RESULT_PATH}.Payload.processed"},
    )
    dead_lettered = sfn.Fail(
        scope,
        f"ItemsDeadLettered{suffix}",
        comment="Fails the child after its items reached the DLQ, so the map run counts them failed",
        error=ITEMS_DEAD_LETTERED,
        cause_path="$.failure.Cause",
    )
    send_failed = sfn.Fail(
        scope,
        f"DeadLetterSendFailed{suffix}",
        comment="The DLQ send was exhausted: the parent forwards these items from the map run's results",
        error=DEAD_LETTER_SEND_FAILED,
        cause_path="$.failure.Cause",
    )
    dead_letter = tasks.SqsSendMessage(
        scope,
        f"DeadLetter items{suffix}",
        comment="Sends the exhausted items with their context to the dead-letter queue",
        queue=dlq,
        message_body=sfn.TaskInput.from_object(
            {
                "batchId.$": "$.BatchInput.batchId",
                "task": worker.name,
                "items.$": "$.Items",
                "error.$": "$.failure.Error",
                "cause.$": "$.failure.Cause",
                "executionArn.$": "$.BatchInput.executionArn",
                "childExecutionArn.$": "$$.Execution.Id",
                "failedAt.$": "$$.State.EnteredTime",
            }
        ),
        task_timeout=sfn.Timeout.duration(Duration.seconds(DLQ_SEND_TIMEOUT_SECONDS)),
        result_path=sfn.JsonPath.DISCARD,
    )
    dead_letter.add_retry(**retry_props(dlq_send_retry, SQS_TRANSIENT_ERRORS))
    # The send's error is discarded (in the history): a second Cause next to the items and the
    # task's Cause could outgrow 256 KiB; the Fail state reports the task's Cause.
    dead_letter.add_catch(send_failed, errors=[sfn.Errors.ALL], result_path=sfn.JsonPath.DISCARD)
    process.add_catch(dead_letter.next(dead_lettered), errors=[sfn.Errors.ALL], result_path="$.failure")

    # Per-item failures (the worker answered with batchItemFailures): RetryFailedItems checks the
    # answer, retries only the failed items, dead-letters those still failing and returns the
    # child's verdict in place of the worker's answer (RESULT_PATH: the state does not grow).
    partly_failed = sfn.Fail(
        scope,
        f"{ITEMS_PARTIALLY_FAILED}{suffix}",
        comment="Some items failed and reached the DLQ; the cause lists them (the parent counts items from it)",
        error=ITEMS_PARTIALLY_FAILED,
        cause_path=f"{RESULT_PATH}.Cause",
    )
    invalid_answer = sfn.Fail(
        scope,
        f"InvalidBatchItemFailures{suffix}",
        comment="The worker's batchItemFailures was malformed: the whole batch reached the DLQ",
        error=ITEMS_DEAD_LETTERED,
        cause_path=f"{RESULT_PATH}.Cause",
    )
    retry_failed = sfn.Fail(
        scope,
        f"{ITEM_RETRY_FAILED}{suffix}",
        comment="RetryFailedItems failed: the parent forwards the whole batch from the map run's results",
        error=ITEM_RETRY_FAILED,
        cause_path=f"{RESULT_PATH}.Cause",
    )
    retry_items_state = invoke(
        scope,
        f"Retry failed items{suffix}",
        retry_items,
        {
            "batchId.$": "$.BatchInput.batchId",
            "executionArn.$": "$.BatchInput.executionArn",
            "childExecutionArn.$": "$$.Execution.Id",
            "items.$": "$.Items",
            "response.$": f"{RESULT_PATH}.Payload",
        },
        comment="Retries only the items the worker reported failed, dead-letters those still failing",
        # (Payload.processed: the worker's, for "Items processed" when every item succeeded in the end)
        result_selector={
            "Error.$": "$.Payload.error",
            "Cause.$": "$.Payload.cause",
            "failed.$": "$.Payload.failed",
            "Payload": {"processed.$": "$.Payload.processed"},
        },
        result_path=RESULT_PATH,
    )
    # No Retry: it would re-run the worker's items; its failure fails the batch closed (forwarded).
    retry_items_state.add_catch(retry_failed, errors=[sfn.Errors.ALL], result_path=RESULT_PATH)
    retry_items_state.next(
        sfn.Choice(scope, f"Items failed?{suffix}")
        .when(sfn.Condition.number_equals(f"{RESULT_PATH}.failed", 0), processed)
        .when(sfn.Condition.string_equals(f"{RESULT_PATH}.Error", ITEMS_DEAD_LETTERED), invalid_answer)
        .otherwise(partly_failed)
    )
    failures = f"{RESULT_PATH}.Payload.{BATCH_ITEM_FAILURES}"
    # The happy path first (fanout_kit.shared.asl_graph.happy_path and the cost model follow a Choice's
    # first rule); presence before null (a missing path in a comparison is a runtime error).
    process.next(
        sfn.Choice(scope, f"Item failures?{suffix}")
        .when(sfn.Condition.not_(sfn.Condition.is_present(failures)), processed)
        .when(sfn.Condition.is_null(failures), processed)
        .otherwise(retry_items_state)
    )
    return process


def _pinned(rendered: dict) -> dict:
    """ItemReader Parameters with the object version PrepareBatch validated: AWS's ItemReader
    reference ("If the bucket has versioning enabled, you can also provide the Amazon S3 object
    version", ``Parameters.VersionId``). CDK's S3 file readers have no VersionId prop."""
    rendered["Parameters"]["VersionId.$"] = MANIFEST_VERSION_PATH
    return rendered


def _version_grant(reader: sfn.IItemReader, statements: list) -> list:
    """GetObject of a given version is authorized as s3:GetObjectVersion (Service Authorization
    Reference, Amazon S3: GetObject "versionId" needs s3:GetObjectVersion), on manifests/ only."""
    return [
        *statements,
        iam.PolicyStatement(actions=["s3:GetObjectVersion"], resources=[reader.bucket.arn_for_objects(f"{MANIFEST_PREFIX}*")]),
    ]


class PinnedJsonItemReader(sfn.S3JsonItemReader):
    def render(self, query_language: Any = None) -> Any:
        return _pinned(super().render(query_language))

    def provide_policy_statements(self) -> list[iam.PolicyStatement]:
        return _version_grant(self, super().provide_policy_statements())


class PinnedCsvItemReader(sfn.S3CsvItemReader):
    def render(self, query_language: Any = None) -> Any:
        return _pinned(super().render(query_language))

    def provide_policy_statements(self) -> list[iam.PolicyStatement]:
        return _version_grant(self, super().provide_policy_statements())


def _distributed_map(
    scope: Construct, fmt: str, run: MapRunSettings, bucket: s3.IBucket, child: sfn.IChainable
) -> sfn.DistributedMap:
    reader_key = sfn.JsonPath.string_at("$.manifest.key")
    reader = (
        PinnedJsonItemReader(bucket=bucket, key=reader_key)
        if fmt == "JSON"
        else PinnedCsvItemReader(bucket=bucket, key=reader_key, csv_headers=sfn.CsvHeaders.use_first_row())
    )
    dmap = sfn.DistributedMap(
        scope,
        f"ProcessItems {fmt}",
        comment=f"One child execution per batch of {run.items_per_batch} item(s); failures "
        "never abort siblings (100% tolerated): the counts decide after the map",
        item_reader=reader,
        item_selector={"index.$": "$$.Map.Item.Index", "item.$": "$$.Map.Item.Value"},
        item_batcher=sfn.ItemBatcher(
            max_items_per_batch=run.items_per_batch,
            batch_input={"batchId.$": "$.batchId", "executionArn.$": "$$.Execution.Id"},
        ),
        max_concurrency=run.max_concurrency,
        tolerated_failure_percentage=100,
        result_writer_v2=sfn.ResultWriterV2(bucket=bucket, prefix=RESULTS_PREFIX.rstrip("/")),
        map_execution_type=sfn.StateMachineType.EXPRESS if run.express_children else sfn.StateMachineType.STANDARD,
        result_path="$.mapRun",
        label=f"ProcessItems{fmt}",
    )
    # Mode DISTRIBUTED and the child execution type come from DistributedMap (map_execution_type);
    # ProcessorConfig.executionType would be ignored there, with a synth warning.
    dmap.item_processor(child)
    return dmap


def map_run_read_name(read: int) -> str:
    return f"ReadMapRun {read}"


def _read_map_run(scope: Construct, read: int, retry: RetrySettings) -> sfn.CustomState:
    """One DescribeMapRun through the AWS SDK integration; its grant (states:DescribeMapRun on
    this state machine's map runs) is added by the construct after the state machine exists."""
    state = sfn.CustomState(
        scope,
        map_run_read_name(read),
        state_json={
            "Type": "Task",
            "Comment": f"Read {read} of at most {MAP_RUN_READS}: the map run's item counts, kept by Step "
            "Functions (succeeded, failed, timed out, aborted, pending, running, total)",
            # The stack's partition (aws, aws-cn, aws-us-gov), never a literal one.
            "Resource": f"arn:{Stack.of(scope).partition}:states:::aws-sdk:sfn:describeMapRun",
            "Parameters": {"MapRunArn.$": "$.mapRun.MapRunArn"},
            "ResultSelector": {f"{k[0].lower()}{k[1:]}.$": f"$.ItemCounts.{k}" for k in ITEM_COUNTS},
            "ResultPath": COUNTS,  # each read replaces the last: the state does not grow
            "TimeoutSeconds": 60,
        },
    )
    state.add_retry(**retry_props(retry, SFN_TRANSIENT_ERRORS))
    return state


def read_map_run_chain(
    scope: Construct,
    retry: RetrySettings,
    *,
    final: sfn.IChainable,
    not_final: sfn.IChainable,
    unreadable: sfn.IChainable,
) -> sfn.CustomState:
    """The map run's counts, read until final (nothing pending or running), as a fixed chain:

        ReadMapRun 1 ─▶ CountsFinal 1? ─▶ final
                               └─▶ Wait 1s ─▶ ReadMapRun 2 ─▶ CountsFinal 2? ─▶ ... ─▶ ReadMapRun 6
                                                                 ─▶ CountsFinal 6? ─▶ final | not_final

    No loop: every state's worst-case payload can be bounded (``fanout_kit.shared.payload_budget``
    refuses a cycle), and the history shows which read decided. A read that fails (after its
    retries) goes to ``unreadable`` with the error in ``$.mapFailure``. Returns the first read."""
    counts_final = sfn.Condition.and_(
        sfn.Condition.number_equals(f"{COUNTS}.pending", 0), sfn.Condition.number_equals(f"{COUNTS}.running", 0)
    )
    first: sfn.CustomState | None = None
    waiting: sfn.Wait | None = None
    for read_number in range(1, MAP_RUN_READS + 1):
        read = _read_map_run(scope, read_number, retry)
        read.add_catch(unreadable, errors=[sfn.Errors.ALL], result_path="$.mapFailure")
        if waiting is None:
            first = read
        else:
            waiting.next(read)
        check = sfn.Choice(scope, f"CountsFinal {read_number}?").when(counts_final, final)
        read.next(check)
        if read_number <= len(COUNT_REREAD_WAITS):
            seconds = COUNT_REREAD_WAITS[read_number - 1]
            waiting = sfn.Wait(
                scope,
                f"Wait {seconds}s",
                comment=f"Counts not final after read {read_number}: read again in {seconds} s",
                time=sfn.WaitTime.duration(Duration.seconds(seconds)),
            )
            check.otherwise(waiting)
        else:
            check.otherwise(not_final)
    assert first is not None
    return first


def build_map_workflow(
    scope: Construct,
    *,
    run: MapRunSettings,
    worker: WorkflowTask,
    prepare: lambda_.IFunction,
    forward_failed: lambda_.IFunction,
    retry_items: lambda_.IFunction,
    update_final_status: lambda_.IFunction,
    dlq: sqs.IQueue,
    bucket: s3.IBucket,
    status_table: dynamodb.ITable,
    dlq_send_retry: RetrySettings,
    status_write_retry: RetrySettings,
) -> sfn.IChainable:
    """``worker`` runs each batch of items in a child, ``retry_items`` (RetryFailedItems) handles
    the items it reports failed; ``dlq_send_retry`` retries the child's DLQ send, ``status_write_retry`` the parent's input check, map-run read and status writes."""
    prepare_state = input_check(
        scope,
        "PrepareBatch",
        prepare,
        retry=status_write_retry,
        comment="Validates the input and streams the manifest (every item checked); fails with "
        "InvalidInput / InvalidManifest before any child runs",
    )
    update, record_failure = finalize_or_fail(
        scope,
        status_write_retry=status_write_retry,
        update_final_status=update_final_status,
        update_payload={
            "batchId.$": "$.batchId",
            "executionArn.$": "$$.Execution.Id",
            "redriveOf.$": "$.redriveOf",
            "results": {},
            # where the items' results are: the status record's resultsAt (fanout results)
            "resultWriterDetails.$": "$.mapRun.ResultWriterDetails",
        },
        status_table=status_table,
        failure_update_expression=MAP_FAILURE_UPDATE_EXPRESSION,
        failure_values={
            ":failedItems": tasks.DynamoAttributeValue.number_from_string(
                sfn.JsonPath.format("{}", sfn.JsonPath.string_at("$.failure.failedItems"))
            ),
            ":totalItems": tasks.DynamoAttributeValue.number_from_string(
                sfn.JsonPath.format("{}", sfn.JsonPath.string_at("$.failure.totalItems"))
            ),
            ":failureError": tasks.DynamoAttributeValue.from_string(sfn.JsonPath.string_at("$.failure.error")),
            ":resultsKey": tasks.DynamoAttributeValue.from_string(sfn.JsonPath.string_at("$.failure.resultsKey")),
        },
        failure_cause_path="$.failure.cause",
        failure_comment="Records FAILED with the counts; never overwrites a SUCCEEDED batch",
    )

    # Fail closed: a map run that failed as a whole (ItemReader, ResultWriter, runtime), whose
    # counts cannot be read, are not final after every read, or count other items than PrepareBatch
    # did confirms no item. Each of these states rebuilds the state with only what RecordBatchFailure
    # and BatchNotConfirmed read: the map's error (up to 32,768 characters) is in the cause once,
    # not also in $.mapFailure next to it.
    def not_confirmed(
        state_id: str, comment: str, error: str, cause: str, *values: str, results_key: str | None = None
    ) -> sfn.Pass:
        state = sfn.Pass(
            scope,
            state_id,
            comment=comment,
            parameters={
                **{f"{field}.$": f"$.{field}" for field in ("batchId", "manifest", "total", "redriveOf")},
                "failure": {
                    "error": error,
                    "notConfirmed": True,
                    "cause": sfn.JsonPath.format(cause, *values),
                    "failedItems": sfn.JsonPath.number_at("$.total"),
                    "totalItems": sfn.JsonPath.number_at("$.total"),
                    "resultsKey": results_key if results_key else "",
                },
            },
        )
        state.next(record_failure)
        return state

    results_key = sfn.JsonPath.string_at("$.mapRun.ResultWriterDetails.Key")
    map_failed = not_confirmed(
        "MapRunNotConfirmed",
        "The map run failed or its counts could not be read: no item is confirmed",
        sfn.JsonPath.string_at("$.mapFailure.Error"),
        "none of the {} items PrepareBatch counted is confirmed: {} ({}); redrive the batch to run them all again",
        sfn.JsonPath.string_at("$.total"),
        sfn.JsonPath.string_at("$.mapFailure.Error"),
        sfn.JsonPath.string_at("$.mapFailure.Cause"),
    )
    not_final = not_confirmed(
        "CountsNotFinal",
        f"The map run's counts were still not final after {MAP_RUN_READS} reads: no verdict from them",
        BATCH_NOT_CONFIRMED,
        # (no apostrophe: a quote delimits a literal inside an intrinsic function)
        f"the counts of the map run were not final after {MAP_RUN_READS} reads over {sum(COUNT_REREAD_WAITS)} s "
        "({} succeeded, {} pending, {} running of the {} items it counted; PrepareBatch counted {}): "
        "the batch is not confirmed; redrive it",
        sfn.JsonPath.string_at(f"{COUNTS}.succeeded"),
        sfn.JsonPath.string_at(f"{COUNTS}.pending"),
        sfn.JsonPath.string_at(f"{COUNTS}.running"),
        sfn.JsonPath.string_at(f"{COUNTS}.total"),
        sfn.JsonPath.string_at("$.total"),
        results_key=results_key,
    )
    mismatch = not_confirmed(
        "TotalMismatch",
        "The map run did not run the items PrepareBatch counted: no verdict from its counts",
        BATCH_NOT_CONFIRMED,
        "the map run counted {} items ({} succeeded), PrepareBatch counted {} in s3://{}/{} (version {}): "
        "the batch is not confirmed; check the manifest and redrive it",
        sfn.JsonPath.string_at(f"{COUNTS}.total"),
        sfn.JsonPath.string_at(f"{COUNTS}.succeeded"),
        sfn.JsonPath.string_at("$.total"),
        sfn.JsonPath.string_at("$.manifest.bucket"),
        sfn.JsonPath.string_at("$.manifest.key"),
        sfn.JsonPath.string_at(MANIFEST_VERSION_PATH),
        results_key=results_key,
    )

    tally = sfn.Pass(
        scope,
        "CountUnsuccessful",
        comment="Items that failed, timed out or were aborted; the successes the verdict needs",
        parameters={
            "unsuccessful.$": f"States.MathAdd(States.MathAdd({COUNTS}.failed, {COUNTS}.timedOut), {COUNTS}.aborted)",
            "required.$": f"States.MathAdd($.total, {-run.failure_threshold})",
            # Item by item only after ForwardFailedItems read the FAILED results (a child with
            # ItemsPartiallyFailed counts all its items failed in the map run): fail closed until then.
            "succeeded.$": f"{COUNTS}.succeeded",
            "failed.$": f"{COUNTS}.failed",
        },
        result_path="$.tally",
    )
    summarize = sfn.Pass(
        scope,
        "SummarizeFailure",
        parameters={
            "error": "ItemsFailed",
            "cause": sfn.JsonPath.format(
                "{} of {} items did not succeed ({} failed, {} timed out, {} aborted; tolerated: "
                + str(run.failure_threshold)
                + "); their items and context are in the dead-letter queue",
                sfn.JsonPath.string_at("$.tally.unsuccessful"),
                sfn.JsonPath.string_at(f"{COUNTS}.total"),
                sfn.JsonPath.string_at("$.tally.failed"),
                sfn.JsonPath.string_at(f"{COUNTS}.timedOut"),
                sfn.JsonPath.string_at(f"{COUNTS}.aborted"),
            ),
            "failedItems": sfn.JsonPath.number_at("$.tally.unsuccessful"),
            "totalItems": sfn.JsonPath.number_at(f"{COUNTS}.total"),
            "resultsKey": results_key,
        },
        result_path="$.failure",
    )
    summarize.next(record_failure)
    forward = invoke(
        scope,
        "ForwardFailedItems",
        forward_failed,
        {
            "batchId.$": "$.batchId",
            "executionArn.$": "$$.Execution.Id",
            "resultWriterDetails.$": "$.mapRun.ResultWriterDetails",
            "counts.$": COUNTS,
            "tally.$": "$.tally",
        },
        comment="Sends the items of children stopped before their own DLQ step (timed out, aborted, "
        "DLQ send failed) from the map run's results to the DLQ, so nothing failed is only in S3; "
        "counts the items of children that reported per-item failures (ItemsPartiallyFailed) item "
        "by item: only the items their cause lists failed",
        result_selector={
            **{f"{k}.$": f"$.Payload.tally.{k}" for k in ("unsuccessful", "required", "succeeded", "failed")},
            "forwarded.$": "$.Payload.forwarded",
            "alreadyDeadLettered.$": "$.Payload.alreadyDeadLettered",
        },
        # Replaces the tally only when it succeeded: its Catch keeps the map run's counts (every
        # item of a partly failed child failed), which can only fail the batch, never pass it.
        result_path="$.tally",
    )
    # A repeat sends the same items again: the DLQ is at-least-once (its consumers de-duplicate).
    forward.add_retry(**retry_props(status_write_retry, KIT_LAMBDA_RETRY_ERRORS))
    within = (
        sfn.Choice(scope, "WithinFailureThreshold?")
        .when(sfn.Condition.number_greater_than_equals_json_path("$.tally.succeeded", "$.tally.required"), update)
        .otherwise(summarize)
    )
    # Forwarding is best effort on top of the children's own DLQ sends: the verdict goes on.
    forward.add_catch(within, errors=[sfn.Errors.ALL], result_path="$.forwardFailure")
    forward.next(within)
    decide = (
        sfn.Choice(scope, "MapRunConfirmed?")
        .when(
            sfn.Condition.and_(
                sfn.Condition.number_equals(f"{COUNTS}.pending", 0),
                sfn.Condition.number_equals(f"{COUNTS}.running", 0),
                sfn.Condition.number_equals_json_path(f"{COUNTS}.total", "$.total"),
                sfn.Condition.number_equals("$.tally.unsuccessful", 0),
                sfn.Condition.number_equals_json_path(f"{COUNTS}.succeeded", "$.total"),
            ),
            update,
        )
        .when(sfn.Condition.not_(sfn.Condition.number_equals_json_path(f"{COUNTS}.total", "$.total")), mismatch)
        .otherwise(forward)
    )
    tally.next(decide)
    first_read = read_map_run_chain(scope, status_write_retry, final=tally, not_final=not_final, unreadable=map_failed)

    fmt_choice = sfn.Choice(scope, "Manifest format?")
    for fmt in FORMATS:
        dmap = _distributed_map(
            scope, fmt, run, bucket, _item_processor(scope, fmt, worker, dlq_send_retry, dlq, retry_items)
        )
        dmap.add_catch(map_failed, errors=[sfn.Errors.ALL], result_path="$.mapFailure")
        dmap.next(first_read)
        if fmt == "CSV":
            fmt_choice.when(sfn.Condition.string_equals("$.manifest.format", "CSV"), dmap)
        else:
            fmt_choice.otherwise(dmap)
    # A duplicate start of a finished batch ends here, before any child runs; a FAILED batch runs
    # again only as a redrive (redriveOf, set by `fanout dlq redrive --workflow map`).
    return prepare_state.next(
        finished_batch_check(scope, retry=status_write_retry, status_table=status_table, proceed=fmt_choice, redrive_path="$.redriveOf", workflow="map")
    )

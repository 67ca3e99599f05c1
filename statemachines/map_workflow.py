"""The Distributed Map fan-out workflow: N homogeneous items (a few to millions) from an S3
manifest, one child Lambda per batch of items, the same guarantees as the Parallel workflow.

Shape (JSONPath, no variables)::

    PrepareBatch ─▶ Manifest format? ─▶ ProcessItems JSON | ProcessItems CSV  (Distributed Map)
                       child (Express): Process items ──(Retry; Catch)──▶ DeadLetter items ─▶ RecordItemFailures
                 ─▶ DecideBatch (ledger counts) ─▶ AllItemsSucceeded? ─▶ UpdateFinalStatus
                                                                    └──▶ RecordBatchFailure ─▶ BatchFailed

The verdict comes from the completion ledger (one counter item per batch, one mark per item), not
from the Map's results, so nothing grows with N in the parent's state or history: each child's
work happens in its own child execution, and results go to S3 (ResultWriter).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from lambdas.fanout_common.final_status import (
    MAP_FAILURE_UPDATE_EXPRESSION,
)
from stacks.config import EnvironmentConfig
from stacks.constructs.batch_data_bucket import RESULTS_PREFIX
from statemachines.retry_policy import (
    LAMBDA_TRANSIENT_ERRORS,
    SQS_TRANSIENT_ERRORS,
)
from statemachines.states import add_task_retries, finalize_or_fail, input_check, invoke, retry_props

COMPLETED = "COMPLETED"
FORMATS = ("JSON", "CSV")


def _item_processor(
    scope: Construct, fmt: str, cfg: EnvironmentConfig, worker: lambda_.IFunction,
    record_failures: lambda_.IFunction, dlq: sqs.IQueue,
) -> sfn.IChainable:
    suffix = f" ({fmt})"
    process = invoke(
        scope,
        f"Process items{suffix}",
        worker,
        {
            "batchId.$": "$.BatchInput.batchId",
            "items.$": "$.Items",
            "attempt.$": "$$.State.RetryCount",
            "executionArn.$": "$$.Execution.Id",
        },
        comment=cfg.map_worker.description,
        task_timeout=sfn.Timeout.duration(Duration.seconds(cfg.map.worker_timeout_seconds)),
        result_selector={"processed.$": "$.Payload.processed"},
    )
    add_task_retries(process, cfg.map_worker)
    record = invoke(
        scope,
        f"RecordItemFailures{suffix}",
        record_failures,
        {"batchId.$": "$.BatchInput.batchId", "items.$": "$.Items", "error.$": "$.failure.Error"},
        comment="Counts each item of the dead-lettered batch as failed in the ledger (once)",
        result_path=sfn.JsonPath.DISCARD,
    )
    record.add_retry(**retry_props(cfg.status_write_retry, LAMBDA_TRANSIENT_ERRORS))
    dead_letter = tasks.SqsSendMessage(
        scope,
        f"DeadLetter items{suffix}",
        comment="Sends the exhausted items with their context to the dead-letter queue",
        queue=dlq,
        message_body=sfn.TaskInput.from_object(
            {
                "batchId.$": "$.BatchInput.batchId",
                "task": cfg.map_worker.name,
                "items.$": "$.Items",
                "error.$": "$.failure.Error",
                "cause.$": "$.failure.Cause",
                "executionArn.$": "$.BatchInput.executionArn",
                "childExecutionArn.$": "$$.Execution.Id",
                "failedAt.$": "$$.State.EnteredTime",
            }
        ),
        result_path=sfn.JsonPath.DISCARD,
    )
    dead_letter.add_retry(**retry_props(cfg.dlq_send_retry, SQS_TRANSIENT_ERRORS))
    # Even if the DLQ send is exhausted, the items are counted failed (their context stays in the
    # child execution's history), so the batch can never be finalized over them.
    dead_letter.add_catch(record, errors=[sfn.Errors.ALL], result_path="$.dlqFailure")
    process.add_catch(dead_letter.next(record), errors=[sfn.Errors.ALL], result_path="$.failure")
    return process


def _distributed_map(
    scope: Construct, fmt: str, cfg: EnvironmentConfig, bucket: s3.IBucket, **fns
) -> sfn.DistributedMap:
    reader_key = sfn.JsonPath.string_at("$.manifest.key")
    reader = (
        sfn.S3JsonItemReader(bucket=bucket, key=reader_key)
        if fmt == "JSON"
        else sfn.S3CsvItemReader(bucket=bucket, key=reader_key, csv_headers=sfn.CsvHeaders.use_first_row())
    )
    child_type = (
        sfn.StateMachineType.EXPRESS
        if cfg.map.child_execution_type == "EXPRESS"
        else sfn.StateMachineType.STANDARD
    )
    dmap = sfn.DistributedMap(
        scope,
        f"ProcessItems {fmt}",
        comment=f"One child execution per batch of {cfg.map.items_per_batch} item(s); failures "
        "never abort siblings (100% tolerated), the ledger decides",
        item_reader=reader,
        item_selector={"index.$": "$$.Map.Item.Index", "item.$": "$$.Map.Item.Value"},
        item_batcher=sfn.ItemBatcher(
            max_items_per_batch=cfg.map.items_per_batch,
            batch_input={"batchId.$": "$.batchId", "executionArn.$": "$$.Execution.Id"},
        ),
        max_concurrency=cfg.map.max_concurrency,
        tolerated_failure_percentage=100,
        result_writer_v2=sfn.ResultWriterV2(bucket=bucket, prefix=RESULTS_PREFIX.rstrip("/")),
        map_execution_type=child_type,
        result_path="$.mapRun",
        label=f"ProcessItems{fmt}",
    )
    # Mode DISTRIBUTED and the child execution type come from DistributedMap (map_execution_type);
    # ProcessorConfig.executionType would be ignored there, with a synth warning.
    dmap.item_processor(_item_processor(scope, fmt, cfg, fns["worker"], fns["record_failures"], fns["dlq"]))
    return dmap


def build_map_workflow(
    scope: Construct,
    *,
    cfg: EnvironmentConfig,
    prepare: lambda_.IFunction,
    worker: lambda_.IFunction,
    record_failures: lambda_.IFunction,
    decide: lambda_.IFunction,
    update_final_status: lambda_.IFunction,
    dlq: sqs.IQueue,
    bucket: s3.IBucket,
    status_table: dynamodb.ITable,
) -> sfn.IChainable:
    prepare_state = input_check(
        scope,
        "PrepareBatch",
        prepare,
        cfg=cfg,
        comment="Validates the input and manifest, registers the batch total in the ledger; "
        "fails with InvalidInput / InvalidManifest before anything is registered",
    )

    decide_state = invoke(
        scope,
        "DecideBatch",
        decide,
        {"batchId.$": "$.batchId", "executionArn.$": "$$.Execution.Id"},
        comment="Reads the ledger's counts: COMPLETED only if every item succeeded",
        result_selector={
            "verdict.$": "$.Payload.verdict",
            "total.$": "$.Payload.total",
            "succeeded.$": "$.Payload.succeeded",
            "failed.$": "$.Payload.failed",
            "unaccounted.$": "$.Payload.unaccounted",
        },
        result_path="$.ledger",
    )
    decide_state.add_retry(**retry_props(cfg.status_write_retry, LAMBDA_TRANSIENT_ERRORS))

    maps = {
        fmt: _distributed_map(scope, fmt, cfg, bucket, worker=worker, record_failures=record_failures, dlq=dlq)
        for fmt in FORMATS
    }
    for dmap in maps.values():
        dmap.next(decide_state)

    update, record_failure = finalize_or_fail(
        scope,
        cfg=cfg,
        update_final_status=update_final_status,
        update_payload={"batchId.$": "$.batchId", "executionArn.$": "$$.Execution.Id", "results": {}},
        status_table=status_table,
        failure_update_expression=MAP_FAILURE_UPDATE_EXPRESSION,
        failure_values={
            ":failedItems": tasks.DynamoAttributeValue.number_from_string(
                sfn.JsonPath.format("{}", sfn.JsonPath.string_at("$.ledger.failed"))
            ),
            ":totalItems": tasks.DynamoAttributeValue.number_from_string(
                sfn.JsonPath.format("{}", sfn.JsonPath.string_at("$.ledger.total"))
            ),
        },
        failure_cause_path=sfn.JsonPath.format(
            "{} of {} items failed (retries exhausted, or not retryable; context: the dead-letter queue); "
            "{} not accounted for",
            sfn.JsonPath.string_at("$.ledger.failed"),
            sfn.JsonPath.string_at("$.ledger.total"),
            sfn.JsonPath.string_at("$.ledger.unaccounted"),
        ),
        failure_comment="Records FAILED with the counts; never overwrites a SUCCEEDED batch",
    )

    decide_state.next(
        sfn.Choice(scope, "AllItemsSucceeded?")
        .when(sfn.Condition.string_equals("$.ledger.verdict", COMPLETED), update)
        .otherwise(record_failure)
    )
    fmt_choice = (
        sfn.Choice(scope, "Manifest format?")
        .when(sfn.Condition.string_equals("$.manifest.format", "CSV"), maps["CSV"])
        .otherwise(maps["JSON"])
    )
    return prepare_state.next(fmt_choice)

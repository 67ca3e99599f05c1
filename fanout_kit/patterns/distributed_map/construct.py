"""DistributedMapFanOut: N items (a few to millions) from an S3 manifest or the execution input,
one child execution per batch of items running your worker function, exhausted items to the DLQ,
the final status only when the map run counted every item as succeeded (or within the failure
threshold). The batch data bucket holds the manifests and the map runs' results."""

from __future__ import annotations

import json
from typing import Unpack

from aws_cdk import Fn, Stack, Token
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from fanout_kit.patterns.distributed_map.manifest import MANIFEST_PREFIX, MAX_MANIFEST_BYTES, MAX_MANIFEST_ITEMS
from fanout_kit.patterns.distributed_map.result_files import RESULTS_PREFIX
from fanout_kit.patterns.distributed_map.batch_bucket import BatchDataBucket
from fanout_kit.shared.functions import KitFunction
from fanout_kit.shared.nag import acknowledge_map_workflow
from fanout_kit.shared.tasks import FanOutTask, workflow_tasks
from fanout_kit.shared.settings import (
    MAP_RETRIES,
    MapSettings,
    WorkflowRetries,
    check_type,
)
from fanout_kit.shared.props import WorkflowProps, resolve_props
from fanout_kit.shared.workflow import FanOutWorkflow
from fanout_kit.shared.limits import MAP_INPUT_MAX_BYTES
from fanout_kit.shared.checks import ConfigError
from fanout_kit.patterns.distributed_map.express_budget import check_express_children
from fanout_kit.patterns.distributed_map.definition import FORMATS, MapRunSettings, build_map_workflow, item_retry_timeout_seconds
from fanout_kit.shared.states import TASK_TIMEOUT_MARGIN_SECONDS, task_timeout_for

# PrepareBatch checks every item of a manifest up to the documented maximum (MAX_MANIFEST_ITEMS,
# MAX_MANIFEST_BYTES); its memory buys CPU (AWS: one vCPU at 1,769 MB, proportionally less below).
# benchmarks/prepare_batch_benchmark.py, CPU time on one core: ~4.7 s per million small items
# (JSON, 64 bytes each; CSV 4.3 s), i.e. ~32 s per million at 256 MB; content costs at most
# ~0.06 s per MiB (arrays of small numbers, the costliest JSON per byte measured). The worst case,
# 10 million items in 1 GiB, is ~111 s of CPU: ~770 s at 256 MB (over the old 300 s timeout),
# ~192 s at 1,024 MB, run with a 600 s timeout (a factor 3 over the estimate).
PREPARE_MEMORY_MB = 1024
PREPARE_TIMEOUT_SECONDS = 600
PREPARE_CPU_SECONDS_PER_ITEM = 5e-6
PREPARE_CPU_SECONDS_PER_MIB = 0.06
PREPARE_SAFETY = 2.0  # the timeout must leave at least this factor over the estimate
LAMBDA_VCPU_MB = 1769


def prepare_worst_case_seconds(memory_mb: int) -> float:
    """PrepareBatch's estimated time for the largest manifest it accepts, at ``memory_mb``."""
    cpu = MAX_MANIFEST_ITEMS * PREPARE_CPU_SECONDS_PER_ITEM + MAX_MANIFEST_BYTES / 2**20 * PREPARE_CPU_SECONDS_PER_MIB
    return cpu * LAMBDA_VCPU_MB / min(memory_mb, LAMBDA_VCPU_MB)


EXPRESS_BUDGET_FIX = (
    "lower the worker function's timeout or retries.(transient|retryable|dlq_send|ambiguous).max_attempts / "
    "max_delay_seconds, or set map.child_execution_type to STANDARD"
)


RESULT_WRITER_V2_FLAG = "@aws-cdk/aws-stepfunctions:useDistributedMapResultWriterV2"
PAYLOAD_BUDGET_FIX = (
    "a failed child holds map.items_per_batch items of map.max_item_bytes and the error (a Cause of "
    "up to 32,768 characters): lower items_per_batch or max_item_bytes"
)


def _check_versioned(bucket: s3.IBucket | None) -> None:
    """The ItemReader reads the manifest version PrepareBatch validated, so the bucket must be
    versioned. A bucket defined in this app whose versioning is known and not Enabled is refused
    here; an imported one (no definition to read) is checked by PrepareBatch at run time."""
    cfn = getattr(getattr(bucket, "node", None), "default_child", None)
    if not isinstance(cfn, s3.CfnBucket):
        return
    versioning = cfn.versioning_configuration
    status = getattr(versioning, "status", None) if versioning is not None else "not enabled"
    if isinstance(status, str) and not Token.is_unresolved(status) and status != "Enabled":
        raise ConfigError(
            f"existing_data_bucket: {bucket.node.path} is not versioned (versioning {status}); the Map "
            "workflow pins the manifest it validated by its version: create it with versioned=True"
        )


class DistributedMapFanOut(FanOutWorkflow):
    """The Distributed Map fan-out workflow. Read-only attributes: ``state_machine``,
    ``dead_letter_queue``, ``status_table``, ``data_bucket``, ``update_final_status``,
    ``prepare_batch``, ``forward_failed_items``, ``retry_failed_items``, ``alarm_topic`` (None without alarms), ``alarms``,
    ``failure_guard``, ``child_worst_case_seconds`` (EXPRESS children: worst case per Map state),
    ``worst_case_state_bytes`` (the largest state's worst-case payload, checked at synth)."""

    workflow = "map"

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        worker: FanOutTask,
        map: MapSettings = MapSettings(),  # noqa: A002  (the prop is named after what it configures)
        retries: WorkflowRetries = MAP_RETRIES,
        existing_data_bucket: s3.IBucket | None = None,
        execution_timeout_minutes: int = 120,
        **props: Unpack[WorkflowProps],
    ) -> None:
        """Create the workflow and everything it needs.

        Args:
            scope: The construct's parent (a stack or a construct in one).
            construct_id: The construct's id.
            worker: Your function that processes the items, with its name and its own Retry
                policy (``FanOutTask``); it gets ``{"batchId", "items", "attempt",
                "executionArn"}``. Required.
            map: How the Distributed Map runs and checks the items: concurrency, items per
                child, child execution type, item size, failure threshold. Default
                ``MapSettings()``.
            retries: The workflow's Retry rules. Default ``MAP_RETRIES`` (transient 1, retryable
                2, DLQ send 3 attempts: an EXPRESS child fits 5 minutes with a 20 s worker, 244 s).
            existing_data_bucket: A versioned S3 bucket for the manifests and the Map's result
                files. Default: a new bucket, versioned, SSE, TLS only, access logs, lifecycle per
                ``map.results_retention_days``.
            execution_timeout_minutes: The execution's timeout (1 to 525,600). Default ``120``.
            **props: The props the workflows share (``WorkflowProps``: dead-letter queue, status
                table, alarms, logging, settings, runtime layer), each optional.

        Raises:
            ConfigError: A prop is wrong; the message names it and the fix.
        """
        props = resolve_props(WorkflowProps, props, "DistributedMapFanOut",
                              own=("worker", "map", "retries", "existing_data_bucket", "execution_timeout_minutes"))
        settings = props["settings"]
        super().__init__(
            scope,
            construct_id,
            props=props,
            retries=retries,
            dead_letter_queue_id="ItemDeadLetterQueue",
        )
        check_type("map", map, MapSettings)
        settings.check_reserved_concurrency(map.worker_reserved_concurrency, "map.worker_reserved_concurrency")
        _check_versioned(existing_data_bucket)
        (child,) = workflow_tasks([worker], retries, prop="worker")
        self._attach_runtime_layer([child.function])
        self.data_bucket: s3.IBucket = existing_data_bucket or BatchDataBucket(
            self, "BatchData", settings=settings, retention_days=map.results_retention_days
        ).bucket
        bucket = self.data_bucket
        dlq = self.dead_letter_queue

        self.prepare_batch = KitFunction(
            self,
            "PrepareBatch",
            settings=settings,
            handler="prepare_map_batch.handler",
            description="Validates a Map batch and streams its manifest (every item checked)",
            service="PrepareBatch",
            environment={
                "BATCH_BUCKET_NAME": bucket.bucket_name,
                "MAX_ITEM_BYTES": str(map.max_item_bytes),
                "MAX_INLINE_ITEMS": str(map.max_inline_items),
            },
            timeout_seconds=PREPARE_TIMEOUT_SECONDS,
            memory_mb=PREPARE_MEMORY_MB,
        ).function
        self.forward_failed_items = KitFunction(
            self,
            "ForwardFailedItems",
            settings=settings,
            handler="forward_failed_items.handler",
            description="Sends the items of Map children stopped before their DLQ step to the DLQ",
            service="ForwardFailedItems",
            environment={"DLQ_URL": dlq.queue_url, "TASK_NAME": child.name},
            timeout_seconds=300,
        ).function
        # RetryFailedItems: runs in a child only when the worker answers with batchItemFailures; it
        # invokes the worker again with the failed items and dead-letters those still failing.
        express = map.child_execution_type == "EXPRESS"
        self.retry_failed_items = KitFunction(
            self,
            "RetryFailedItems",
            settings=settings,
            handler="retry_failed_items.handler",
            description="Retries only the items a Map worker reported failed; dead-letters those still failing",
            service="RetryFailedItems",
            environment={
                "DLQ_URL": dlq.queue_url,
                "TASK_NAME": child.name,
                "WORKER_FUNCTION": child.function.function_arn,
                "RETRY_POLICY": json.dumps(
                    {
                        "intervalSeconds": child.retryable.interval_seconds,
                        "maxAttempts": child.retryable.max_attempts,
                        "backoffRate": child.retryable.backoff_rate,
                        "maxDelaySeconds": child.retryable.max_delay_seconds,
                        "retryOn": list(child.retry_on),
                        "neverRetry": list(child.never_retry),
                        "workerTimeoutSeconds": task_timeout_for(child.function) - TASK_TIMEOUT_MARGIN_SECONDS,
                    },
                    separators=(",", ":"),
                ),
            },
            timeout_seconds=item_retry_timeout_seconds(child, express),
        ).function
        # It invokes the worker unqualified (its ARN): no grant on versions and aliases (<arn>:*).
        self.retry_failed_items.add_to_role_policy(
            iam.PolicyStatement(actions=["lambda:InvokeFunction"], resources=[child.function.function_arn])
        )
        dlq.grant_send_messages(self.retry_failed_items)
        # PrepareBatch reads uploaded manifests and writes inline items, under manifests/ only.
        # s3:ListBucket on the bucket: without it S3 answers a GetObject of a missing key with 403
        # AccessDenied instead of 404 NoSuchKey (GetObject API reference, "Permissions"), and
        # PrepareBatch could not name the missing manifest. moto answers 404 either way. Not
        # narrowed with an s3:prefix condition: AWS documents the 404 for "s3:ListBucket permission
        # on the bucket", and a GetObject request carries no s3:prefix key for a condition to match.
        self.prepare_batch.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[bucket.arn_for_objects(f"{MANIFEST_PREFIX}*")],
            )
        )
        self.prepare_batch.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[bucket.bucket_arn])
        )
        self.forward_failed_items.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[bucket.arn_for_objects(f"{RESULTS_PREFIX}*")])
        )
        dlq.grant_send_messages(self.forward_failed_items)

        # CDK renders the Map's ResultWriter (ResultWriterV2) only under this feature flag; an app
        # without it would get no ResultWriter: the Map's output would be every child's output
        # (States.DataLimitExceeded) and ForwardFailedItems would find no results. Set for the
        # workflow's states whatever the app's cdk.json says (payload budget: checked at synth).
        self.states_scope.node.set_context(RESULT_WRITER_V2_FLAG, True)
        definition = build_map_workflow(
            self.states_scope,
            run=MapRunSettings(
                items_per_batch=map.items_per_batch,
                max_concurrency=map.max_concurrency,
                express_children=map.child_execution_type == "EXPRESS",
                failure_threshold=map.failure_threshold,
            ),
            worker=child,
            prepare=self.prepare_batch,
            forward_failed=self.forward_failed_items,
            retry_items=self.retry_failed_items,
            update_final_status=self.update_final_status,
            dlq=dlq,
            bucket=bucket,
            status_table=self.status_table,
            dlq_send_retry=retries.dlq_send,
            status_write_retry=retries.status_write,
        )
        self._add_state_machine(
            definition,
            {
                "PrepareBatch": self.prepare_batch,
                child.name: child.function,
                "ForwardFailedItems": self.forward_failed_items,
                "RetryFailedItems": self.retry_failed_items,
                "UpdateFinalStatus": self.update_final_status,
            },
            comment=f"Distributed Map fan-out ({settings.environment_name}); finalizes only if every item succeeded",
            execution_timeout_minutes=execution_timeout_minutes,
        )
        self.child_worst_case_seconds = self._check_express_budget()
        self.worst_case_state_bytes = self._check_payload_budget(
            MAP_INPUT_MAX_BYTES, map_item_bytes=map.max_item_bytes, fix=PAYLOAD_BUDGET_FIX
        )
        self._grant_read_map_runs()
        acknowledge_map_workflow(
            Stack.of(self), self.state_machine, self.state_machine.role, bucket, self.prepare_batch,
            map_labels=[f"ProcessItems{fmt}" for fmt in FORMATS],
            map_run_policy=self.map_run_policy, forward_function=self.forward_failed_items,
        )
        self._seal()

    def _output_values(self) -> dict[str, str]:
        return {**super()._output_values(), "BatchBucketName": self.data_bucket.bucket_name}

    def _check_express_budget(self) -> dict[str, float]:
        """Refuse at synth an EXPRESS child that could outlast AWS's 5-minute Express limit
        (ExpressBudgetError, a ConfigError; its ``problem`` is the message without the fix)."""
        return check_express_children(self._definition(), fix=EXPRESS_BUDGET_FIX)

    def _grant_read_map_runs(self) -> None:
        """ReadMapRun 1..6 call sfn:DescribeMapRun on this state machine's own map runs. A separate
        policy (as CDK does for the Distributed Map's own grants): the state machine's name is
        known only once it exists."""
        stack = Stack.of(self)
        name = Fn.select(6, Fn.split(":", self.state_machine.state_machine_arn))
        self.map_run_policy = iam.Policy(
            self,
            "MapRunReaderPolicy",
            statements=[
                iam.PolicyStatement(
                    actions=["states:DescribeMapRun"],
                    resources=[
                        f"arn:{stack.partition}:states:{stack.region}:{stack.account}:mapRun:{name}/ProcessItems{fmt}:*"
                        for fmt in FORMATS
                    ],
                )
            ],
        )
        self.map_run_policy.attach_to_role(self.state_machine.role)


"""Stack: the Distributed Map fan-out workflow of one environment."""

from __future__ import annotations

import json

from aws_cdk import CfnOutput, Fn, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.config import ConfigError, EnvironmentConfig
from stacks.constructs.batch_data_bucket import MANIFEST_PREFIX, RESULTS_PREFIX, BatchDataBucket
from stacks.constructs.functions import KitFunction
from stacks.nag_suppressions import acknowledge_map_workflow
from stacks.workflow_stack import WorkflowStack
from statemachines.express_budget import ExpressBudgetError, check_express_children
from statemachines.map_workflow import FORMATS, build_map_workflow


class MapWorkflowStack(WorkflowStack):
    """N items from an S3 manifest, one child Lambda per batch of items, exhausted items to the DLQ,
    the final status only when the map run counted every item as succeeded."""

    workflow = "map"

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, cfg=cfg, dlq_id="ItemDeadLetterQueue", **kwargs)
        self.bucket = BatchDataBucket(self, "BatchData", cfg=cfg).bucket

        def function(cid: str, handler: str, description: str, service: str, **extra) -> KitFunction:
            return KitFunction(self, cid, cfg=cfg, handler=handler, description=description, service=service, **extra)

        self.prepare = function(
            "PrepareBatch", "prepare_map_batch.handler",
            "Validates a Map batch and streams its manifest (every item checked)", "PrepareBatch",
            environment={
                "BATCH_BUCKET_NAME": self.bucket.bucket_name,
                "MAX_ITEM_BYTES": str(cfg.map.max_item_bytes),
                "MAX_INLINE_ITEMS": str(cfg.map.max_inline_items),
            },
            timeout_seconds=300,
        ).function
        self.worker = function(
            "ProcessItem", cfg.map_worker.handler, cfg.map_worker.description, cfg.map_worker.name,
            timeout_seconds=cfg.map.worker_timeout_seconds,
            reserved_concurrency=cfg.map.worker_reserved_concurrency,
        ).function
        self.forward_failed = function(
            "ForwardFailedItems", "forward_failed_items.handler",
            "Sends the items of Map children stopped before their DLQ step to the DLQ", "ForwardFailedItems",
            environment={"DLQ_URL": self.dlq.queue_url, "TASK_NAME": cfg.map_worker.name},
            timeout_seconds=300,
        ).function
        # PrepareBatch reads uploaded manifests and writes inline items, under manifests/ only.
        # s3:ListBucket on the bucket: without it S3 answers a GetObject of a missing key with 403
        # AccessDenied instead of 404 NoSuchKey (GetObject API reference, "Permissions"), and
        # PrepareBatch could not name the missing manifest. moto answers 404 either way. Not
        # narrowed with an s3:prefix condition: AWS documents the 404 for "s3:ListBucket permission
        # on the bucket", and a GetObject request carries no s3:prefix key for a condition to match.
        self.prepare.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[self.bucket.arn_for_objects(f"{MANIFEST_PREFIX}*")],
            )
        )
        self.prepare.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
            )
        )
        self.forward_failed.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[self.bucket.arn_for_objects(f"{RESULTS_PREFIX}*")])
        )
        self.dlq.grant_send_messages(self.forward_failed)

        definition = build_map_workflow(
            self.states_scope,
            cfg=cfg,
            prepare=self.prepare,
            worker=self.worker,
            forward_failed=self.forward_failed,
            update_final_status=self.update_final_status,
            dlq=self.dlq,
            bucket=self.bucket,
            status_table=self.status_table,
        )
        self.add_state_machine(
            definition,
            {
                "PrepareBatch": self.prepare,
                cfg.map_worker.name: self.worker,
                "ForwardFailedItems": self.forward_failed,
                "UpdateFinalStatus": self.update_final_status,
            },
            comment=f"Distributed Map fan-out ({cfg.name}); finalizes only if every item succeeded",
        )
        self.child_worst_case_seconds = self._check_express_budget(cfg)
        self._grant_read_map_runs()
        acknowledge_map_workflow(
            self, self.state_machine, self.state_machine.role, self.bucket, self.prepare,
            map_labels=[f"ProcessItems{fmt}" for fmt in FORMATS],
            map_run_policy=self.map_run_policy, forward_function=self.forward_failed,
        )
        CfnOutput(self, "BatchBucketName", value=self.bucket.bucket_name)

    def _definition(self) -> dict:
        """The state machine's ASL as it deploys (tokens such as ARNs replaced by a placeholder)."""
        resolved = Stack.of(self).resolve(self.state_machine.node.default_child.definition_string)
        if isinstance(resolved, dict) and "Fn::Join" in resolved:
            resolved = "".join(p if isinstance(p, str) else "TOKEN" for p in resolved["Fn::Join"][1])
        return json.loads(resolved)

    def _check_express_budget(self, cfg: EnvironmentConfig) -> dict[str, float]:
        """Refuse at synth an EXPRESS child that could outlast AWS's 5-minute Express limit."""
        graph = self._definition()
        where = f"context.fanout:environments.{cfg.name}.map"
        try:
            return check_express_children(
                graph,
                fix=f"lower {where}.workerTimeoutSeconds or {where}.retry.(transient|retryable|dlqSend)"
                ".maxAttempts / maxDelaySeconds, or set {where}.childExecutionType to STANDARD".replace(
                    "{where}", where
                ),
            )
        except ExpressBudgetError as exc:
            raise ConfigError(str(exc)) from None

    def _grant_read_map_runs(self) -> None:
        """ReadMapRun calls sfn:DescribeMapRun on this state machine's own map runs. A separate
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

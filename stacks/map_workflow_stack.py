"""Stack: the Distributed Map fan-out workflow of one environment."""

from __future__ import annotations

from aws_cdk import CfnOutput
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.batch_data_bucket import MANIFEST_PREFIX, BatchDataBucket
from stacks.constructs.completion_ledger import CompletionLedger
from stacks.constructs.functions import KitFunction
from stacks.nag_suppressions import acknowledge_map_workflow
from stacks.workflow_stack import WorkflowStack
from statemachines.map_workflow import FORMATS, build_map_workflow


class MapWorkflowStack(WorkflowStack):
    """N items from an S3 manifest, one child Lambda per batch of items, exhausted items to the DLQ,
    the final status only when the ledger counted every item as succeeded."""

    workflow = "map"

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, cfg=cfg, dlq_id="ItemDeadLetterQueue", **kwargs)
        self.ledger = CompletionLedger(self, "Ledger", cfg=cfg, settings=cfg.ledger)
        self.bucket = BatchDataBucket(self, "BatchData", cfg=cfg).bucket
        ledger_env = {"LEDGER_TABLE_NAME": self.ledger.table.table_name}

        def function(cid: str, handler: str, description: str, service: str, **extra) -> KitFunction:
            return KitFunction(
                self, cid, cfg=cfg, handler=handler, description=description, service=service,
                environment={**ledger_env, **extra.pop("environment", {})}, **extra,
            )

        self.prepare = function(
            "PrepareBatch", "prepare_map_batch.handler",
            "Validates a Map batch and its manifest; registers its total in the ledger", "PrepareBatch",
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
        self.record_failures = function(
            "RecordItemFailures", "record_item_failures.handler",
            "Counts the items of a dead-lettered Map child as failed in the ledger", "RecordItemFailures",
        ).function
        self.decide = function(
            "DecideBatch", "decide_map_batch.handler",
            "Decides a Map batch from the ledger's counts", "DecideBatch", timeout_seconds=30,
        ).function
        # The manifests: PrepareBatch writes inline items and reads uploaded manifests.
        self.prepare.add_to_role_policy(
            iam.PolicyStatement(
                actions=["s3:GetObject", "s3:PutObject"],
                resources=[self.bucket.arn_for_objects(f"{MANIFEST_PREFIX}*")],
            )
        )
        # s3:ListBucket on the bucket: without it S3 answers a GetObject of a missing key with 403
        # AccessDenied instead of 404 NoSuchKey, and PrepareBatch could not name the missing
        # manifest (GetObject API reference, "Permissions"). moto answers 404 either way.
        self.prepare.add_to_role_policy(
            iam.PolicyStatement(actions=["s3:ListBucket"], resources=[self.bucket.bucket_arn])
        )
        for fn in (self.prepare, self.worker, self.record_failures, self.decide):
            self.ledger.grant_record(fn)
        self.decide.add_to_role_policy(
            iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=[self.ledger.table.table_arn])
        )

        definition = build_map_workflow(
            self.states_scope,
            cfg=cfg,
            prepare=self.prepare,
            worker=self.worker,
            record_failures=self.record_failures,
            decide=self.decide,
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
                "RecordItemFailures": self.record_failures,
                "DecideBatch": self.decide,
                "UpdateFinalStatus": self.update_final_status,
            },
            comment=f"Distributed Map fan-out ({cfg.name}); finalizes only if every item succeeded",
        )
        acknowledge_map_workflow(
            self, self.state_machine, self.state_machine.role, self.bucket, self.prepare,
            map_labels=[f"ProcessItems{fmt}" for fmt in FORMATS],
        )
        CfnOutput(self, "BatchBucketName", value=self.bucket.bucket_name)
        CfnOutput(self, "LedgerTableName", value=self.ledger.table.table_name)

"""Stack: the Distributed Map fan-out workflow of one environment."""

from __future__ import annotations

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.batch_data_bucket import MANIFEST_PREFIX, BatchDataBucket
from stacks.constructs.completion_ledger import CompletionLedger
from stacks.constructs.dead_letter_queue import TaskDeadLetterQueue
from stacks.constructs.final_status_store import FinalStatusStore
from stacks.constructs.functions import KitFunction
from stacks.constructs.workflow_alarms import WorkflowAlarms
from stacks.constructs.workflow_state_machine import WorkflowStateMachine
from stacks.nag_suppressions import acknowledge_map_workflow
from statemachines.map_workflow import FORMATS, build_map_workflow


class MapWorkflowStack(Stack):
    """N items from an S3 manifest, one child Lambda per batch of items, exhausted items to the DLQ,
    the final status only when the ledger counted every item as succeeded."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.cfg = cfg
        self.dlq = TaskDeadLetterQueue(self, "ItemDeadLetterQueue", cfg=cfg).queue
        store = FinalStatusStore(self, "FinalStatus", cfg=cfg)
        self.status_table = store.table
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
        for fn in (self.prepare, self.worker, self.record_failures, self.decide):
            self.ledger.grant_record(fn)
        self.decide.add_to_role_policy(
            iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=[self.ledger.table.table_arn])
        )

        # Every function the state machine invokes, by name: its invoke grants and its alarms.
        self.functions = {
            "PrepareBatch": self.prepare,
            cfg.map_worker.name: self.worker,
            "RecordItemFailures": self.record_failures,
            "DecideBatch": self.decide,
            "UpdateFinalStatus": store.update_final_status,
        }
        definition = build_map_workflow(
            Construct(self, "States"),
            cfg=cfg,
            prepare=self.prepare,
            worker=self.worker,
            record_failures=self.record_failures,
            decide=self.decide,
            update_final_status=store.update_final_status,
            dlq=self.dlq,
            bucket=self.bucket,
            status_table=self.status_table,
        )
        self.workflow = WorkflowStateMachine(
            self,
            "Workflow",
            cfg=cfg,
            definition=definition,
            invoked_functions=list(self.functions.values()),
            comment=f"Distributed Map fan-out ({cfg.name}); finalizes only if every item succeeded",
        )
        self.state_machine = self.workflow.state_machine
        self.alarms = WorkflowAlarms(
            self,
            "Alarms",
            cfg=cfg,
            workflow="map",
            state_machine=self.state_machine,
            dlq=self.dlq,
            functions=self.functions,
        )
        acknowledge_map_workflow(
            self, self.state_machine, self.state_machine.role, self.bucket, self.prepare,
            map_labels=[f"ProcessItems{fmt}" for fmt in FORMATS],
        )
        CfnOutput(self, "StateMachineArn", value=self.state_machine.state_machine_arn)
        CfnOutput(self, "BatchBucketName", value=self.bucket.bucket_name)
        CfnOutput(self, "DeadLetterQueueUrl", value=self.dlq.queue_url)
        CfnOutput(self, "StatusTableName", value=self.status_table.table_name)
        CfnOutput(self, "LedgerTableName", value=self.ledger.table.table_name)
        CfnOutput(self, "AlarmTopicArn", value=self.alarms.topic.topic_arn)

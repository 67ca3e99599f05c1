"""The batch status table and the UpdateFinalStatus function that owns its SUCCEEDED write."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.storage import secure_table
from stacks.constructs.functions import KitFunction


class FinalStatusStore(Construct):
    """One item per batch (key ``batchId``); PITR and encryption on; deletion protection where the
    environment retains data. UpdateFinalStatus may only read and update items of this table."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig) -> None:
        super().__init__(scope, construct_id)
        self.table = secure_table(self, "Table", cfg=cfg, partition_key="batchId")
        self.update_final_status = KitFunction(
            self,
            "UpdateFinalStatus",
            cfg=cfg,
            handler="update_final_status.handler",
            description="Writes a batch's SUCCEEDED status exactly once (conditional write)",
            service="UpdateFinalStatus",
            environment={"STATUS_TABLE_NAME": self.table.table_name},
        ).function
        # GetItem (redrive check) and UpdateItem (the conditional write) on this table only.
        self.update_final_status.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
                resources=[self.table.table_arn],
            )
        )

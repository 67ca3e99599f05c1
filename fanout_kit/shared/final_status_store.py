"""The batch status table and the UpdateFinalStatus function that owns its SUCCEEDED write."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from fanout_kit.shared.settings import ResourceSettings
from fanout_kit.shared.storage import secure_table
from fanout_kit.shared.functions import KitFunction


class FinalStatusStore(Construct):
    """One item per batch (key ``batchId``); PITR and encryption on; deletion protection where the
    environment retains data. UpdateFinalStatus may only read and update items of this table."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ResourceSettings,
        existing_table: dynamodb.ITable | None = None,
        table_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        """``existing_table``: a table keyed by the string ``batchId`` (no sort key) to use instead
        of creating one; ``table_overrides``: ``dynamodb.Table`` arguments over the defaults."""
        super().__init__(scope, construct_id)
        self.table: dynamodb.ITable = existing_table or secure_table(
            self, "Table", settings=settings, partition_key="batchId", overrides=table_overrides
        )
        self.update_final_status = KitFunction(
            self,
            "UpdateFinalStatus",
            settings=settings,
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

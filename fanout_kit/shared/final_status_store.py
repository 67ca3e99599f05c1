"""The batch status table and the UpdateFinalStatus function that owns its SUCCEEDED write."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from fanout_kit.shared.checks import ConfigError, one_of
from fanout_kit.shared.settings import ResourceSettings
from fanout_kit.shared.storage import checked_overrides, secure_table
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


def status_store(scope: Construct, props: Mapping[str, Any]) -> FinalStatusStore:
    """The status store a construct's resolved props ask for (``SharedProps``): the
    ``existing_status_table``, or a new table with ``status_table_props`` over the defaults."""
    existing, overrides = props["existing_status_table"], props["status_table_props"]
    one_of(existing, overrides, "existing_status_table", "status_table_props")
    if overrides and {"partition_key", "sort_key"} & set(overrides):
        raise ConfigError("status_table_props: the key is the kit's (batchId); leave partition_key and sort_key out")
    return FinalStatusStore(
        scope, "FinalStatus", settings=props["settings"], existing_table=existing,
        table_overrides=checked_overrides(overrides, dynamodb.Table, "status_table_props"),
    )

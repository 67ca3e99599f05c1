"""The batch status table and the UpdateFinalStatus function that owns its SUCCEEDED write."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.config import EnvironmentConfig
from stacks.constructs.functions import KitFunction, removal_policy


class FinalStatusStore(Construct):
    """One item per batch (key ``batchId``); PITR and encryption on; deletion protection where the
    environment retains data. UpdateFinalStatus may only read and update items of this table."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name="batchId", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=cfg.retain_data,
            removal_policy=removal_policy(cfg),
        )
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

"""The completion-ledger table and the least-privilege grants of the functions that use it."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from fanout_kit.patterns.completion_ledger import ledger as rules
from fanout_kit.shared.settings import LedgerSettings, ResourceSettings
from fanout_kit.shared.storage import secure_table

# What each kind of ledger function may do, and nothing else:
# TransactWriteItems is authorized as the PutItem (child mark) and UpdateItem (batch counter) it
# contains; the transitions and acknowledge_finish are UpdateItems. No Query/Scan: the ledger never
# reads to count (a cancelled transaction returns the old item itself).
RECORDER_ACTIONS = ("dynamodb:PutItem", "dynamodb:UpdateItem")
# The consumers' decision check reads the batch (consistent GetItem; sharded: one BatchGetItem of
# the batch item and its shards) and tries a transition only when it is due.
DECISION_READ_ACTIONS = ("dynamodb:GetItem",)
SHARDED_DECISION_READ_ACTIONS = ("dynamodb:GetItem", "dynamodb:BatchGetItem")
# The sweeper queries the sparse deadline index and fails overdue batches with UpdateItem.
SWEEPER_TABLE_ACTIONS = ("dynamodb:UpdateItem",)
SWEEPER_INDEX_ACTIONS = ("dynamodb:Query",)


class LedgerTable(Construct):
    """Table with composite key (pk, sk), on-demand, AWS-managed encryption, PITR, TTL on
    ``expiresAt``, deletion protection where the environment retains data, and the sparse GSI
    ``RunningByDeadline`` (KEYS_ONLY) the deadline sweeper queries."""

    def __init__(
        self, scope: Construct, construct_id: str, *, settings: ResourceSettings, ledger: LedgerSettings
    ) -> None:
        super().__init__(scope, construct_id)
        self.settings = ledger
        self.table = secure_table(
            self, "Table", settings=settings, partition_key="pk", sort_key="sk", ttl_attribute=rules.TTL_ATTRIBUTE
        )
        self.table.add_global_secondary_index(
            index_name=rules.SWEEP_INDEX,
            partition_key=dynamodb.Attribute(name=rules.SWEEP_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=rules.SWEEP_SORT, type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
        )
        self.index_arn = f"{self.table.table_arn}/index/{rules.SWEEP_INDEX}"

    def environment(self) -> dict[str, str]:
        """The LEDGER_* variables of fanout_kit.patterns.completion_ledger.runtime."""
        s = self.settings
        return {
            "LEDGER_TABLE_NAME": self.table.table_name,
            "LEDGER_FAILURE_THRESHOLD": str(s.failure_threshold),
            "LEDGER_TTL_DAYS": str(s.ttl_days),
            "LEDGER_DEADLINE_MINUTES": str(s.deadline_minutes),
        }

    def consumer_environment(self) -> dict[str, str]:
        """``environment()`` plus the counter layout of the SQS/Kinesis consumers."""
        return {**self.environment(), "LEDGER_COUNTER_SHARDS": str(self.settings.counter_shards)}

    def grant_consume(self, function: lambda_.Function) -> None:
        """A consumer: record children and make the decision check (reads, then a transition)."""
        self.grant_record(function)
        reads = SHARDED_DECISION_READ_ACTIONS if self.settings.counter_shards > 1 else DECISION_READ_ACTIONS
        function.add_to_role_policy(iam.PolicyStatement(actions=list(reads), resources=[self.table.table_arn]))

    def grant_record(self, function: lambda_.Function) -> None:
        function.add_to_role_policy(
            iam.PolicyStatement(actions=list(RECORDER_ACTIONS), resources=[self.table.table_arn])
        )

    def grant_sweep(self, function: lambda_.Function) -> None:
        function.add_to_role_policy(
            iam.PolicyStatement(actions=list(SWEEPER_INDEX_ACTIONS), resources=[self.index_arn])
        )
        function.add_to_role_policy(
            iam.PolicyStatement(actions=list(SWEEPER_TABLE_ACTIONS), resources=[self.table.table_arn])
        )

"""Tables of the ledger tests, created as the stacks define them (imported by conftest and tests)."""

from __future__ import annotations

from typing import Any

from fanout_kit.patterns.completion_ledger import ledger as ledger_rules


def create_ledger_table(client: Any, name: str) -> str:
    """The ledger table as the stack defines it (keys, sparse deadline index)."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": ledger_rules.SWEEP_KEY, "AttributeType": "S"},
            {"AttributeName": ledger_rules.SWEEP_SORT, "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {
                "IndexName": ledger_rules.SWEEP_INDEX,
                "KeySchema": [
                    {"AttributeName": ledger_rules.SWEEP_KEY, "KeyType": "HASH"},
                    {"AttributeName": ledger_rules.SWEEP_SORT, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
    )
    return name


def create_status_table(client: Any, name: str) -> str:
    """The FinalStatusStore table (key batchId) that UpdateFinalStatus writes."""
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "batchId", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "batchId", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return name

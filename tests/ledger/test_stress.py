"""Stress: concurrent invocations drain a batch while the DynamoDB contention model cancels their
transactions (benchmarks/ledger_stress.py: TransactWriteItems hold their items 10-15 ms,
TransactionConflict as DynamoDB documents it, immediate redelivery, maxReceiveCount 3). Every
child's work succeeds, so a child counted FAILED is a false failure: there must be none, the batch
must be finalized exactly once, and no child's work may run twice.

The fast runs give the ledger only 2 attempts per transaction, so that contention outlasts them and
messages go back to the queue (and to the DLQ) within seconds; the control shows the same run
produced false failures before the work record. The full-size run (500 invocations, 1,000
children) is ``benchmarks/ledger_benchmark.py --stress``.
"""

from __future__ import annotations

import boto3
import pytest
from botocore.config import Config

from benchmarks.ledger_stress import stress
from fanout_kit.shared.observability import logger

WINDOW = (0.010, 0.015)
ROUNDS = 3  # a round in which no message lost its race (a loaded machine serialized the threads) is run again


def client_for(endpoint: str, invocations: int):
    return boto3.client("dynamodb", region_name="eu-west-1", endpoint_url=endpoint,
                        config=Config(max_pool_connections=invocations + 8, retries={"mode": "standard"}))


@pytest.fixture(autouse=True)
def quiet_logs():
    level = logger.log_level
    logger.setLevel("ERROR")
    yield
    logger.setLevel(level)


def raced(client, *, invocations: int, children: int, shards: int, legacy: bool = False, attempts: int | None = 2,
          until=lambda r: r.redelivered > 0):
    for _ in range(ROUNDS):
        result = stress(client, invocations=invocations, children=children, shards=shards, window=WINDOW,
                        max_receive_count=3, legacy=legacy, max_conflict_attempts=attempts)
        if until(result):
            break
    return result


def assert_never_wrong(result, children: int) -> None:
    figures = result.to_dict()
    assert result.false_failures == 0, figures
    assert result.finalized == 1, figures
    assert (result.status, result.succeeded, result.failed) == ("COMPLETED", children, 0), figures
    assert result.work_reruns == 0 and result.work_runs == children, figures
    assert result.stuck == 0, figures


def test_stress_no_false_failure_and_one_finalization(moto_endpoint):
    result = raced(client_for(moto_endpoint, 16), invocations=16, children=24, shards=1)
    assert result.redelivered > 0, result.to_dict()  # contention outlasted the ledger's retries
    assert_never_wrong(result, 24)


def test_control_the_same_stress_made_false_failures_before_the_work_record(moto_endpoint):
    result = raced(client_for(moto_endpoint, 16), invocations=16, children=24, shards=1, legacy=True,
                   until=lambda r: r.false_failures > 0)
    assert result.false_failures > 0 and result.status == "FAILED" and result.finalized == 0, result.to_dict()
    assert result.work_reruns > 0


@pytest.mark.slow
@pytest.mark.parametrize("shards", [1, 8])
def test_stress_full_retries_many_invocations(moto_endpoint, shards):
    result = raced(client_for(moto_endpoint, 150), invocations=150, children=300, shards=shards, attempts=None,
                   until=lambda r: r.transaction_conflicts > 0)
    assert result.transaction_conflicts > 0, result.to_dict()
    assert_never_wrong(result, 300)

import copy
import json
from pathlib import Path

import pytest

from fanout_kit.local.engine import LocalEngine
from fanout_runtime.faults import SIMULATE_KEY

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "batch.json").read_text())


def assert_no_denied_calls(local):
    """Every AWS call the handlers and the state machine made is allowed by its role's
    synthesized policies (fanout_kit/local/iam.py): a denied call fails the test that made it."""
    denied = [
        f"{p.stack if p else '?'}/{p.label if p else '?'}: {c.service}:{c.operation} -> "
        f"{perm.action + ' on ' + perm.resource if perm else c.error}: {decision}"
        for p, c, perm, decision in local.iam_report().denied()
    ]
    assert denied == [], "calls the deployed roles would refuse:\n" + "\n".join(denied)


@pytest.fixture
def engine(dev_app):
    """A fresh local deployment of the dev app per test; Retry waits recorded, not slept; every
    AWS call checked against its role's policies at the end."""
    with LocalEngine(dev_app, sleep_retries=False) as local:
        yield local
        assert_no_denied_calls(local)


@pytest.fixture
def batch():
    """The example batch with a fresh batch id; ``batch(ChargePayment={...switch})`` adds faults."""
    counter = iter(range(10**6))

    def make(batch_id=None, **faults):
        data = copy.deepcopy(EXAMPLE)
        data["batchId"] = batch_id or f"e2e-{next(counter)}"
        for task, switch in faults.items():
            data["tasks"][task][SIMULATE_KEY] = switch
        return data

    return make

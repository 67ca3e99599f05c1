import copy
import json
from pathlib import Path

import pytest

from fanout.local.engine import LocalEngine
from lambdas.fanout_common.worker import SIMULATE_KEY

EXAMPLE = json.loads((Path(__file__).resolve().parents[2] / "examples" / "batch.json").read_text())


@pytest.fixture
def engine(dev_app):
    """A fresh local deployment of the dev app per test; Retry waits recorded, not slept."""
    with LocalEngine(dev_app, sleep_retries=False) as local:
        yield local


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

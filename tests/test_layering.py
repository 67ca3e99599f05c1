"""Layering: the infrastructure code (the CDK app) must not load the handlers' runtime libraries.

At synth, the app imports only pure modules of ``fanout_kit.shared`` and ``fanout_kit.patterns``
(constructs, definitions, error names, status rules, metric names, the ledger's rules); boto3 and Powertools are for the Lambda runtime. Each check runs in a
fresh interpreter, so modules other tests imported do not hide (or cause) a violation, and names
the chain of imports that loaded the first forbidden module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_ONLY = ("boto3", "botocore", "aws_lambda_powertools")
# The modules of the constructs' layers that may load them (the handlers, in handlers/ folders, and
# these); every other one is pure.
RUNTIME_MODULES = {"fanout_kit.shared.observability", "fanout_kit.patterns.completion_ledger.runtime"}
PURE_MODULES = sorted(
    name for name in (".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                      for layer in ("shared", "patterns") for p in (ROOT / "fanout_kit" / layer).rglob("*.py"))
    if ".handlers" not in name and name not in RUNTIME_MODULES
)

# Run in the child interpreter: a meta path finder that finds nothing but records, for the first
# import of each forbidden package, the modules whose top-level code was importing at the time.
_PROBE = """
import json, sys

FORBIDDEN = set(json.loads(sys.argv[1]))
chains = {}


class ImportChainRecorder:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in FORBIDDEN and top not in chains:
            chain, frame = [], sys._getframe(1)
            while frame is not None:
                if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") != "__main__":
                    chain.append(frame.f_globals["__name__"])
                frame = frame.f_back
            chains[top] = [*reversed(chain), name]
        return None


sys.meta_path.insert(0, ImportChainRecorder())
import importlib

importlib.import_module(sys.argv[2])
print(json.dumps({"loaded": sorted(m for m in FORBIDDEN if m in sys.modules), "chains": chains}))
"""


def imported_runtime_modules(module: str) -> dict:
    """Import ``module`` in a fresh interpreter (cwd the repo root, import roots . and lambdas);
    returns which forbidden packages it loaded and the import chain that loaded each."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((".", "lambdas"))}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(RUNTIME_ONLY), module],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, f"importing {module} failed:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def describe(found: dict) -> str:
    return "; ".join(f"{top}: {' -> '.join(found['chains'].get(top, ['?']))}" for top in found["loaded"])


@pytest.mark.parametrize("module", ["stacks.app_builder", "fanout_kit.patterns.parallel.construct", "fanout_kit.patterns.distributed_map.construct",
                                    "fanout_kit.patterns.completion_ledger.construct"])
def test_the_cdk_app_loads_no_boto3_botocore_or_powertools(module):
    """The app, and each construct as another app imports it."""
    found = imported_runtime_modules(module)
    assert found["loaded"] == [], (
        f"the CDK app loads runtime-only packages at synth ({describe(found)}); import a pure "
        "module (constants, rules) instead, or move the import into the function that needs it"
    )


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_shared_modules_load_no_runtime_library(module):
    """What the CDK app may import from the constructs' layers: a new module is pure unless it is listed
    in RUNTIME_MODULES (and then the app must not import it)."""
    found = imported_runtime_modules(module)
    assert found["loaded"] == [], f"{module} loads runtime-only packages at import ({describe(found)})"


def test_the_probe_names_the_chain_of_a_runtime_module():
    """The check above can fail: the same probe sees the ledger runtime load boto3 and Powertools,
    and names the module that imported each."""
    found = imported_runtime_modules("fanout_kit.patterns.completion_ledger.runtime")
    assert found["loaded"] == ["aws_lambda_powertools", "boto3", "botocore"]
    assert found["chains"]["boto3"][:2] == ["fanout_kit.patterns.completion_ledger.runtime", "boto3"]
    assert "fanout_kit.shared.observability" in found["chains"]["aws_lambda_powertools"]
    assert "boto3" in describe(found) and " -> " in describe(found)

"""Suite-wide setup: the repository root, offline fake AWS credentials, and the supported Node for jsii."""

import os
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent  # the repository (tests import it from here)

# Nothing here may reach AWS: fake credentials, a fixed region, no IMDS lookups.
for key, value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "eu-west-1",
    "AWS_REGION": "eu-west-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_DEV": "false",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_METRICS_NAMESPACE": "FanOutKit",
}.items():
    os.environ[key] = value
os.environ.pop("AWS_PROFILE", None)
# `fanout run` / `fanout ledger` save each batch for `fanout results --local`: not in the repository
import tempfile  # noqa: E402

os.environ["FANOUT_STATE_DIR"] = tempfile.mkdtemp(prefix="fanout-state-")

from fanout_kit.shared.jsii_node import use_venv_node  # noqa: E402

use_venv_node()

import pytest  # noqa: E402

ENVIRONMENTS = ("dev", "prod")


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory):
    """``synthesized("dev")`` -> the app of that environment, synthesized once per session
    (cdk-nag included) with the same builder as ``cdk synth`` and the local engine."""
    from fanout_kit.local.template import synthesize

    cache = {}

    def get(env_name: str):
        if env_name not in cache:
            cache[env_name] = synthesize(env_name, tmp_path_factory.mktemp(f"cdk-out-{env_name}"))
        return cache[env_name]

    return get


@pytest.fixture(scope="session")
def dev_app(synthesized):
    return synthesized("dev")

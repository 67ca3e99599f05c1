"""This repository's app settings: its cdk.json (next to app.py), read and validated by the kit's
reader (``fanout_kit.shared.app_config``, the kit's cdk.json format); the names the stacks and the
tests use, from one place."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fanout_kit.shared import app_config
from fanout_kit.shared.app_config import (  # noqa: F401  (the app's and tests' names)
    AMBIGUOUS,
    BUILDER_KEY,
    ENVIRONMENTS_KEY,
    MAP_WORKER_KEY,
    TASKS_KEY,
    EnvironmentConfig,
    TaskSpec,
    cdk_json_name,
    load_environment,
    load_ledger_settings,
    log_group_name,
    stack_names,
)
from fanout_kit.shared.checks import ConfigError  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = ROOT / "cdk.json"


def read_cdk_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """This app's cdk.json context (a ConfigError names what is wrong)."""
    return app_config.read_cdk_context(path)


def environment_names(context: Mapping[str, Any] | None = None) -> list[str]:
    return app_config.environment_names(context if context is not None else read_cdk_context())

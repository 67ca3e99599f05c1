"""The kit's runtime layer: the ``fanout_runtime`` package (error classes, event definitions) as a
Lambda layer, so that your functions import it on AWS exactly as in your tests.

Why a layer (as Powertools for AWS Lambda ships itself) rather than "define classes of the same
name yourself": the names are matched by Step Functions, so a class of your own works, but then the
names, the events' shapes and their parse helpers live in your code and drift from the kit's; the
layer is the kit's own module, versioned with the constructs that synthesize the matching Retry
and Catch rules, and your code asset stays yours. The constructs attach it to the functions you
pass them (``runtime_layer=True``, the default); for a function they cannot change (imported,
``from_function_arn``) attach ``runtime_layer(stack)`` yourself, or bundle the package.

The layer's asset is ``python/fanout_runtime/*.py`` (Lambda puts a Python layer's ``python/`` on
``sys.path``: https://docs.aws.amazon.com/lambda/latest/dg/packaging-layers.html#packaging-layers-paths),
copied from the one source, the ``fanout_runtime`` package (a top-level package of this repository
and of the installed wheel).
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Stack
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

import fanout_runtime
from fanout_kit.shared.assets import staged_dir
from fanout_kit.shared.functions import RUNTIME

RUNTIME_PACKAGE = "fanout_runtime"
RUNTIME_SOURCE = Path(fanout_runtime.__file__).parent
LAYER_ID = "FanOutRuntimeLayer"
# Standard library only, so any Python runtime the kit supports can load it.
COMPATIBLE_RUNTIMES = (lambda_.Runtime.PYTHON_3_11, lambda_.Runtime.PYTHON_3_12, RUNTIME)


def runtime_sources() -> dict[str, bytes]:
    """The package's files (name -> content), as the layer ships them."""
    return {p.name: p.read_bytes() for p in sorted(RUNTIME_SOURCE.glob("*.py"))}


def layer_asset_dir() -> Path:
    """A directory laid out as the layer (``python/fanout_runtime/...``), built once per content
    (``fanout_kit.shared.assets.staged_dir``)."""
    return staged_dir("fanout-runtime-layer",
                      {f"python/{RUNTIME_PACKAGE}/{name}": body for name, body in runtime_sources().items()})


def runtime_layer(scope: Construct) -> lambda_.LayerVersion:
    """The runtime layer of ``scope``'s stack (one per stack, created on first use)."""
    stack = Stack.of(scope)
    existing = stack.node.try_find_child(LAYER_ID)
    if existing is not None:
        return existing
    return lambda_.LayerVersion(
        stack,
        LAYER_ID,
        code=lambda_.Code.from_asset(str(layer_asset_dir())),
        compatible_runtimes=list(COMPATIBLE_RUNTIMES),
        description="fanout_runtime: the fan-out kit's error classes and event definitions for your functions",
    )


def attach_runtime_layer(function: object) -> bool:
    """Add the runtime layer to ``function`` if the kit can (a Function created in this app, not an
    imported one) and it has not got it yet; returns whether the function has it."""
    if not isinstance(function, lambda_.Function):
        return False
    layer = runtime_layer(function)
    arn = Stack.of(function).resolve(layer.layer_version_arn)
    # Lambda refuses a function that lists one layer twice (two constructs sharing a function).
    layers = Stack.of(function).resolve(function.node.default_child.layers) or []
    if arn not in layers:
        function.add_layers(layer)
    return True

"""The app's own Lambda functions (the example tasks and the Map worker of cdk.json), built the
kit's way (KitFunction) from the app's code in lambdas/: each function's asset holds its handler's
module and the app's modules it imports (``fanout_kit.shared.assets.code_asset_dir``: tasks/ for a task,
map_item_worker.py for the worker), nothing of the kit. Like any user's function they import only
``fanout_runtime`` (the runtime layer the constructs attach) and Powertools (KitFunction's layer)."""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from fanout_kit.shared.assets import code_asset_dir
from fanout_kit.shared.functions import KitFunction
from stacks.config import ROOT, EnvironmentConfig, TaskSpec

APP_CODE = ROOT / "lambdas"
APP_ROOTS: dict = {}  # nothing of the kit's packages is copied into the app's assets


def app_function(
    scope: Construct, construct_id: str, cfg: EnvironmentConfig, spec: TaskSpec, **kwargs
) -> lambda_.Function:
    """A function of the app running ``spec.handler`` from lambdas/."""
    return handler_function(scope, construct_id, cfg, spec.name, spec.handler, spec.description, **kwargs)


def handler_function(
    scope: Construct, construct_id: str, cfg: EnvironmentConfig, name: str, handler: str, description: str, **kwargs
) -> lambda_.Function:
    """A function of the app running ``handler`` (``module.function``) from lambdas/."""
    asset = code_asset_dir([handler.rpartition(".")[0]], APP_CODE, APP_ROOTS, prefix="fanout-app-code")
    return KitFunction(
        scope,
        construct_id,
        settings=cfg.resources,
        handler=handler,
        description=description,
        service=name,
        code=lambda_.Code.from_asset(str(asset)),
        **kwargs,
    ).function

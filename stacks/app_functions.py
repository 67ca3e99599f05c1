"""The app's own Lambda functions (the example tasks and the Map worker of cdk.json), built the
kit's way (KitFunction) from the app's code in lambdas/: each function's asset holds its handler's
module and what it imports of the app's and the kit's code (``fanout_kit.assets.code_asset_dir``),
not the kit's own handlers."""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from fanout_kit.assets import KIT_ROOTS, code_asset_dir
from fanout_kit.functions import KitFunction
from stacks.config import ROOT, EnvironmentConfig, TaskSpec

APP_CODE = ROOT / "lambdas"
# What the app's functions import from the kit besides fanout_runtime (which the constructs give
# them as the runtime layer): the example workers' task_handler and fault switch.
APP_ROOTS = {"fanout_kit": KIT_ROOTS["fanout_kit"]}


def app_function(
    scope: Construct, construct_id: str, cfg: EnvironmentConfig, spec: TaskSpec, **kwargs
) -> lambda_.Function:
    """A function of the app running ``spec.handler`` from lambdas/."""
    asset = code_asset_dir([spec.handler.rpartition(".")[0]], APP_CODE, APP_ROOTS, prefix="fanout-app-code")
    return KitFunction(
        scope,
        construct_id,
        settings=cfg.resources,
        handler=spec.handler,
        description=spec.description,
        service=spec.name,
        code=lambda_.Code.from_asset(str(asset)),
        **kwargs,
    ).function

"""The app's own Lambda functions (the example tasks and the Map worker of cdk.json), built the
kit's way (KitFunction) from the app's code asset, lambdas/."""

from __future__ import annotations

from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from fanout_kit.functions import ASSET_EXCLUDES, KitFunction
from stacks.config import ROOT, EnvironmentConfig, TaskSpec

APP_ASSET = ROOT / "lambdas"


def app_function(
    scope: Construct, construct_id: str, cfg: EnvironmentConfig, spec: TaskSpec, **kwargs
) -> lambda_.Function:
    """A function of the app running ``spec.handler`` from lambdas/."""
    return KitFunction(
        scope,
        construct_id,
        settings=cfg.resources,
        handler=spec.handler,
        description=spec.description,
        service=spec.name,
        code=lambda_.Code.from_asset(str(APP_ASSET), exclude=ASSET_EXCLUDES),
        **kwargs,
    ).function

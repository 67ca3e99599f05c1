"""Python Lambda functions built the kit's way: own log group and role, X-Ray, the Powertools layer.

The kit's own functions (input check, final status, batch preparation, ledger consumers...) run
from code assets that hold their handler and what it imports (``fanout_kit.shared.assets``: each
handler lives in its pattern's ``handlers/`` folder); an app may build its functions
the same way from its own asset (``code=``)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from fanout_kit.shared.assets import kit_asset_dir
from fanout_kit.shared.nag import acknowledge_function
from fanout_kit.shared.settings import LOG_RETENTION, ResourceSettings

RUNTIME = lambda_.Runtime.PYTHON_3_13
POWERTOOLS_LAYER = "AWSLambdaPowertoolsPythonV3-python313-x86_64"
POWERTOOLS_ACCOUNT = "017000801446"  # AWS's publisher account of the Powertools layers
METRICS_NAMESPACE = "FanOutKit"
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "**/tests"]


def removal_policy(settings: ResourceSettings) -> RemovalPolicy:
    return RemovalPolicy.RETAIN if settings.retain_data else RemovalPolicy.DESTROY


def retention(settings: ResourceSettings) -> logs.RetentionDays:
    """(ResourceSettings checked the days against the same list.)"""
    return getattr(logs.RetentionDays, LOG_RETENTION[settings.log_retention_days])


class KitFunction(Construct):
    """A Lambda function with its own log group (retention per environment), its own role that
    may write only to that log group, X-Ray active tracing and the Powertools layer."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: ResourceSettings,
        handler: str,
        description: str,
        service: str,
        environment: dict[str, str] | None = None,
        timeout_seconds: int | None = None,
        memory_mb: int = 256,
        reserved_concurrency: int | None = None,
        code: lambda_.Code | None = None,
    ) -> None:
        """``code``: the function's code asset (default: the kit's asset of ``handler``'s module,
        ``fanout_kit.shared.assets.kit_asset_dir``)."""
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(settings), removal_policy=removal_policy(settings)
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"{service}: writes its own logs and traces only",
        )
        self.log_group.grant_write(self.role)
        stack = Stack.of(self)
        layer = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "Powertools",
            f"arn:{stack.partition}:lambda:{stack.region}:{POWERTOOLS_ACCOUNT}:layer:"
            f"{POWERTOOLS_LAYER}:{settings.powertools_layer_version}",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            architecture=lambda_.Architecture.X86_64,
            handler=handler,
            code=code or lambda_.Code.from_asset(str(kit_asset_dir(handler.rpartition(".")[0]))),
            memory_size=memory_mb,
            timeout=Duration.seconds(timeout_seconds or settings.function_timeout_seconds),
            tracing=lambda_.Tracing.ACTIVE,
            role=self.role,
            log_group=self.log_group,
            layers=[layer],
            reserved_concurrent_executions=reserved_concurrency,
            environment={
                "POWERTOOLS_SERVICE_NAME": service,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                "POWERTOOLS_LOG_LEVEL": "INFO",
                "FANOUT_ENV": settings.environment_name,
                **(environment or {}),
            },
        )
        acknowledge_function(self.function, RUNTIME.name, POWERTOOLS_LAYER)

"""Python Lambda functions of the kit, all built the same way (one code asset: lambdas/)."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.config import ROOT, EnvironmentConfig
from stacks.nag_suppressions import acknowledge_function

RUNTIME = lambda_.Runtime.PYTHON_3_13
POWERTOOLS_LAYER = "AWSLambdaPowertoolsPythonV3-python313-x86_64"
POWERTOOLS_ACCOUNT = "017000801446"  # AWS's publisher account of the Powertools layers
METRICS_NAMESPACE = "FanOutKit"
ASSET_EXCLUDES = ["**/__pycache__", "**/*.pyc", "**/tests"]


def removal_policy(cfg: EnvironmentConfig) -> RemovalPolicy:
    return RemovalPolicy.RETAIN if cfg.retain_data else RemovalPolicy.DESTROY


# CloudWatch Logs accepts only these retention periods (days -> CDK enum member name).
_RETENTION = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS",
    30: "ONE_MONTH", 60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS",
    150: "FIVE_MONTHS", 180: "SIX_MONTHS", 365: "ONE_YEAR", 400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1827: "FIVE_YEARS", 3653: "TEN_YEARS",
}


def retention(cfg: EnvironmentConfig) -> logs.RetentionDays:
    try:
        return getattr(logs.RetentionDays, _RETENTION[cfg.log_retention_days])
    except KeyError:
        raise ValueError(
            f"{cfg.name}.logRetentionDays: {cfg.log_retention_days} is not a CloudWatch Logs "
            f"retention; use one of {sorted(_RETENTION)}"
        ) from None


class KitFunction(Construct):
    """A Lambda function with its own log group (retention per environment), its own role that
    may write only to that log group, X-Ray active tracing and the Powertools layer."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cfg: EnvironmentConfig,
        handler: str,
        description: str,
        service: str,
        environment: dict[str, str] | None = None,
        timeout_seconds: int | None = None,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(cfg), removal_policy=removal_policy(cfg)
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
            f"{POWERTOOLS_LAYER}:{cfg.powertools_layer_version}",
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            architecture=lambda_.Architecture.X86_64,
            handler=handler,
            code=lambda_.Code.from_asset(str(ROOT / "lambdas"), exclude=ASSET_EXCLUDES),
            memory_size=256,
            timeout=Duration.seconds(timeout_seconds or cfg.task_timeout_seconds),
            tracing=lambda_.Tracing.ACTIVE,
            role=self.role,
            log_group=self.log_group,
            layers=[layer],
            reserved_concurrent_executions=reserved_concurrency,
            environment={
                "POWERTOOLS_SERVICE_NAME": service,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                "POWERTOOLS_LOG_LEVEL": "INFO",
                "FANOUT_ENV": cfg.name,
                **(environment or {}),
            },
        )
        acknowledge_function(self.function, RUNTIME.name, POWERTOOLS_LAYER)

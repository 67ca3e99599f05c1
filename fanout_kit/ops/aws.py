"""AWS access of the ops CLI: sessions and clients (``--region``, ``--endpoint-url``), the
environment from cdk.json, the deployed stack's outputs, and errors turned into one clear line."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fanout_kit.shared.errors import CliError
from fanout_kit.shared.outputs import REQUIRED_OUTPUTS  # noqa: F401  (what each construct's add_outputs() emits)
from fanout_kit.shared.checks import ConfigError

if TYPE_CHECKING:
    from fanout_kit.shared.app_config import EnvironmentConfig


def kit_app_config() -> Any:
    """``fanout_kit.shared.app_config``, once an app folder (a cdk.json, from the current
    directory up) is found: the environments of its cdk.json. Without one, a command that needs it
    says to use --app."""
    from fanout_kit.shared import app_config as config

    if config.find_app_root() is None:
        raise CliError(
            "this command reads the kit repository's own app (cdk.json environments), which the "
            "installed kit does not include; for your own CDK app pass --app PATH (fanout run, "
            "ledger, iam-report)", code=2,
        ) from None
    return config


def stack_names(cfg: EnvironmentConfig) -> dict[str, str]:
    return kit_app_config().stack_names(cfg)

WORKFLOWS = ("parallel", "map")
REGION_PATTERN = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d$")
EXECUTION_ARN = re.compile(
    r"^arn:(?P<partition>aws[a-z-]*):states:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):execution:"
    r"(?P<state_machine>[^:]+):(?P<name>[^:]+)$"
)
CREDENTIAL_ERRORS = {
    "UnrecognizedClientException",
    "InvalidClientTokenId",
    "ExpiredToken",
    "ExpiredTokenException",
    "InvalidSignatureException",
    "SignatureDoesNotMatch",
    "RequestExpired",
}
ACCESS_ERRORS = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}
MISSING_RESOURCE_ERRORS = {
    "ResourceNotFoundException",
    "QueueDoesNotExist",
    "AWS.SimpleQueueService.NonExistentQueue",
    "StateMachineDoesNotExist",
}


# The CLI's own calls: a short connect timeout, a read timeout well above any call it makes (the
# slowest is a GetExecutionHistory page), and few retries, so an endpoint that accepts and never
# answers costs ~1 minute instead of botocore's 3 x 60 s, then one line (botocore defaults: 60 s
# each, legacy mode 5 attempts).
CONNECT_TIMEOUT_SECONDS = 5
READ_TIMEOUT_SECONDS = 20
MAX_ATTEMPTS = 3  # standard retry mode: the first call + 2 retries, for throttling and 5xx
# The region the current command's clients use, for error lines ("cannot reach AWS in eu-west-1").
current_region: ContextVar[str | None] = ContextVar("current_region", default=None)


def client_config() -> Any:
    from botocore.config import Config

    return Config(
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        read_timeout=READ_TIMEOUT_SECONDS,
        retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS},
    )


class OpsError(CliError):
    """An operator error: printed as one line (``fanout: ...``), exit code ``code``."""


def environment(name: str, context: Mapping[str, Any] | None = None) -> EnvironmentConfig:
    """The environment ``name`` of cdk.json; an unknown one is an OpsError listing the known."""
    config = kit_app_config()
    context = context if context is not None else config.read_cdk_context()
    known = config.environment_names(context)
    if name not in known:
        raise OpsError(
            f"unknown environment {name!r}: pass --env with one of: {', '.join(known) or '(none)'} "
            f"(cdk.json context.{config.ENVIRONMENTS_KEY})"
        )
    try:
        return config.load_environment(context, name)
    except ConfigError as exc:
        raise OpsError(f"cdk.json: {exc}") from None


def check_region(region: str, flag: str = "--region") -> str:
    if not isinstance(region, str) or not REGION_PATTERN.match(region):
        raise OpsError(f"{flag} {region!r}: not an AWS region; pass one such as eu-west-1")
    return region


def parse_execution_arn(arn: str) -> re.Match:
    match = EXECUTION_ARN.match(arn or "")
    if not match:
        raise OpsError(
            f"{arn!r} is not an execution ARN: pass the one `fanout start` printed "
            "(arn:aws:states:REGION:ACCOUNT:execution:STATE_MACHINE:NAME)"
        )
    return match


def console_url(region: str, execution_arn: str) -> str:
    return (
        f"https://{region}.console.aws.amazon.com/states/home?region={region}"
        f"#/v2/executions/details/{execution_arn}"
    )


class Aws:
    """A fresh boto3 session per command (credentials resolved now, not cached from earlier)."""

    def __init__(self, region: str, endpoint_url: str | None = None):
        import boto3

        self.region = check_region(region)
        self.endpoint_url = endpoint_url or None  # None: boto3 honours AWS_ENDPOINT_URL itself
        self.session = boto3.session.Session(region_name=self.region)
        self._clients: dict[str, Any] = {}
        current_region.set(self.region)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            kwargs: dict[str, Any] = {"region_name": self.region, "config": client_config()}
            if self.endpoint_url:
                kwargs["endpoint_url"] = self.endpoint_url
            self._clients[service] = self.session.client(service, **kwargs)
        return self._clients[service]


@dataclass
class Deployment:
    """One deployed workflow stack of an environment, by its CloudFormation outputs: what the ops
    CLI reads from DescribeStacks (``find_deployment``), and what the local engine resolves from the
    synthesized template's Outputs (``LocalEngine.deployment``); both build it with ``deployment_of``."""

    env: EnvironmentConfig | None  # None: an app without this kit's cdk.json (examples/external_app, locally)
    workflow: str
    stack_name: str
    region: str
    outputs: dict[str, str] = field(default_factory=dict)

    def output(self, key: str) -> str:
        """The output ``key``; in a stack where a construct other than "Default" called
        ``add_outputs()``, its ``<construct id><key><hash>`` (CDK's logical id of a nested output)."""
        if key in self.outputs:
            return self.outputs[key]
        nested = [k for k in self.outputs if re.fullmatch(rf"[A-Za-z0-9]+{key}[0-9A-F]{{8}}", k)]
        if len(nested) == 1:
            return self.outputs[nested[0]]
        if len(nested) > 1:
            raise OpsError(f"stack {self.stack_name} has several {key} outputs ({', '.join(sorted(nested))})")
        raise OpsError(
            f"stack {self.stack_name} in {self.region} has no output {key}: it was deployed by an "
            f"older version of the kit; run npx cdk deploy -c env={self.env.name if self.env else 'ENV'}"
        )

    @property
    def state_machine_arn(self) -> str:
        return self.output("StateMachineArn")

    @property
    def queue_url(self) -> str:
        return self.output("DeadLetterQueueUrl")

    @property
    def status_table(self) -> str:
        return self.output("StatusTableName")

    @property
    def batch_bucket(self) -> str:
        """The Map workflow's batch data bucket (manifests, result files)."""
        return self.output("BatchBucketName")

    @property
    def ledger_table(self) -> str:
        """The completion ledger stack's ledger table."""
        return self.output("LedgerTableName")


def deployment_of(
    cfg: EnvironmentConfig | None,
    workflow: str,
    region: str,
    outputs: Mapping[str, str],
    stack_name: str | None = None,
) -> Deployment:
    """The deployment of ``workflow`` of ``cfg`` in ``region``, from its stack's outputs
    (``stack_name``: another app's stack, where ``cfg`` is None)."""
    return Deployment(
        env=cfg, workflow=workflow, stack_name=stack_name or stack_names(cfg)[workflow], region=region,
        outputs=dict(outputs),
    )


def find_deployment(
    aws: Aws, cfg: EnvironmentConfig, workflow: str, *, missing_ok: bool = False
) -> Deployment | None:
    """The workflow's stack outputs; a stack that is not deployed is an OpsError naming the fix
    (or None with ``missing_ok``)."""
    from botocore.exceptions import ClientError

    name = stack_names(cfg)[workflow]
    try:
        stacks = aws.client("cloudformation").describe_stacks(StackName=name)["Stacks"]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") == "ValidationError" and "does not exist" in error.get("Message", ""):
            if missing_ok:
                return None
            hint = (
                f" (or drop --region: {cfg.name} deploys to {cfg.region})" if aws.region != cfg.region else ""
            )
            raise OpsError(
                f"stack {name} is not deployed in {aws.region}: run npx cdk deploy -c env={cfg.name}{hint}"
            ) from None
        raise
    stack = stacks[0]
    status = stack.get("StackStatus", "")
    if status.endswith("_FAILED") or status in ("ROLLBACK_COMPLETE", "DELETE_COMPLETE", "CREATE_IN_PROGRESS"):
        if missing_ok:
            return None
        raise OpsError(
            f"stack {name} in {aws.region} is {status}: fix and run npx cdk deploy -c env={cfg.name}"
        )
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    return deployment_of(cfg, workflow, aws.region, outputs)


@contextmanager
def clear_errors(region: str | None = None, endpoint_url: str | None = None) -> Iterator[None]:
    """Turn the usual AWS client failures into OpsError (one line naming the fix)."""
    from botocore.exceptions import (
        ClientError,
        ConnectionClosedError,
        ConnectTimeoutError,
        EndpointConnectionError,
        HTTPClientError,
        InvalidRegionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
        ReadTimeoutError,
        TokenRetrievalError,
    )
    from botocore.parsers import ResponseParserError

    def where() -> str:
        used = current_region.get() or region
        target = endpoint_url or "AWS"
        return f"{target} in {used}" if used else target

    fix = "check --region, --endpoint-url / AWS_ENDPOINT_URL and the network, then retry"
    try:
        yield
    except (NoCredentialsError, PartialCredentialsError) as exc:
        raise OpsError(
            f"no AWS credentials ({exc}): configure them (aws configure, or aws sso login and "
            "AWS_PROFILE=NAME, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) and retry"
        ) from None
    except TokenRetrievalError as exc:
        raise OpsError(f"AWS SSO token expired ({exc}): run aws sso login and retry") from None
    except (NoRegionError, InvalidRegionError) as exc:
        raise OpsError(f"no usable AWS region ({exc}): pass --region such as eu-west-1") from None
    except ConnectTimeoutError as exc:
        raise OpsError(
            f"cannot reach {where()}: no connection to {exc.kwargs.get('endpoint_url', '?')} within "
            f"{CONNECT_TIMEOUT_SECONDS}s ({MAX_ATTEMPTS} attempts): {fix}",
        ) from None
    except EndpointConnectionError as exc:
        raise OpsError(
            f"cannot reach {where()}: could not connect to {exc.kwargs.get('endpoint_url', '?')}: {fix}",
        ) from None
    except ReadTimeoutError as exc:
        raise OpsError(
            f"{where()} did not answer: {exc.kwargs.get('endpoint_url', '?')} accepted the connection "
            f"but sent no response within {READ_TIMEOUT_SECONDS}s ({MAX_ATTEMPTS} attempts): {fix}",
        ) from None
    except (ResponseParserError, KeyError, ValueError) as exc:
        if not isinstance(exc, ResponseParserError) and not _raised_in_botocore_parser(exc):
            raise
        raise OpsError(
            f"{where()} answered with something that is not an AWS API response (a proxy or another "
            f"HTTP server at that address?): {fix}",
        ) from None
    except (ConnectionClosedError, HTTPClientError) as exc:
        raise OpsError(f"connection to {where()} failed ({exc}): {fix}") from None
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "")
        operation = getattr(exc, "operation_name", "the call")
        if code in CREDENTIAL_ERRORS:
            raise OpsError(
                f"AWS rejected the credentials on {operation} ({code}: {error.get('Message', '')}): "
                "refresh them (aws sso login, or new keys) and retry"
            ) from None
        if code in ACCESS_ERRORS:
            raise OpsError(
                f"access denied on {operation} ({error.get('Message', '')}): use credentials whose "
                "role allows that call"
            ) from None
        if code in MISSING_RESOURCE_ERRORS:
            raise OpsError(
                f"{operation}: {error.get('Message', code)}: the stack outputs name a resource that does not "
                "exist (deleted by hand?): redeploy the stack (npx cdk deploy -c env=NAME)"
            ) from None
        raise OpsError(f"AWS error on {operation} ({code}): {error.get('Message', '')}", code=1) from None


def _raised_in_botocore_parser(exc: BaseException) -> bool:
    """botocore's response parsers fail on a non-AWS body with KeyError / ValueError as often as
    with ResponseParserError (an HTML page parsed as a Query response, for one)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and frames[-1].filename.replace("\\", "/").endswith("botocore/parsers.py")

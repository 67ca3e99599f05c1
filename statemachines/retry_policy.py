"""Retry policies as plain data: parsed from cdk.json, validated, and turned into ASL Retriers.

Every Retrier uses exponential backoff capped by MaxDelaySeconds, with FULL jitter (each wait is
drawn uniformly from 0..the backoff value), so that a burst of failing tasks does not retry in
lock-step against the same downstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from statemachines.checks import ConfigError, whole_number

# The Lambda service's own transient errors, as Step Functions names them: the invoke failed before
# (or instead of) running the function, so running it again is safe. The errors AWS's "Handle Lambda
# service exceptions" (Step Functions guide) tells to retry, plus the throttle.
LAMBDA_TRANSIENT_ERRORS = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.ClientExecutionTimeoutException",
)
# Ambiguous outcomes: the function ran, perhaps did its work (charged the card), and then timed out,
# ran out of memory or crashed. AWS: "Unhandled errors in Lambda are reported as Lambda.Unknown in the
# error output. These include out-of-memory errors and function timeouts" (same page); the Lambda
# runtime names them Sandbox.Timedout, Runtime.OutOfMemory and Runtime.ExitError; States.Timeout is the
# task state's own timeout (the function's + the margin). Retried only as the ``ambiguous`` setting
# says (default: never; at most MAX_AMBIGUOUS_ATTEMPTS), since a retry may do the work twice.
AMBIGUOUS_ERRORS = (
    "Lambda.Unknown",
    "Sandbox.Timedout",
    "Runtime.ExitError",
    "Runtime.OutOfMemory",
    "States.Timeout",
)
MAX_AMBIGUOUS_ATTEMPTS = 3
# The kit's own Lambda steps (input check, UpdateFinalStatus, ForwardFailedItems) are idempotent:
# they retry an ambiguous outcome like a transient error.
KIT_LAMBDA_RETRY_ERRORS = LAMBDA_TRANSIENT_ERRORS + AMBIGUOUS_ERRORS
SQS_TRANSIENT_ERRORS = ("SQS.SdkClientException", "SQS.AmazonSQSException", "States.Timeout")
# AWS SDK integrations name errors ServiceName.ErrorName, both PascalCase ("Sfn.ThrottlingException");
# Sfn.SfnException stands for the service's generic (5xx) errors.
SFN_TRANSIENT_ERRORS = ("Sfn.SfnException", "Sfn.ThrottlingException", "Sfn.SdkClientException", "States.Timeout")
DYNAMODB_TRANSIENT_ERRORS = (
    "DynamoDB.ProvisionedThroughputExceededException",
    "DynamoDB.ThrottlingException",
    "DynamoDB.RequestLimitExceeded",
    "DynamoDB.InternalServerErrorException",
    "DynamoDB.AmazonDynamoDBException",
    "DynamoDB.SdkClientException",
)

_FIELDS = {
    "intervalSeconds": "interval_seconds",
    "maxAttempts": "max_attempts",
    "backoffRate": "backoff_rate",
    "maxDelaySeconds": "max_delay_seconds",
}


RetryConfigError = ConfigError  # a retry setting is missing or out of range; the message names it


@dataclass(frozen=True)
class RetrySettings:
    interval_seconds: int
    max_attempts: int
    backoff_rate: float
    max_delay_seconds: int

    @classmethod
    def parse(cls, raw: Any, where: str, base: RetrySettings | None = None) -> RetrySettings:
        """Parse ``{"intervalSeconds": .., "maxAttempts": .., ...}``; fields missing from ``raw``
        come from ``base`` (an environment default overridden per task)."""
        if not isinstance(raw, Mapping):
            raise RetryConfigError(f"{where}: must be an object with {', '.join(_FIELDS)}")
        unknown = sorted(set(raw) - set(_FIELDS))
        if unknown:
            raise RetryConfigError(
                f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(_FIELDS)}"
            )
        values = {}
        for key, attr in _FIELDS.items():
            if key in raw:
                values[attr] = raw[key]
            elif base is not None:
                values[attr] = getattr(base, attr)
            else:
                raise RetryConfigError(f"{where}.{key}: missing")
        settings = cls(**values)
        settings._check(where)
        return settings

    def _check(self, where: str) -> None:
        def bad(field: str, rule: str, value: Any) -> RetryConfigError:
            return RetryConfigError(f"{where}.{field}: {rule}, got {value!r}")

        whole_number(self.interval_seconds, f"{where}.intervalSeconds", 1)
        whole_number(self.max_attempts, f"{where}.maxAttempts", 0, 99_999_999)
        whole_number(self.max_delay_seconds, f"{where}.maxDelaySeconds", 1)
        if not isinstance(self.backoff_rate, (int, float)) or self.backoff_rate < 1.0:
            raise bad("backoffRate", "must be a number >= 1.0", self.backoff_rate)
        if self.max_delay_seconds < self.interval_seconds:
            raise bad("maxDelaySeconds", "must be >= intervalSeconds", self.max_delay_seconds)

    def check_ambiguous(self, where: str) -> None:
        """An ``ambiguous`` policy retries a task that may have done its work: a few times at most."""
        if self.max_attempts > MAX_AMBIGUOUS_ATTEMPTS:
            raise RetryConfigError(
                f"{where}.maxAttempts: at most {MAX_AMBIGUOUS_ATTEMPTS} (a timed-out, out-of-memory or "
                f"crashed task may have done its work: retry it only if it is idempotent), got {self.max_attempts!r}"
            )

    def with_overrides(self, raw: Any, where: str) -> RetrySettings:
        return RetrySettings.parse(raw, where, base=self)

    def backoff_ceilings(self) -> list[float]:
        """Upper bound of each wait before retry 1..max_attempts (full jitter draws 0..bound)."""
        return [
            min(self.interval_seconds * self.backoff_rate**n, float(self.max_delay_seconds))
            for n in range(self.max_attempts)
        ]

    def worst_case_wait_seconds(self) -> float:
        return sum(self.backoff_ceilings())

    def to_asl(self, errors: tuple[str, ...] | list[str]) -> dict[str, Any]:
        """The ASL Retrier this policy stands for (what CDK must synthesize)."""
        return {
            "ErrorEquals": list(errors),
            "IntervalSeconds": self.interval_seconds,
            "MaxAttempts": self.max_attempts,
            "BackoffRate": self.backoff_rate,
            "MaxDelaySeconds": self.max_delay_seconds,
            "JitterStrategy": "FULL",
        }

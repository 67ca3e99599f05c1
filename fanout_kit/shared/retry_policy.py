"""Retry policies as plain data: parsed from cdk.json, validated, and turned into ASL Retriers.

Every Retrier uses exponential backoff capped by MaxDelaySeconds, with FULL jitter (each wait is
drawn uniformly from 0..the backoff value), so that a burst of failing tasks does not retry in
lock-step against the same downstream.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import re
from collections.abc import Sequence

from fanout_kit.shared.workflow_errors import ITEMS_DEAD_LETTERED
from fanout_runtime.errors import KIT_ERROR_NAMES
from fanout_kit.shared.checks import ConfigError, whole_number

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

# An error name as Step Functions matches it: the function's errorType, i.e. the exception's class
# name (Python), its name (Node.js) or its qualified class name (Java: com.example.SomeException).
ERROR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
MAX_ERROR_NAME = 256
# The kit's own: its error classes, the Map child's and the workflows' Fail states' errors.
RESERVED_ERROR_NAMES = (*KIT_ERROR_NAMES, ITEMS_DEAD_LETTERED, "DeadLetterSendFailed", "BatchFailed", "ItemsFailed")
# Step Functions' own (States.ALL, States.Timeout...), the Lambda service's and runtime's errors (the
# transient and ambiguous policies decide those) are not a task's to name.
RESERVED_ERROR_PREFIXES = ("States.", "Lambda.", "Sandbox.", "Runtime.")


def check_error_names(retry_on: object, never_retry: object, where: str,
                      names: tuple[str, str] = ("retry_on", "never_retry")) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A task's own error names: ``retry_on`` (retried with its retryable policy, as
    RetryableTaskError) and ``never_retry`` (dead-lettered at once, as NonRetryableTaskError).
    Each a list of well-formed, distinct names, in one list only, none of the kit's own.
    ``names``: how the two settings are called where they come from (props or cdk.json)."""
    checked = []
    for prop, value in zip(names, (retry_on, never_retry)):
        at = f"{where}.{prop}"
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise ConfigError(f"{at}: must be a list of error names (exception class names), got {value!r}")
        seen: set[str] = set()
        for name in value:
            if not isinstance(name, str) or len(name) > MAX_ERROR_NAME or not ERROR_NAME.match(name):
                raise ConfigError(
                    f"{at}: {name!r} is not an error name; use the exception's class name as the "
                    "function reports it (errorType), e.g. ThrottlingException"
                )
            if name in RESERVED_ERROR_NAMES or name.startswith(RESERVED_ERROR_PREFIXES):
                raise ConfigError(
                    f"{at}: {name} is the kit's or Step Functions' own error name (reserved: "
                    f"{', '.join(RESERVED_ERROR_NAMES)}, {', '.join(p + '*' for p in RESERVED_ERROR_PREFIXES)}); "
                    "name your function's own errors"
                )
            if name in seen:
                raise ConfigError(f"{at}: {name} is listed twice")
            seen.add(name)
        checked.append(tuple(value))
    both = sorted(set(checked[0]) & set(checked[1]))
    if both:
        raise ConfigError(f"{where}: {', '.join(both)} in both {names[0]} and {names[1]}; keep each name in one list")
    return checked[0], checked[1]


_FIELDS = {
    "intervalSeconds": "interval_seconds",
    "maxAttempts": "max_attempts",
    "backoffRate": "backoff_rate",
    "maxDelaySeconds": "max_delay_seconds",
}


RetryConfigError = ConfigError  # a retry setting is missing or out of range; the message names it


@dataclass(frozen=True)
class RetrySettings:
    """One Retry rule: exponential backoff with full jitter (``JitterStrategy: FULL``).

    Args:
        interval_seconds: The wait before the first retry (at least 1). Required.
        max_attempts: Retries after the first attempt (0: none). Required.
        backoff_rate: The factor each wait grows by (at least 1.0). Required.
        max_delay_seconds: The cap of any wait (at least ``interval_seconds``). Required.
    """

    interval_seconds: int
    max_attempts: int
    backoff_rate: float
    max_delay_seconds: int

    @classmethod
    def _parse(cls, raw: Any, where: str, base: RetrySettings | None = None) -> RetrySettings:
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

    def _check_ambiguous(self, where: str) -> None:
        """An ``ambiguous`` policy retries a task that may have done its work: a few times at most."""
        if self.max_attempts > MAX_AMBIGUOUS_ATTEMPTS:
            raise RetryConfigError(
                f"{where}.maxAttempts: at most {MAX_AMBIGUOUS_ATTEMPTS} (a timed-out, out-of-memory or "
                f"crashed task may have done its work: retry it only if it is idempotent), got {self.max_attempts!r}"
            )

    def _with_overrides(self, raw: Any, where: str) -> RetrySettings:
        return RetrySettings._parse(raw, where, base=self)

    def backoff_ceilings(self) -> list[float]:
        """Upper bound of each wait before retry 1..max_attempts (full jitter draws 0..bound)."""
        return [
            min(self.interval_seconds * self.backoff_rate**n, float(self.max_delay_seconds))
            for n in range(self.max_attempts)
        ]

    def worst_case_wait_seconds(self) -> float:
        return sum(self.backoff_ceilings())

    def _to_asl(self, errors: tuple[str, ...] | list[str]) -> dict[str, Any]:
        """The ASL Retrier this policy stands for (what CDK must synthesize)."""
        return {
            "ErrorEquals": list(errors),
            "IntervalSeconds": self.interval_seconds,
            "MaxAttempts": self.max_attempts,
            "BackoffRate": self.backoff_rate,
            "MaxDelaySeconds": self.max_delay_seconds,
            "JitterStrategy": "FULL",
        }

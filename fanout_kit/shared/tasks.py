"""``FanOutTask``: one of your functions as a workflow's task, and its checks (``workflow_tasks``),
shared by the patterns that run tasks (the Parallel workflow's tasks, the Distributed Map's worker)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import aws_lambda as lambda_

from fanout_kit.shared.checks import ConfigError
from fanout_kit.shared.retry_policy import RetrySettings, check_error_names
from fanout_kit.shared.settings import TASK_NAME, WorkflowRetries, check_type
from fanout_kit.shared.states import WorkflowTask


@dataclass(frozen=True)
class FanOutTask:
    """One child task: your function, invoked with ``{batchId, task, input, attempt, executionArn}``
    (``input`` is the execution input's ``tasks.<name>``; ``fanout_runtime.events``). Any exception
    not named in a Retry rule is not retried (it is dead-lettered).

    Args:
        name: The task's name: PascalCase letters and digits, at most 40 (part of state names and
            a key of the execution input). Required.
        function: Your Lambda function (``IFunction``). Required.
        description: What the task does, in the state's comment. Default ``""``.
        transient: This task's Retry rule for Lambda service errors. Default ``None``: the
            workflow's ``retries.transient``.
        retryable: This task's Retry rule for ``RetryableTaskError`` and ``retry_on``. Default
            ``None``: the workflow's ``retries.retryable``.
        ambiguous: This task's Retry rule for timeouts, out-of-memory and crashes. Default
            ``None``: the workflow's ``retries.ambiguous``.
        retry_on: Exception names (as your function reports them, e.g. a library's
            ``ThrottlingException``) retried with the ``retryable`` rule, like
            ``RetryableTaskError``, without wrapping them. Default ``()``.
        never_retry: Exception names dead-lettered at once, like ``NonRetryableTaskError``; the
            first Retry rule states them, so they hold against any later rule. Default ``()``.
    """

    name: str
    function: lambda_.IFunction
    description: str = ""
    transient: RetrySettings | None = None
    retryable: RetrySettings | None = None
    ambiguous: RetrySettings | None = None
    retry_on: Sequence[str] = ()
    never_retry: Sequence[str] = ()


def workflow_tasks(tasks: Sequence[FanOutTask], retries: WorkflowRetries, prop: str = "tasks") -> list[WorkflowTask]:
    """The tasks as the workflow builder takes them, checked; errors name ``prop[i].field``."""
    if isinstance(tasks, (str, bytes)) or not isinstance(tasks, Sequence) or not tasks:
        raise ConfigError(f"{prop}: must be a non-empty list of FanOutTask")
    seen: set[str] = set()
    result = []
    for i, task in enumerate(tasks):
        where = f"{prop}[{i}]"
        if not isinstance(task, FanOutTask):
            raise ConfigError(f"{where}: must be a FanOutTask(name, function, ...), got {type(task).__name__}")
        if not isinstance(task.name, str) or not TASK_NAME.match(task.name):
            raise ConfigError(f"{where}.name: must be PascalCase letters/digits, at most 40, got {task.name!r}")
        if task.name in seen:
            raise ConfigError(f"{where}.name: {task.name} is used twice")
        seen.add(task.name)
        if not all(hasattr(task.function, a) for a in ("function_arn", "grant_invoke")):  # IFunction (a jsii protocol)
            raise ConfigError(f"{where}.function: must be a Lambda function (IFunction), got {task.function!r}")
        for kind in ("transient", "retryable", "ambiguous"):
            value = getattr(task, kind)
            check_type(f"{where}.{kind}", value, RetrySettings, none_means=f"the workflow's retries.{kind}")
            if value is not None:
                value._check(f"{where}.{kind}")
                if kind == "ambiguous":
                    value._check_ambiguous(f"{where}.ambiguous")
        retry_on, never_retry = check_error_names(task.retry_on, task.never_retry, where)
        result.append(
            WorkflowTask(
                name=task.name,
                function=task.function,
                description=task.description or task.name,
                transient=task.transient or retries.transient,
                retryable=task.retryable or retries.retryable,
                ambiguous=task.ambiguous or retries.ambiguous,
                retry_on=retry_on,
                never_retry=never_retry,
            )
        )
    return result

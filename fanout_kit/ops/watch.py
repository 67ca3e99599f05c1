"""``fanout watch`` / ``fanout status``: progress of an execution of a deployed workflow, then
its final status record.

Parallel workflow: per-task status from DescribeExecution + GetExecutionHistory (the same
``ProgressTracker`` as the local demo). Map workflow: the Distributed Map run's item counts (DescribeMapRun), the numbers the workflow
itself decides on.
"""

from __future__ import annotations

import json
from typing import Any

from fanout_kit.local.history import (
    ProgressTracker,
)
from fanout_kit.ops.aws import (
    WORKFLOWS,
    Aws,
    Deployment,
    OpsError,
    environment,
    find_deployment,
    kit_app_config,
)

FIRST_STATES = ("ValidateInput", "PrepareBatch")


def locate(aws: Aws, arn: str, env_name: str | None) -> tuple[Deployment, dict[str, Any]]:
    """The deployed workflow the execution belongs to (by its state machine ARN, matched against
    the stack outputs of ``env_name``, or of every environment of the ARN's region)."""
    from botocore.exceptions import ClientError

    sfn = aws.client("stepfunctions")
    try:
        described = sfn.describe_execution(executionArn=arn)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("ExecutionDoesNotExist", "InvalidArn"):
            raise OpsError(
                f"execution {arn} does not exist in {aws.region}: check the ARN (and --region)"
            ) from None
        raise
    candidates = [env_name] if env_name else kit_app_config().environment_names()
    for name in candidates:
        cfg = environment(name)
        if not env_name and cfg.region != aws.region:
            continue
        for workflow in WORKFLOWS:
            deployment = find_deployment(aws, cfg, workflow, missing_ok=True)
            if deployment and deployment.outputs.get("StateMachineArn") == described["stateMachineArn"]:
                return deployment, described
    where = f"environment {env_name}" if env_name else f"any environment of cdk.json in {aws.region}"
    raise OpsError(
        f"execution {arn} is not an execution of a workflow of {where} "
        f"(its state machine is {described['stateMachineArn']}): pass --env NAME"
    )


def history(sfn: Any, arn: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"executionArn": arn, "maxResults": 1000}
    while True:
        page = sfn.get_execution_history(**kwargs)
        events.extend(page["events"])
        if not page.get("nextToken"):
            return events
        kwargs["nextToken"] = page["nextToken"]


def batch_id_of(described: dict[str, Any], events: list[dict[str, Any]]) -> str | None:
    """The batch id the workflow settled on: its first state's output, else the input's, else
    the execution name (the documented default)."""
    for event in events:
        if event["type"] == "TaskStateExited":
            details = event["stateExitedEventDetails"]
            if details["name"] in FIRST_STATES:
                try:
                    found = json.loads(details.get("output") or "{}").get("batchId")
                except ValueError:
                    found = None
                if found:
                    return found
    try:
        given = json.loads(described.get("input") or "{}")
    except ValueError:
        given = {}
    if isinstance(given, dict) and isinstance(given.get("batchId"), str):
        return given["batchId"]
    return described.get("name")


COUNT_KEYS = ("total", "succeeded", "failed", "timedOut", "aborted", "running", "pending")


def map_run_counts(sfn: Any, arn: str) -> dict[str, int] | None:
    """Item counts of the execution's Distributed Map run(s), as Step Functions keeps them
    (DescribeMapRun ``itemCounts``): the numbers the workflow decides on. None before any run."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        runs = sfn.list_map_runs(executionArn=arn).get("mapRuns", [])
        totals: dict[str, int] = {}
        for run in runs:
            counts = sfn.describe_map_run(mapRunArn=run["mapRunArn"]).get("itemCounts", {})
            for key in COUNT_KEYS:
                totals[key] = totals.get(key, 0) + int(counts.get(key, 0))
        return totals or None
    except (ClientError, BotoCoreError, KeyError, TypeError, ValueError):
        return None


def counts_line(counts: dict[str, int]) -> str:
    return "map run items: " + ", ".join(f"{k}={counts.get(k, 0)}" for k in COUNT_KEYS[:5])


class Watcher:
    """Reads one execution's progress (``fanout_kit.cli.watch`` draws it)."""

    def __init__(self, aws: Aws, deployment: Deployment, described: dict[str, Any]):
        self.aws = aws
        self.deployment = deployment
        self.described = described
        self.arn = described["executionArn"]
        self.events: list[dict[str, Any]] = []
        self.tracker = ProgressTracker(list(deployment.env.task_names))
        self.batch_id: str | None = None
        self.map_run: dict[str, int] | None = None

    def poll(self) -> str:
        sfn = self.aws.client("stepfunctions")
        self.described = sfn.describe_execution(executionArn=self.arn)
        events = history(sfn, self.arn)
        for event in events[len(self.events) :]:
            self.tracker.feed(event)
        self.events = events
        self.batch_id = batch_id_of(self.described, events)
        if self.deployment.workflow == "map" and self.batch_id:
            self.map_run = map_run_counts(sfn, self.arn)
        return self.described["status"]

    def title(self) -> str:
        d = self.deployment
        return f"batch {self.batch_id or '?'} on {d.env.name} ({d.workflow}): {self.described['status']}"

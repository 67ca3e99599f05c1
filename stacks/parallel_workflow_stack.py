"""Stack: the Parallel fan-out workflow of one environment (ParallelFanOut, from cdk.json)."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct

from fanout_kit.patterns.parallel.construct import ParallelFanOut
from fanout_kit.shared.tasks import FanOutTask
from stacks.app_functions import app_function
from stacks.alarm_receivers import acknowledge_unsubscribed_alarms
from stacks.config import EnvironmentConfig, log_group_name


class ParallelWorkflowStack(Stack):
    """The configured tasks (cdk.json ``fanout:tasks``) as ParallelFanOut's tasks."""

    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        tasks = [
            FanOutTask(
                name=spec.name,
                function=app_function(self, f"Task{spec.name}", cfg, spec),
                description=spec.description,
                transient=spec.transient,
                retryable=spec.retryable,
                ambiguous=spec.ambiguous,
                retry_on=spec.retry_on,
                never_retry=spec.never_retry,
            )
            for spec in cfg.tasks
        ]
        # "Default": the construct's id is left out of its resources' logical ids, which stay
        # those of the stack before the construct existed (no replacement on deploy). CDK's
        # makeUniqueId (aws-cdk-lib core/lib/private/uniqueid.ts, HIDDEN_ID): "Resources with this
        # ID are complete hidden from the logical ID calculation"; the snapshots prove it here.
        self.fanout = ParallelFanOut(
            self,
            "Default",
            tasks=tasks,
            retries=cfg.retries,
            execution_timeout_minutes=cfg.execution_timeout_minutes,
            alarms=cfg.alarms,
            alarm_email_addresses=cfg.alarm_email_addresses,
            include_execution_data=cfg.include_execution_data,
            log_group_name=log_group_name(cfg, "parallel"),
            settings=cfg.resources,
        )
        self.fanout.add_outputs()
        acknowledge_unsubscribed_alarms(self, cfg)

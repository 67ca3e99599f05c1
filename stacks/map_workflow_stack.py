"""Stack: the Distributed Map fan-out workflow of one environment (DistributedMapFanOut, from
cdk.json), with the example worker of ``fanout:mapWorker``."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct

from fanout_kit.patterns.distributed_map.construct import DistributedMapFanOut
from fanout_kit.shared.tasks import FanOutTask
from stacks.app_functions import app_function
from stacks.alarm_receivers import acknowledge_unsubscribed_alarms
from stacks.config import ConfigError, EnvironmentConfig, log_group_name
from fanout_kit.patterns.distributed_map.express_budget import ExpressBudgetError


class MapWorkflowStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, cfg: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        spec = cfg.map_worker
        worker = app_function(
            self,
            "ProcessItem",
            cfg,
            spec,
            timeout_seconds=cfg.map_worker_timeout_seconds,
            reserved_concurrency=cfg.map.worker_reserved_concurrency,
        )
        try:
            # "Default": logical ids stay those of the stack before the construct existed.
            self.fanout = DistributedMapFanOut(
                self,
                "Default",
                worker=FanOutTask(spec.name, worker, spec.description, spec.transient, spec.retryable, spec.ambiguous,
                                  retry_on=spec.retry_on, never_retry=spec.never_retry),
                map=cfg.map,
                retries=cfg.map_retries,
                execution_timeout_minutes=cfg.execution_timeout_minutes,
                alarms=cfg.alarms,
                alarm_email_addresses=cfg.alarm_email_addresses,
                include_execution_data=cfg.include_execution_data,
                log_group_name=log_group_name(cfg, "map"),
                settings=cfg.resources,
            )
        except ExpressBudgetError as exc:  # name the cdk.json settings, not the construct's props
            where = f"context.fanout:environments.{cfg.name}.map"
            raise ConfigError(
                f"{exc.problem}; lower {where}.workerTimeoutSeconds or {where}.retry.(transient|retryable|dlqSend|ambiguous)"
                f".maxAttempts / maxDelaySeconds, or set {where}.childExecutionType to STANDARD"
            ) from None
        self.fanout.add_outputs()
        acknowledge_unsubscribed_alarms(self, cfg)

"""The Powertools Logger, Tracer and Metrics of every handler of the kit, created here and nowhere
else; handlers and shared modules import them (``from fanout_kit.shared.observability import logger``).

Configured by the environment each function gets from its construct (KitFunction):
POWERTOOLS_SERVICE_NAME (the function's name: the ``service`` key of every log line, the service
of the traces, the ``service`` dimension of metrics), POWERTOOLS_METRICS_NAMESPACE
("FanOutKit") and POWERTOOLS_LOG_LEVEL; locally (tests, the ``fanout`` CLI) also
POWERTOOLS_TRACE_DISABLED, POWERTOOLS_METRICS_DISABLED and POWERTOOLS_DEV.

* ``logger``: one Powertools Logger. Powertools Loggers of one service share one stdlib logger and
  its formatter, so every handler in a process writes the same JSON lines with the same keys
  (``batch_id``, ``task_id``, ``attempt``, ``child_id``, ...) as when each made its own.
* ``tracer``: one Powertools Tracer (it patches boto3 for X-Ray unless POWERTOOLS_TRACE_DISABLED).
* ``ledger_metrics``: the completion ledger functions' metrics, service = "CompletionLedger" for
  all of them, so one alarm covers them all (metric names in fanout_kit.shared.metric_names).
  Powertools Metrics objects share one metric set and default dimensions; each flushes with its
  own service dimension.
"""

from __future__ import annotations

import warnings

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricUnit

from .metric_names import METRICS_SERVICE

logger = Logger()
tracer = Tracer()
ledger_metrics = Metrics(service=METRICS_SERVICE)
# Most ledger invocations record children without deciding a batch, so they emit no metric;
# Powertools would warn about that on every one of them.
warnings.filterwarnings("ignore", message="No application metrics to publish")

__all__ = ["MetricUnit", "ledger_metrics", "logger", "tracer"]

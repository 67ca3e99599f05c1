"""Keep the in-process handlers' output out of a command's view: their Powertools logs, X-Ray and
EMF metric lines (the views show every failure from the execution history or the ledger). A value
the user set wins: ``POWERTOOLS_LOG_LEVEL=INFO fanout run ...`` shows the handlers' JSON lines as
Lambda would log them."""

from __future__ import annotations

import logging
import os
import sys


def quiet_env(level: str) -> dict[str, str]:
    return {
        "POWERTOOLS_LOG_LEVEL": level,
        "POWERTOOLS_TRACE_DISABLED": "true",  # no X-Ray daemon locally
        "POWERTOOLS_METRICS_DISABLED": "true",  # no EMF lines in the view
    }


def quiet_handler_logs(level: str = "CRITICAL") -> None:
    """Set the defaults before handler modules create their loggers, and apply the level to the
    Powertools loggers already configured: a Powertools Logger takes its level when its service's
    logger is first configured, and the CLI may have imported handler code before this ran."""
    for key, value in quiet_env(level).items():
        os.environ.setdefault(key, value)
    effective = os.environ["POWERTOOLS_LOG_LEVEL"]
    logging.getLogger("aws_lambda_powertools").setLevel(effective)
    if "aws_lambda_powertools" not in sys.modules:
        return  # no handler code loaded yet (and `fanout --help` need not load Powertools)
    from aws_lambda_powertools.logging.constants import LOGGER_ATTRIBUTE_PRECONFIGURED

    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger) and getattr(logger, LOGGER_ATTRIBUTE_PRECONFIGURED, False):
            logger.setLevel(effective)

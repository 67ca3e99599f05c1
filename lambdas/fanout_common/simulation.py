"""The fault switch of the example workers (pure: the CLI and the tests import it too).

A task's input (or a Map item) carrying ``{"simulateFailure": {"mode": MODE, "times": N}}`` fails
on purpose: ``fanout_common.worker.raise_simulated_failure`` reads it."""

SIMULATE_KEY = "simulateFailure"
MODES = ("transient", "permanent", "fatal", "hang")

"""The fault switch of the example workers (pure: the CLI and the tests import it too).

A task's input (or a Map item) carrying ``{"simulateFailure": {"mode": MODE, "times": N}}`` fails
on purpose: ``fanout_kit.common.worker.raise_simulated_failure`` reads it."""

SIMULATE_KEY = "simulateFailure"
MODES = ("transient", "permanent", "fatal", "timeout", "oom", "crash", "hang")
# The modes whose outcome is ambiguous (the function ran, then Lambda stopped it): AWS reports them
# as Lambda.Unknown, or by the runtime's names Sandbox.Timedout / Runtime.OutOfMemory /
# Runtime.ExitError. "hang" is the older name of "timeout".
AMBIGUOUS_MODES = ("timeout", "oom", "crash", "hang")

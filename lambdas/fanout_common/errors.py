"""Error types whose *class names* are the error names Step Functions sees.

The AWS Python runtime reports an unhandled exception as ``{"errorType": <class name>, ...}``, and
Step Functions matches ``Retry``/``Catch`` ``ErrorEquals`` against that name. The CDK app imports
this module (as ``fanout_common.errors``) so that the state machine's Retry rules and these
classes cannot drift apart.
"""


class FanOutError(Exception):
    """Base class; never raised directly."""


class RetryableTaskError(FanOutError):
    """A task failed for a reason that may go away: retried with backoff and jitter."""


class NonRetryableTaskError(FanOutError):
    """A task failed for a reason a retry cannot fix: no retry, straight to the dead-letter queue."""


class InvalidInput(FanOutError):
    """The execution input is malformed; the message names the field and the fix."""


class FinalStatusConflict(FanOutError):
    """A final-status write was refused because the batch already has a different verdict."""


RETRYABLE = RetryableTaskError.__name__
NON_RETRYABLE = NonRetryableTaskError.__name__
INVALID_INPUT = InvalidInput.__name__
FINAL_STATUS_CONFLICT = FinalStatusConflict.__name__

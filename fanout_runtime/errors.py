"""Error types whose *class names* are the error names Step Functions sees.

The AWS Python runtime reports an unhandled exception as ``{"errorType": <class name>, ...}``, and
Step Functions matches ``Retry``/``Catch`` ``ErrorEquals`` against that name. The CDK app imports
this module (as ``fanout_runtime.errors``, its one name) so that the state machine's Retry rules and
these classes cannot drift apart; your functions import the same module from the kit's runtime
layer (or the wheel, locally):

* ``RetryableTaskError``: retried with the task's ``retryable`` policy (backoff, full jitter), then
  dead-lettered when the attempts are exhausted;
* ``NonRetryableTaskError``: never retried, dead-lettered at once;
* any other exception: dead-lettered at once, unless the task names it in ``retry_on`` (retried
  with the ``retryable`` policy). ``never_retry`` states it explicitly.

A class of your own with one of these names works the same (only the name reaches Step Functions).
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

# Error names the kit's workflows raise or match themselves: a task cannot claim them in its
# retry_on / never_retry lists.
KIT_ERROR_NAMES = (FanOutError.__name__, RETRYABLE, NON_RETRYABLE, INVALID_INPUT, FINAL_STATUS_CONFLICT)

"""A batch's results, item by item: the Python API of ``fanout results``, in one import.

    from fanout_kit.ops.results import AwsSource, Target, open_batch

    batch = open_batch(AwsSource(boto3_client), [Target("map", "FinalStatus...", batch_bucket="...")], "B")
    for outcome in batch.outcomes(failed_only=True):   # fanout_kit.ops.outcomes.Outcome
        print(outcome.index, outcome.status, outcome.error)

Where the outcomes come from: ``fanout_kit.ops.result_sources`` (a deployed stack, ``AwsSource``,
or a batch saved locally, ``LocalSource``), how each pattern's are read:
``fanout_kit.ops.result_readers`` (``open_batch``), and how they are written as a table, JSON or
CSV: ``fanout_kit.ops.result_formats``. The command (``fanout results``) is
``fanout_kit.cli.results``.
"""

from __future__ import annotations

from fanout_kit.ops.result_formats import summary_line, write_outcomes
from fanout_kit.ops.result_readers import (
    BatchResults,
    ledger_outcomes,
    map_outcomes,
    open_batch,
    open_local_batch,
    parallel_outcomes,
    save_local_batch,
)
from fanout_kit.ops.result_sources import (
    FORMATS,
    WORKFLOWS,
    AwsSource,
    LocalSource,
    ResultsError,
    Target,
    batch_folder,
    local_state_dir,
    target_of,
)

__all__ = [
    "FORMATS",
    "WORKFLOWS",
    "AwsSource",
    "BatchResults",
    "LocalSource",
    "ResultsError",
    "Target",
    "batch_folder",
    "ledger_outcomes",
    "local_state_dir",
    "map_outcomes",
    "open_batch",
    "open_local_batch",
    "parallel_outcomes",
    "save_local_batch",
    "summary_line",
    "target_of",
    "write_outcomes",
]

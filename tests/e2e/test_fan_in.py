"""The fan-in fails closed (issue 19 §1): SUCCEEDED only with positive evidence for every item or
task, on the local engine with the real handlers.

Map: the map run's ``succeeded`` >= PrepareBatch's count - the failure threshold, nothing pending or
running, and the map run's ``total`` == PrepareBatch's count; the ItemReader reads the manifest version
PrepareBatch validated. Counts that are not final are read again (1, 2, 4, 8, 16 s), then the batch is
not confirmed: AWS documents no consistency guarantee for DescribeMapRun right after the Map state
ends (API reference: DescribeMapRun, MapRunItemCounts; Developer Guide: "Examining Map Run"), so
the engine's ``map_run_view`` answers the state machine's reads as AWS might.

Parallel: a SUCCEEDED marker from every configured task (SKIPPED only in a redrive).
"""

import json

import pytest

from fanout_kit.local.history import states_entered, task_attempts
from tests.e2e.test_map_workflow import deployed, items, run, worker_calls


@pytest.fixture
def map_engine(dev_app):
    with deployed(dev_app) as local:
        yield local

ROWS = 20


def csv_manifest(rows):
    return b"imageId,width\n" + b"".join(f"img-{i},{i}\n".encode() for i in range(rows))


def map_run_reads(history):
    """The DescribeMapRun reads, in order (each read state scheduled once: no transient error)."""
    attempts = task_attempts(history)
    reads = [name for name in states_entered(history) if name.startswith("ReadMapRun ")]
    assert all(attempts[name] == 1 for name in reads)
    return reads


def processed_indexes(engine):
    return sorted(item["index"] for call in worker_calls(engine) for item in call.event["items"])


def test_a_manifest_replaced_after_prepare_batch_counted_it_runs_the_version_it_counted(map_engine):
    """Seen with the old code, no fault injected: PrepareBatch counted 20 rows, the manifest was
    replaced by 19 rows before the ItemReader read it, and the batch finalized SUCCEEDED with item
    19 never run. Now the ItemReader reads the version PrepareBatch counted."""
    manifest = map_engine.upload_manifest("manifests/replaced.csv", csv_manifest(ROWS))
    prepare = map_engine.function_id("PrepareBatch", "map")

    def replace_after_prepare(function, event, result):
        if function == prepare:
            map_engine.upload_manifest("manifests/replaced.csv", csv_manifest(ROWS - 1))

    map_engine.router.after_invoke = replace_after_prepare
    result = run(map_engine, "m-replaced", manifest=manifest)
    assert result.output["manifest"]["versionId"]  # PrepareBatch pinned the version it read
    counts = map_engine.map_run_counts(result.arn)
    assert (counts["total"], counts["succeeded"]) == (ROWS, ROWS)
    assert processed_indexes(map_engine) == list(range(ROWS))
    assert result.status == "SUCCEEDED"


def test_a_pinned_manifest_version_that_is_gone_confirms_nothing(map_engine):
    """The version PrepareBatch checked is deleted before the ItemReader reads it: the map run fails
    as a whole and no item is confirmed (BatchNotConfirmed, recorded FAILED)."""
    manifest = map_engine.upload_manifest("manifests/vanishing.json", json.dumps(items(4)).encode())
    prepare = map_engine.function_id("PrepareBatch", "map")
    s3 = map_engine.client("s3")

    def delete_the_version(function, event, result):
        if function == prepare:
            version = result["manifest"]["versionId"]
            s3.delete_object(Bucket=manifest["bucket"], Key=manifest["key"], VersionId=version)

    map_engine.router.after_invoke = delete_the_version
    result = run(map_engine, "m-reader", manifest=manifest)
    assert result.status == "FAILED" and result.error == "BatchNotConfirmed"
    assert "none of the 4 items PrepareBatch counted is confirmed" in result.cause
    assert "MapRunNotConfirmed" in states_entered(result.history)
    record = map_engine.status_record("m-reader", "map")
    assert (record["status"], record["failedItems"], record["totalItems"], record["resultsKey"]) == ("FAILED", 4, 4, "")
    assert record["failureError"].startswith("States.")


def _running(reads_not_final, still_running=1):
    """A DescribeMapRun view: the first ``reads_not_final`` reads show ``still_running`` items as
    running (not yet succeeded)."""

    def view(read, counts):
        if read <= reads_not_final:
            return {**counts, "succeeded": counts["succeeded"] - still_running, "running": still_running}
        return counts

    return view


def test_counts_not_final_are_read_again_until_they_are(map_engine):
    map_engine.map_run_view = _running(reads_not_final=2)
    result = run(map_engine, "m-settling", items=items(6))
    assert result.status == "SUCCEEDED"
    assert map_run_reads(result.history) == ["ReadMapRun 1", "ReadMapRun 2", "ReadMapRun 3"]
    assert map_engine.retry_clock.state_waits == [1, 2]  # backoff before each re-read
    assert map_engine.status_record("m-settling", "map")["status"] == "SUCCEEDED"


def test_counts_never_final_confirm_nothing(map_engine):
    """The old code finalized here: 5 of 6 succeeded, 1 still running, 0 failed."""
    map_engine.map_run_view = _running(reads_not_final=100)
    result = run(map_engine, "m-unsettled", items=items(6))
    assert result.status == "FAILED" and result.error == "BatchNotConfirmed"
    assert map_run_reads(result.history) == [f"ReadMapRun {n}" for n in range(1, 7)]  # the first and 5 re-reads
    assert map_engine.retry_clock.state_waits == [1, 2, 4, 8, 16]  # 31 s in all, then no verdict
    assert result.cause == (
        "the counts of the map run were not final after 6 reads over 31 s (5 succeeded, 0 pending, 1 running of "
        "the 6 items it counted; PrepareBatch counted 6): the batch is not confirmed; redrive it"
    )
    map_engine.map_run_view = None
    record = map_engine.status_record("m-unsettled", "map")
    assert (record["status"], record["failureError"], record["failedItems"], record["totalItems"]) == (
        "FAILED", "BatchNotConfirmed", 6, 6)
    assert "UpdateFinalStatus" not in states_entered(result.history)


def test_a_map_run_total_other_than_prepare_batch_s_count_confirms_nothing(map_engine):
    """The map run ran 19 items, all succeeded, PrepareBatch counted 20: the old code finalized."""

    def one_item_missing(read, counts):
        return {**counts, "total": counts["total"] - 1, "succeeded": counts["succeeded"] - 1}

    map_engine.map_run_view = one_item_missing
    result = run(map_engine, "m-short", items=items(ROWS))
    assert result.status == "FAILED" and result.error == "BatchNotConfirmed"
    assert result.cause.startswith(f"the map run counted {ROWS - 1} items ({ROWS - 1} succeeded), PrepareBatch counted {ROWS} in s3://")
    assert "TotalMismatch" in states_entered(result.history)
    assert map_engine.status_record("m-short", "map")["status"] == "FAILED"


def test_an_unversioned_manifest_is_refused_before_any_child_runs(map_engine):
    """Versioning suspended on the bucket: a new upload is the "null" version, which a later upload
    replaces; nothing can pin it. PrepareBatch names the problem."""
    s3 = map_engine.client("s3")
    bucket = map_engine.bucket_name()
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
    manifest = map_engine.upload_manifest("manifests/unpinned.json", json.dumps(items(3)).encode())
    result = run(map_engine, "m-unversioned", manifest=manifest)
    assert result.status == "FAILED" and result.error == "InvalidManifest"
    message = json.loads(result.cause)["errorMessage"]
    assert message == (
        f"manifest s3://{bucket}/manifests/unpinned.json: has no version id: the workflow "
        f"pins the manifest it checked by its version, so s3://{bucket} must have versioning enabled"
    )
    assert worker_calls(map_engine) == []


# ------------------------------------------------------------------------------------- Parallel
def _with_branch_end(engine, task, change):
    """Deploy the Parallel workflow again with ``change(result_selector)`` applied to the marker
    that task's successful run leaves (a branch whose marker is lost or wrong)."""
    arn = engine.state_machine_arn("parallel")
    definition = json.loads(engine.sfn.describe_state_machine(stateMachineArn=arn)["definition"])
    (parallel,) = [s for s in definition["States"].values() if s["Type"] == "Parallel"]
    for branch in parallel["Branches"]:
        if f"Run {task}" in branch["States"]:
            change(branch["States"][f"Run {task}"]["ResultSelector"])
    engine.sfn.update_state_machine(stateMachineArn=arn, definition=json.dumps(definition))


def test_a_task_without_a_marker_is_not_confirmed_and_named(engine, batch):
    """The old code failed with States.Runtime (a missing path in AllTasksSucceeded?), no record."""
    _with_branch_end(engine, "NotifyCustomer", lambda selector: selector.pop("status"))
    result = engine.run("parallel", batch("lost-marker"))
    assert result.status == "FAILED" and result.error == "BatchNotConfirmed"
    assert result.cause.startswith("task NotifyCustomer left no SUCCEEDED or FAILED marker")
    assert "UpdateFinalStatus" not in states_entered(result.history)
    record = engine.status_record("lost-marker")
    assert record["status"] == "FAILED" and record["failedTasks"] == ["NotifyCustomer"]


def test_skipped_outside_a_redrive_is_not_confirmed(engine, batch):
    """The old code finalized SUCCEEDED with a task SKIPPED in a first run."""
    _with_branch_end(engine, "ChargePayment", lambda selector: selector.update(status="SKIPPED"))
    result = engine.run("parallel", batch("skipped"))
    assert result.status == "FAILED" and result.error == "BatchNotConfirmed"
    assert "task ChargePayment" in result.cause
    assert engine.status_record("skipped")["failedTasks"] == ["ChargePayment"]

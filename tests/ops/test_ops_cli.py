"""The ops CLI (start, watch/status, dlq list, dlq redrive) end to end against a moto server over
HTTP, with the synthesized dev workflow and the real handlers. Assertions on the server's state
(executions, status table, DLQ), not only on what is printed."""

from __future__ import annotations

import json
import re

import pytest

import fanout_kit.ops.dlq as dlq_module
import fanout_kit.ops.redrive as redrive_module
from tests.ops.conftest import EXAMPLE

ARN = re.compile(r"^\s*execution: (arn:aws:states:\S+)$", re.M)


def started_arn(run) -> str:
    (arn,) = ARN.findall(run.out)
    return arn


def executions(dep) -> dict[str, dict]:
    listed = dep.sfn.list_executions(stateMachineArn=dep.engine.state_machine_arn())["executions"]
    return {e["name"]: e for e in listed}


def execution_input(dep, arn: str) -> dict:
    return json.loads(dep.sfn.describe_execution(executionArn=arn)["input"])


def watch(cli, arn: str):
    return cli("watch", arn, "--interval", "0.02")


# ------------------------------------------------------------------------------ happy path
def test_start_then_watch_succeeds(cli, deployment, batch_file):
    run = cli("start", "--env", "dev", batch_file("ok-1"))
    assert run.code == 0, run.err
    arn = started_arn(run)
    assert arn.startswith(deployment.engine.state_machine_arn().replace(":stateMachine:", ":execution:"))
    assert (
        f"https://eu-west-1.console.aws.amazon.com/states/home?region=eu-west-1#/v2/executions/details/{arn}"
        in run.out
    )
    assert execution_input(deployment, arn)["batchId"] == "ok-1"

    watched = watch(cli, arn)
    assert watched.code == 0, watched.err
    assert "execution SUCCEEDED" in watched.out and "done 3 / failed 0 / total 3" in watched.out
    record = deployment.engine.status_record("ok-1")
    assert (record["status"], record["finalizedBy"]) == ("SUCCEEDED", arn)
    assert f'"finalizedBy": "{arn}"' in watched.out  # the final status record, as stored

    status = cli("status", arn)
    assert status.code == 0 and "execution SUCCEEDED" in status.out


def test_start_reads_stdin_and_takes_a_name(cli, deployment, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"tasks": EXAMPLE["tasks"]})))
    run = cli("start", "-", "--name", "from-stdin")
    assert run.code == 0, run.err
    assert "batch:     from-stdin" in run.out  # batchId defaults to the execution name
    assert "from-stdin" in executions(deployment)
    assert watch(cli, started_arn(run)).code == 0
    assert deployment.engine.status_record("from-stdin")["status"] == "SUCCEEDED"


def test_status_once_of_a_failed_execution_exits_1(cli, deployment, batch_file):
    run = cli("start", batch_file("st-1", ChargePayment={"mode": "fatal"}))
    arn = started_arn(run)
    assert watch(cli, arn).code == 1
    status = cli("status", arn)
    assert status.code == 1 and "execution FAILED" in status.out and "BatchFailed" in status.out


# ------------------------------------------------------------------ DLQ and redrive
def test_failed_task_is_listed_then_redriven_to_success(cli, deployment, batch_file, fix_downstream):
    engine = deployment.engine
    run = cli("start", batch_file("order-7", NotifyCustomer={"mode": "permanent"}))
    failed_arn = started_arn(run)

    watched = watch(cli, failed_arn)
    assert watched.code == 1
    assert "execution FAILED" in watched.out and "dead-lettered" in watched.out
    assert "done 2 / failed 1 / total 3" in watched.out
    record = engine.status_record("order-7")
    assert (record["status"], record["failedTasks"], record["executionArn"]) == (
        "FAILED",
        ["NotifyCustomer"],
        failed_arn,
    )

    listed = cli("dlq", "list", "--env", "dev")
    assert listed.code == 0, listed.err
    assert "batch=order-7 task=NotifyCustomer error=RetryableTaskError" in listed.out
    assert "cause:     simulated permanent failure of NotifyCustomer (attempt 4)" in listed.out
    assert f"execution: {failed_arn}" in listed.out
    (message,) = engine.dlq_messages()  # still there, and visible again at once
    assert message["executionArn"] == failed_arn

    fix_downstream()
    redriven = cli("dlq", "redrive", "--env", "dev", "--batch", "order-7")
    assert redriven.code == 0, redriven.err
    assert engine.dlq_messages() == []
    (name,) = [n for n in executions(deployment) if n.startswith("redrive-")]
    redrive_arn = executions(deployment)[name]["executionArn"]
    assert f"started redrive execution {redrive_arn}" in redriven.out
    assert execution_input(deployment, redrive_arn) == {
        "batchId": "order-7",
        "tasks": {"NotifyCustomer": message["input"]},
        "redriveOf": failed_arn,
    }

    after = watch(cli, redrive_arn)
    assert after.code == 0, after.out
    assert "execution SUCCEEDED" in after.out and "skipped" in after.out
    record = engine.status_record("order-7")
    assert (record["status"], record["finalizedBy"], record["redriveOf"]) == (
        "SUCCEEDED",
        redrive_arn,
        failed_arn,
    )
    assert engine.dlq_messages() == []


def test_redrive_that_crashes_after_start_is_resumed_by_running_it_again(
    cli, deployment, batch_file, fix_downstream, monkeypatch
):
    engine = deployment.engine
    failed_arn = started_arn(cli("start", batch_file("crash-1", ChargePayment={"mode": "fatal"})))
    assert watch(cli, failed_arn).code == 1
    fix_downstream()

    def crash(*args, **kwargs):
        raise RuntimeError("simulated crash before the DLQ messages were deleted")

    monkeypatch.setattr(redrive_module, "delete", crash)
    with pytest.raises(RuntimeError, match="simulated crash"):
        cli("dlq", "redrive", "--batch", "crash-1")
    (message,) = engine.dlq_messages()  # nothing lost: still in the queue, visible again
    assert message["task"] == "ChargePayment"
    (redrive_name,) = [n for n in executions(deployment) if n.startswith("redrive-")]
    redrive_arn = executions(deployment)[redrive_name]["executionArn"]
    assert watch(cli, redrive_arn).code == 0
    finalized = engine.status_record("crash-1")
    assert (finalized["status"], finalized["finalizedBy"]) == ("SUCCEEDED", redrive_arn)

    monkeypatch.undo()  # the delete works again (the downstream fix goes too: not needed now)
    again = cli("dlq", "redrive", "--batch", "crash-1")
    assert again.code == 0, again.err
    assert f"reusing the redrive execution started earlier {redrive_arn}" in again.out
    assert len(executions(deployment)) == 2  # the failed run and one redrive, not a second one
    assert engine.status_record("crash-1") == finalized  # finalized exactly once, untouched
    assert engine.dlq_messages() == []


def test_redrive_again_while_the_first_redrive_still_runs_is_the_same_execution(
    cli, deployment, batch_file, monkeypatch
):
    """Same name + same input as a RUNNING execution: the redrive finds that execution again."""
    import threading

    import fanout_runtime.faults as faults

    engine = deployment.engine
    failed_arn = started_arn(cli("start", batch_file("dup-1", ReserveInventory={"mode": "fatal"})))
    assert watch(cli, failed_arn).code == 1
    gate = threading.Event()
    monkeypatch.setattr(faults, "raise_simulated_failure", lambda payload, name, attempt: gate.wait(20))  # fixed, but slow
    with monkeypatch.context() as crashing:
        crashing.setattr(redrive_module, "delete", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("crash")))
        with pytest.raises(RuntimeError):
            cli("dlq", "redrive", "--batch", "dup-1")
    (redrive,) = [e for n, e in executions(deployment).items() if n.startswith("redrive-")]
    assert deployment.sfn.describe_execution(executionArn=redrive["executionArn"])["status"] == "RUNNING"
    again = cli("dlq", "redrive", "--batch", "dup-1")
    gate.set()
    assert again.code == 0, again.err
    assert f"reusing the redrive execution started earlier {redrive['executionArn']}" in again.out
    assert [n for n in executions(deployment) if n.startswith("redrive-")] == [redrive["name"]]
    assert engine.dlq_messages() == []
    assert watch(cli, redrive["executionArn"]).code == 0
    assert engine.status_record("dup-1")["finalizedBy"] == redrive["executionArn"]


def test_messages_of_several_failed_executions_redrive_only_the_newest(
    cli, deployment, batch_file, fix_downstream, monkeypatch
):
    engine = deployment.engine
    first = started_arn(cli("start", batch_file("multi-1", NotifyCustomer={"mode": "permanent"})))
    assert watch(cli, first).code == 1
    # a redrive that crashes before deleting, and whose execution fails again (not fixed yet)
    monkeypatch.setattr(redrive_module, "delete", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("crash")))
    with pytest.raises(RuntimeError):
        cli("dlq", "redrive", "--batch", "multi-1")
    monkeypatch.undo()
    (second,) = [e["executionArn"] for n, e in executions(deployment).items() if n.startswith("redrive-")]
    assert watch(cli, second).code == 1
    assert sorted(m["executionArn"] for m in engine.dlq_messages()) == sorted([first, second])
    assert engine.status_record("multi-1")["executionArn"] == second

    fix_downstream()
    run = cli("dlq", "redrive", "--batch", "multi-1")
    assert run.code == 0, run.err
    assert f"redrive of {second}" in run.out
    assert "left 1 message(s) of other execution(s) in the queue" in run.out and first in run.out
    (left,) = engine.dlq_messages()
    assert left["executionArn"] == first  # superseded, left alone
    (third,) = [
        e["executionArn"]
        for n, e in executions(deployment).items()
        if n.startswith("redrive-") and e["executionArn"] != second
    ]
    assert execution_input(deployment, third)["redriveOf"] == second
    assert watch(cli, third).code == 0
    record = engine.status_record("multi-1")
    assert (record["status"], record["redriveOf"], record["finalizedBy"]) == ("SUCCEEDED", second, third)


def test_failed_batch_whose_dlq_send_failed_is_redriven_from_the_failed_executions_input(
    cli, deployment, batch_file, fix_downstream
):
    engine = deployment.engine
    (queue_id,) = engine.stacks["parallel"].queues
    engine.inject_sqs_send_failures(queue_id, 100)  # every DLQ send fails, retries included
    failed_arn = started_arn(cli("start", batch_file("lost-1", ChargePayment={"mode": "fatal"})))
    watched = watch(cli, failed_arn)
    engine.inject_sqs_send_failures(queue_id, 0)
    assert watched.code == 1 and "failed (DLQ send failed)" in watched.out
    assert engine.dlq_messages() == []
    assert engine.status_record("lost-1")["failedTasks"] == ["ChargePayment"]

    fix_downstream()
    run = cli("dlq", "redrive", "--batch", "lost-1")
    assert run.code == 0, run.err
    assert "ChargePayment: recorded as failed without a DLQ message here" in run.out
    (redrive_arn,) = [
        e["executionArn"] for n, e in executions(deployment).items() if n.startswith("redrive-")
    ]
    assert execution_input(deployment, redrive_arn)["tasks"] == {
        "ChargePayment": execution_input(deployment, failed_arn)["tasks"]["ChargePayment"]
    }
    assert watch(cli, redrive_arn).code == 0
    assert engine.status_record("lost-1")["status"] == "SUCCEEDED"


def test_redrive_with_nothing_in_the_dlq_exits_1(cli, deployment, batch_file):
    assert watch(cli, started_arn(cli("start", batch_file("clean-1")))).code == 0
    run = cli("dlq", "redrive", "--batch", "clean-1")
    assert run.code == 1 and "no dead-letter message of batch clean-1" in run.err
    assert len(executions(deployment)) == 1


def test_dlq_list_of_an_empty_queue(cli, deployment):
    run = cli("dlq", "list")
    assert run.code == 0 and "0 message(s)" in run.out


# --------------------------------------------------------------------------- Map workflow
def test_map_watch_shows_the_map_runs_counts_and_a_failed_batch_is_redriven(
    cli, map_deployment, tmp_path, fix_downstream
):
    engine = map_deployment.engine
    path = tmp_path / "items.json"
    path.write_text(json.dumps({"batchId": "map-1", "items": [{"imageId": f"img-{i}"} for i in range(6)]}))
    run = cli("start", "--workflow", "map", str(path))
    assert run.code == 0, run.err
    watched = watch(cli, started_arn(run))
    assert watched.code == 0, watched.out
    assert "map run items: total=6, succeeded=6, failed=0, timedOut=0, aborted=0" in watched.out
    assert engine.status_record("map-1", "map")["status"] == "SUCCEEDED"

    faults = {2: {"mode": "fatal"}, 3: {"mode": "permanent"}}
    items = [{"imageId": f"img-{i}", **({"simulateFailure": faults[i]} if i in faults else {})} for i in range(5)]
    path.write_text(json.dumps({"batchId": "map-2", "items": items}))
    failed_arn = started_arn(cli("start", "--workflow", "map", str(path)))
    failed = watch(cli, failed_arn)
    assert failed.code == 1 and "map run items: total=5, succeeded=3, failed=2" in failed.out
    assert "fanout dlq redrive --env dev --workflow map --batch map-2" in failed.out
    listed = cli("dlq", "list", "--workflow", "map", "--batch", "map-2")
    assert listed.code == 0 and "2 message(s) of batch map-2" in listed.out
    assert "items:     [2]" in listed.out and "error=NonRetryableTaskError" in listed.out

    fix_downstream()
    redriven = cli("dlq", "redrive", "--workflow", "map", "--batch", "map-2")
    assert redriven.code == 0, redriven.err
    assert "recorded failed items: 2 of 5" in redriven.out and "items: 2 item(s)" in redriven.out
    (redrive_arn,) = re.findall(r"started redrive execution (arn:\S+)", redriven.out)
    assert execution_input(map_deployment, redrive_arn) == {
        "batchId": "map-2", "items": [items[2], items[3]], "redriveOf": failed_arn,
    }
    assert watch(cli, redrive_arn).code == 0
    record = engine.status_record("map-2", "map")
    assert (record["status"], record["redriveOf"], record["finalizedBy"]) == ("SUCCEEDED", failed_arn, redrive_arn)
    assert engine.dlq_messages("map") == []
    # running it again finds nothing left to redrive; the batch stays finalized once
    again = cli("dlq", "redrive", "--workflow", "map", "--batch", "map-2")
    assert again.code == 1 and "nothing to redrive" in again.err
    assert engine.status_record("map-2", "map")["finalizedBy"] == redrive_arn


def test_map_redrive_of_a_map_run_that_failed_as_a_whole_runs_every_item_again(cli, map_deployment, tmp_path):
    engine = map_deployment.engine
    body = json.dumps([{"imageId": f"img-{i}"} for i in range(3)]).encode()
    manifest = engine.upload_manifest("manifests/gone.json", body)
    prepare = engine.function_id("PrepareBatch", "map")

    def delete_once(function, event, result):
        if function == prepare:
            engine.router.after_invoke = None
            # the version PrepareBatch checked (the ItemReader reads that one: deleting the latest
            # only adds a delete marker)
            engine.client("s3").delete_object(Bucket=manifest["bucket"], Key=manifest["key"],
                                              VersionId=result["manifest"]["versionId"])

    engine.router.after_invoke = delete_once
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"batchId": "map-3", "manifest": manifest}))
    failed_arn = started_arn(cli("start", "--workflow", "map", str(path)))
    assert watch(cli, failed_arn).code == 1
    assert engine.status_record("map-3", "map")["failedItems"] == 3
    engine.upload_manifest("manifests/gone.json", body)  # the manifest is back
    redriven = cli("dlq", "redrive", "--workflow", "map", "--batch", "map-3")
    assert redriven.code == 0, redriven.err
    assert "all 3 items run again" in redriven.out
    (redrive_arn,) = re.findall(r"started redrive execution (arn:\S+)", redriven.out)
    assert execution_input(map_deployment, redrive_arn) == {"batchId": "map-3", "manifest": manifest, "redriveOf": failed_arn}
    assert watch(cli, redrive_arn).code == 0
    assert engine.status_record("map-3", "map")["status"] == "SUCCEEDED"


# ------------------------------------------------------------------------- clear errors
def test_malformed_input_names_file_line_and_column(cli, deployment, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "batchId": "x",\n  "tasks": }\n')
    run = cli("start", str(bad))
    assert run.code == 2
    assert (
        run.err.strip() == f"fanout: input file {bad}: not valid JSON: Expecting value (line 3, column 12)"
    )
    missing = cli("start", str(tmp_path / "nope.json"))
    assert missing.code == 2 and "nope.json: No such file or directory" in missing.err
    assert executions(deployment) == {}


def test_invalid_input_is_refused_before_anything_starts(cli, deployment, tmp_path):
    path = tmp_path / "typo.json"
    path.write_text(
        json.dumps(
            {"batchId": "t-1", "tasks": {"ReserveInventory": {}, "ChargePayment": {}, "NotifyCustomr": {}}}
        )
    )
    run = cli("start", str(path))
    assert run.code == 2 and "NotifyCustomr" in run.err and "tasks.NotifyCustomer: missing" in run.err
    assert len(run.err.strip().splitlines()) == 1
    assert executions(deployment) == {}


def test_unknown_environment(cli, deployment, batch_file):
    run = cli("start", "--env", "staging", batch_file("e-1"))
    assert run.code == 2
    assert run.err.strip().startswith(
        "fanout: unknown environment 'staging': pass --env with one of: dev, prod"
    )


def test_stack_not_deployed(cli, deployment, batch_file):
    run = cli("start", "--env", "prod", batch_file("p-1"))
    assert run.code == 2
    assert run.err.strip() == (
        "fanout: stack FanOut-prod-ParallelWorkflow is not deployed in eu-west-1: run npx cdk deploy -c env=prod"
    )
    elsewhere = cli("dlq", "list", "--region", "us-east-1")
    assert elsewhere.code == 2
    assert "stack FanOut-dev-ParallelWorkflow is not deployed in us-east-1" in elsewhere.err
    assert "drop --region: dev deploys to eu-west-1" in elsewhere.err


def test_bad_region(cli, deployment, batch_file):
    run = cli("--region", "Mars", "start", batch_file("r-1"))
    assert run.code == 2 and "--region 'Mars': not an AWS region" in run.err


def test_no_credentials(cli, deployment, batch_file, monkeypatch, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    run = cli("start", batch_file("c-1"))
    assert run.code == 2 and run.err.startswith("fanout: no AWS credentials")
    assert "aws configure" in run.err
    assert executions(deployment) == {}


def test_unreachable_endpoint(cli, batch_file, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    run = cli("start", batch_file("u-1"), endpoint="http://127.0.0.1:9")
    assert run.code == 2 and "cannot reach http://127.0.0.1:9" in run.err


def test_watch_errors(cli, deployment):
    bad = cli("watch", "not-an-arn")
    assert bad.code == 2 and "is not an execution ARN" in bad.err
    arn = deployment.engine.state_machine_arn().replace(":stateMachine:", ":execution:") + ":nope"
    missing = cli("status", arn)
    assert missing.code == 2 and f"execution {arn} does not exist in eu-west-1" in missing.err
    other_region = cli("status", arn, "--region", "us-east-1")
    assert (
        other_region.code == 2
        and "the execution is in eu-west-1 (see its ARN), not us-east-1" in other_region.err
    )


def test_stack_outputs_naming_a_deleted_resource(cli, deployment):
    deployment.engine.sqs.delete_queue(QueueUrl=deployment.engine.queue_url())
    run = cli("dlq", "list")
    assert run.code == 2 and "the stack outputs name a resource that does not exist" in run.err


@pytest.mark.parametrize("workflow", ["parallel", "map"])
def test_a_batch_the_failure_guard_recorded_is_resumed_not_redriven(workflow):
    """An execution that timed out (or was stopped, or ran out of UpdateFinalStatus retries) has no
    dead-lettered task or item: the CLI says to resume it with RedriveExecution instead."""
    arn = "arn:aws:states:eu-west-1:123456789012:execution:sm:order-9"
    record = {"status": "FAILED", "executionArn": arn, "failedExecutionStatus": "TIMED_OUT",
              "failedExecutionError": "States.Timeout"}
    guard_message = dlq_module.Message("m1", "r1", "{}", {"kind": "execution", "batchId": "order-9", "executionArn": arn})
    with pytest.raises(redrive_module.OpsError) as refused:
        if workflow == "parallel":
            redrive_module.plan_redrive("order-9", [guard_message], record, sfn=None)
        else:
            redrive_module.plan_map_redrive("order-9", [guard_message], record, sfn=None, s3=None, bucket="b")
    assert refused.value.code == 1
    assert f"aws stepfunctions redrive-execution --execution-arn {arn}" in str(refused.value)
    assert "ended TIMED_OUT (States.Timeout) outside the workflow's decision" in str(refused.value)


def test_map_redrive_completes_the_items_from_the_map_runs_results():
    """A failed item whose DLQ message is missing (its child timed out and forwarding failed, or
    the message is hidden) is taken from the map run's result files; items found twice count once."""
    arn = "arn:aws:states:eu-west-1:123456789012:execution:sm:map-9"

    def child(status, error, indexes):
        items = [{"index": i, "item": {"n": i}} for i in indexes]
        return {"Status": status, "Error": error, "Input": json.dumps({"Items": items, "BatchInput": {}})}

    objects = {
        "results/run/manifest.json": {"ResultFiles": {"FAILED": [{"Key": "results/run/FAILED_0.json"}], "SUCCEEDED": []}},
        "results/run/FAILED_0.json": [child("FAILED", "ItemsDeadLettered", [0]), child("TIMED_OUT", "States.Timeout", [1, 2])],
    }

    class FakeS3:
        def get_object(self, Bucket, Key):  # noqa: N803 - boto3's names
            import io

            from botocore.response import StreamingBody

            assert Bucket == "bucket"
            data = json.dumps(objects[Key]).encode()
            return {"Body": StreamingBody(io.BytesIO(data), len(data))}

    record = {"status": "FAILED", "executionArn": arn, "failedItems": 3, "totalItems": 9, "resultsKey": "results/run/manifest.json"}
    message = dlq_module.Message("m1", "r1", "{}", {"batchId": "map-9", "executionArn": arn, "items": [{"index": 0, "item": {"n": 0}}]})
    plan = redrive_module.plan_map_redrive("map-9", [message], record, sfn=None, s3=FakeS3(), bucket="bucket")
    assert [i["index"] for i in plan.items] == [0, 1, 2]
    assert plan.execution_input == {"batchId": "map-9", "items": [{"n": 0}, {"n": 1}, {"n": 2}], "redriveOf": arn}
    assert any("2 failed item(s) without a DLQ message here were taken from the map run's results" in n for n in plan.notes)

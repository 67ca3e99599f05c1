"""examples/external_app: a CDK app of its own (its own app.py, cdk.json and Lambda) that installs
the kit as a user would, from a wheel, and uses ParallelFanOut. The suite builds the wheel,
installs it into a folder of its own, synthesizes the app with nothing of this repository on the
path, and runs the result once on the local engine with the app's own handler."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from fanout_kit.local.engine import LocalEngine
from fanout_kit.local.template import load_assembly

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "external_app"
STACK = "SignupFanOut"


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, f"{cmd}: {done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def external(tmp_path_factory):
    work = tmp_path_factory.mktemp("external-app")
    run([sys.executable, "-m", "pip", "wheel", "--no-index", "--no-deps", "--no-build-isolation", "-q", "-w", work / "dist", ROOT])
    (wheel,) = (work / "dist").glob("fanout_kit-*.whl")
    run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "-q", "--target", work / "site", wheel])
    # -S: no site-packages .pth files, so neither this repository nor lambdas/ is on the path:
    # the kit comes from the installed wheel, the CDK from the venv's packages.
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",  # the venv's Node for jsii
        "PYTHONPATH": f"{work / 'site'}:{sysconfig.get_paths()['purelib']}",
        "HOME": str(work),
        "CDK_OUTDIR": str(work / "cdk.out"),
    }
    where = run([sys.executable, "-S", "-c", "import fanout_kit.shared.assets as f; print(f.__file__, f.kit_handler_file('update_final_status'))"],
                cwd=EXAMPLE, env=env).stdout.split()
    run([sys.executable, "-S", "app.py"], cwd=EXAMPLE, env=env)
    return work, where, load_assembly(work / "cdk.out", workflow_stacks={"parallel": STACK}, region="eu-west-1")


def test_the_app_uses_the_installed_wheel_with_its_own_handlers(external):
    work, (module_file, kit_handler), _ = external
    assert module_file.startswith(str(work / "site" / "fanout_kit"))
    assert kit_handler == str(work / "site" / "fanout_kit" / "shared" / "handlers" / "update_final_status.py")
    wheel_files = sorted(p.relative_to(work / "site").as_posix() for p in (work / "site").rglob("*.py")
                         if "__pycache__" not in p.parts and ".dist-info" not in p.as_posix())
    assert "fanout_runtime/errors.py" in wheel_files and "fanout_kit/patterns/completion_ledger/runtime.py" in wheel_files
    assert "fanout_kit/patterns/parallel/definition.py" in wheel_files
    assert {f.split("/")[0] for f in wheel_files} - {"bin"} == {"fanout_kit", "fanout_runtime"}  # nothing else on top
    assert "fanout_kit/shared/handlers/update_final_status.py" in wheel_files
    assert not any(f.startswith(("fanout_kit/lambdas", "tasks/")) or "map_item_worker" in f for f in wheel_files)
    assert "fanout_kit/cli/main.py" in wheel_files and "fanout_kit/local/engine.py" in wheel_files  # fanout run --app
    assert not any(f.startswith(("stacks/", "tests/")) for f in wheel_files)  # the repository's app is not the kit
    assert (work / "site" / "bin" / "fanout").is_file()  # the console script


def test_the_app_code_is_short():
    lines = [line for line in (EXAMPLE / "app.py").read_text().splitlines() if line.strip()]
    assert len(lines) < 40


def test_the_external_app_synthesizes_a_parallel_fan_out_of_its_own_function(external):
    _, _, app = external
    template = app.template("parallel")
    functions = {lid: r["Properties"] for lid, r in template["Resources"].items() if r["Type"] == "AWS::Lambda::Function"}
    handlers = sorted(p["Handler"] for p in functions.values())
    assert handlers == ["record_execution_failure.handler", "signup.handler", "update_final_status.handler",
                        "validate_input.handler"]
    # add_outputs(): ids under the construct (CDK appends a hash of the path)
    assert sorted(key[:-8] for key in template["Outputs"]) == [
        "SignupAlarmTopicArn", "SignupDeadLetterQueueUrl", "SignupStateMachineArn", "SignupStatusTableName"]


def test_the_external_app_runs_on_the_local_engine(external):
    _, _, app = external
    ok = {"email": "ada@example.com"}
    with LocalEngine(app, workflows=("parallel",), sleep_retries=False) as engine:
        result = engine.run("parallel", {"batchId": "signup-1", "tasks": {
            "VerifyEmail": ok, "CreateProfile": {**ok, "busyUntilAttempt": 1}, "SendWelcome": ok}})
        assert result.status == "SUCCEEDED", [m["cause"] for m in engine.dlq_messages()]
        assert engine.status_record("signup-1")["status"] == "SUCCEEDED"
        (user_fn,) = [lid for lid, fn in engine.router.functions.items() if fn.handler == "signup.handler"]
        assert engine.router.count(user_fn) == 4  # three tasks, one of them retried once

        failed = engine.run("parallel", {"batchId": "signup-2", "tasks": {
            "VerifyEmail": ok, "CreateProfile": ok, "SendWelcome": {"email": "nobody"}}})
        assert failed.status == "FAILED" and failed.error == "BatchFailed"
        (message,) = engine.dlq_messages()
        assert message["task"] == "SendWelcome" and message["error"] == "NonRetryableTaskError"
        assert json.loads(json.dumps(message["input"])) == {"email": "nobody"}
        assert engine.status_record("signup-2")["status"] == "FAILED"


def test_outputs_of_a_construct_under_another_id_are_found_by_key():
    from fanout_kit.ops.aws import Deployment, OpsError

    one = Deployment(None, "parallel", "S", "eu-west-1", {"SignupStateMachineArnF44C3169": "arn:1"})
    assert one.state_machine_arn == "arn:1"
    two = Deployment(None, "parallel", "S", "eu-west-1",
                     {"AStateMachineArn0123ABCD": "arn:a", "BStateMachineArn4567CDEF": "arn:b"})
    with pytest.raises(OpsError, match="several StateMachineArn outputs"):
        two.state_machine_arn
    with pytest.raises(OpsError, match="has no output DeadLetterQueueUrl"):
        one.queue_url


def _wheel_env(work: Path) -> dict:
    return {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": f"{work / 'site'}:{sysconfig.get_paths()['purelib']}",
        "HOME": str(work),
    }


def test_the_constructs_import_no_boto3_or_moto(external):
    """The constructs-only install: synthesizing loads neither the local engine's dependencies nor
    the engine."""
    work, _, _ = external
    code = ("import sys, fanout_kit, fanout_kit.patterns.parallel.construct, fanout_kit.patterns.distributed_map.construct, fanout_kit.patterns.completion_ledger.construct; "
            "print(sorted(m for m in ('boto3', 'botocore', 'moto', 'rich', 'fanout_kit.cli', 'fanout_kit.local') if m in sys.modules))")
    assert run([sys.executable, "-S", "-c", code], env=_wheel_env(work), cwd=work).stdout.strip() == "[]"


def test_fanout_run_app_from_the_wheel(external, tmp_path):
    """The installed kit's own command runs the app's assembly: SUCCEEDED (0), then a fault
    injected into the app's own function without touching its code: FAILED (1) with its DLQ message;
    without --app, the repository's environments are absent: one line, exit 2."""
    work, _, _ = external
    batch = tmp_path / "batch.json"
    ok = {"email": "ada@example.com"}
    batch.write_text(json.dumps({"batchId": "w-1", "tasks": {"VerifyEmail": ok, "CreateProfile": ok, "SendWelcome": ok}}))
    base = [sys.executable, "-S", "-m", "fanout_kit", "run", batch, "--app", work / "cdk.out", "--no-sleep"]
    done = subprocess.run([str(c) for c in base + ["--fail", "CreateProfile=transient:2"]], capture_output=True,
                          text=True, timeout=300, env=_wheel_env(work), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "execution SUCCEEDED" in done.stdout and '"status": "SUCCEEDED"' in done.stdout
    assert "CreateProfile=3" in done.stdout  # two injected transient failures, retried
    failed = subprocess.run([str(c) for c in base + ["--fail", "SendWelcome=fatal"]], capture_output=True,
                            text=True, timeout=300, env=_wheel_env(work), cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr[-2000:]
    assert "execution FAILED" in failed.stdout and "dead-letter queue: 1 message(s)" in failed.stdout
    assert "task=SendWelcome error=NonRetryableTaskError" in failed.stdout
    assert "injected non-retryable failure of SendWelcome (attempt 1)" in failed.stdout
    # the run saved the batch (in the current directory): the installed command lists its failure
    listed = subprocess.run([sys.executable, "-S", "-m", "fanout_kit", "results", "w-1", "--local", "--failed",
                             "--format", "json"], capture_output=True, text=True, timeout=120,
                            env=_wheel_env(work), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert [(o["task"], o["status"], o["error"]) for o in json.loads(listed.stdout)] == [
        ("SendWelcome", "FAILED", "NonRetryableTaskError")]
    no_app = subprocess.run([sys.executable, "-S", "-m", "fanout_kit", "run", str(batch)], capture_output=True,
                            text=True, timeout=120, env=_wheel_env(work), cwd=tmp_path)
    assert no_app.returncode == 2 and "pass --app PATH" in no_app.stderr
    assert len(no_app.stderr.strip().splitlines()) == 1


def test_the_example_apps_own_tests_pass_with_the_plugin(external):
    """examples/external_app/tests/, run inside the app as its team would (``pytest``), with the kit
    installed from the wheel: the pytest11 entry point gives them the fanout_app fixture."""
    work, _, _ = external
    done = subprocess.run([sys.executable, "-S", "-m", "pytest", "-q", "-p", "no:cacheprovider"], capture_output=True,
                          text=True, timeout=600, env=_wheel_env(work), cwd=EXAMPLE)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "4 passed" in done.stdout

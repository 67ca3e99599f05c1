"""The outside path, as a new user takes it: a new CDK app in a temporary folder (``cdk.json`` with
only ``"app"``, stacks without ``env``, the three constructs with the app's own functions), the kit
installed from its built wheel (``pip install --no-index``: offline), synthesized by its own app
command, then run with the installed ``fanout run --app`` and with the kit's pytest plugin (a
pytest run inside that app).

By default (a new app "orders-app": a ParallelFanOut in a stack without env, and a stack of
functions that would fail on AWS): the wheel, the synth, ``fanout run --app`` SUCCEEDED (a transient
failure retried) and FAILED (a permanent one dead-lettered with its context), and what would fail
on AWS failing locally (an environment variable the template does not define but the shell has, a
kit module not in the asset, a result that is not JSON). Marked slow (a new app "shop-app": the
three constructs in one stack without env): the Map with 5,000 items, a ledger batch finalized once,
the app's own pytest run with the plugin. ``FANOUT_TRANSCRIPT=path`` appends the commands and
their output there (docs/outside-app-transcript.txt).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

ORDERS_APP = textwrap.dedent('''\
    #!/usr/bin/env python3
    """A new app: orders fanned out to its own function, and what would fail on AWS."""
    from pathlib import Path

    from aws_cdk import App, Duration, Stack
    from aws_cdk import aws_lambda as lambda_

    from fanout_kit import FanOutTask, ParallelFanOut

    HERE = Path(__file__).parent
    app = App()


    def function(stack, name, handler, **environment):
        return lambda_.Function(stack, name, runtime=lambda_.Runtime.PYTHON_3_13, handler=handler,
                                code=lambda_.Code.from_asset(str(HERE / "functions")),
                                timeout=Duration.seconds(10), environment=environment)


    orders = Stack(app, "OrdersApp")  # no env: environment-agnostic
    work = function(orders, "Work", "work.handler", GREETING="hello")
    # Charge: a library's ThrottlingException retried, CardDeclined dead-lettered at once, by name
    ParallelFanOut(orders, "Orders", tasks=[
        FanOutTask("Reserve", work),
        FanOutTask("Charge", work, retry_on=["ThrottlingException"], never_retry=["CardDeclined"]),
        FanOutTask("Notify", work),
    ])

    strict = Stack(app, "StrictApp")  # what would fail on AWS
    ParallelFanOut(strict, "Strict", tasks=[
        FanOutTask("ReadsEnv", function(strict, "ReadsEnv", "strict.reads_env")),
        FanOutTask("ImportsKit", function(strict, "ImportsKit", "strict_import.handler")),
        FanOutTask("ReturnsSet", function(strict, "ReturnsSet", "strict.returns_set")),
    ])
    app.synth()
    ''')

SHOP_APP = textwrap.dedent('''\
    #!/usr/bin/env python3
    """A new app with the three constructs in one stack without env, each with its own function."""
    from pathlib import Path

    from aws_cdk import App, Duration, Stack
    from aws_cdk import aws_lambda as lambda_

    from fanout_kit import CompletionLedger, DistributedMapFanOut, FanOutTask, ParallelFanOut

    HERE = Path(__file__).parent
    app = App()
    shop = Stack(app, "ShopApp")  # no env: environment-agnostic


    def function(name, handler, **environment):
        return lambda_.Function(shop, name, runtime=lambda_.Runtime.PYTHON_3_13, handler=handler,
                                code=lambda_.Code.from_asset(str(HERE / "functions")),
                                timeout=Duration.seconds(10), environment=environment)


    work = function("Work", "work.handler", GREETING="hello")
    ParallelFanOut(shop, "Orders", tasks=[FanOutTask("Reserve", work), FanOutTask("Charge", work),
                                          FanOutTask("Notify", work)])
    DistributedMapFanOut(shop, "Items", worker=FanOutTask("Item", function("ItemWorker", "items.handler")))
    CompletionLedger(shop, "Ledger", processing_function=function("Process", "process.handler"), kinesis_intake=False)
    app.synth()
    ''')

FUNCTIONS = {
    "work.py": '''\
        import os

        from fanout_runtime.errors import NonRetryableTaskError  # the kit's runtime layer, as on AWS


        class ThrottlingException(Exception):
            """A library's error: retried because the task names it in retry_on."""


        class CardDeclined(Exception):
            """Named in never_retry: dead-lettered at once."""


        def handler(event, context):
            data = event.get("input") or {}
            if data.get("reject"):
                raise NonRetryableTaskError(f"{event['task']}: {data['reject']}")
            if event["attempt"] < data.get("throttled", 0):  # attempt is 0-based
                raise ThrottlingException(f"attempt {event['attempt']}: slow down")
            if data.get("declined"):
                raise CardDeclined("card 4242 declined")
            return {"task": event["task"], "greeting": os.environ["GREETING"], "attempt": event["attempt"]}
        ''',
    "items.py": '''\
        def handler(event, context):
            return {"processed": [entry["index"] for entry in event["items"]]}
        ''',
    "process.py": '''\
        def handler(event, context):
            return {"child": event["childId"], "done": True}
        ''',
    "strict.py": '''\
        import os


        def reads_env(event, context):
            return {"table": os.environ["ORDERS_TABLE"]}  # not in the template: the shell's does not count


        def returns_set(event, context):
            return {"ids": {1, 2}}  # not JSON
        ''',
    "strict_import.py": '''\
        from fanout_kit.shared.limits import RetryableTaskError  # the kit's, not in this asset


        def handler(event, context):
            raise RetryableTaskError("never")
        ''',
}

IN_APP_TEST = textwrap.dedent('''\
    """The app's own tests, with the kit's pytest plugin (fanout_app: this app, synthesized once)."""


    def batch(batch_id, **overrides):
        tasks = {"Reserve": {}, "Charge": {}, "Notify": {}}
        tasks.update(overrides)
        return {"batchId": batch_id, "tasks": tasks}


    def test_a_transient_failure_is_retried(fanout_app):
        result = fanout_app.run(batch("p-1"), workflow="parallel", faults={"Charge": "transient:2"})
        assert result.status == "SUCCEEDED"
        assert result.attempts["Charge"] == 3
        assert result.status_record["status"] == "SUCCEEDED"


    def test_a_rejected_task_is_dead_lettered_with_its_context(fanout_app):
        result = fanout_app.run(batch("p-2", Notify={"reject": "no address"}), workflow="parallel")
        assert (result.status, result.error) == ("FAILED", "BatchFailed")
        (message,) = result.dlq_messages
        assert message["task"] == "Notify" and message["error"] == "NonRetryableTaskError"
        assert message["input"] == {"reject": "no address"}
        assert result.status_record["status"] == "FAILED"


    def test_map_items_are_counted(fanout_app):
        result = fanout_app.run({"batchId": "m-1", "items": [{"n": i} for i in range(60)]}, workflow="map")
        assert result.status == "SUCCEEDED", result.cause
        assert result.map_run_counts["total"] == 60 and result.map_run_counts["succeeded"] == 60


    def test_a_ledger_batch_is_finalized_once(fanout_app):
        facts = fanout_app.ledger(children=10, visibility_timeout=60)
        assert facts["ledger_status"] == "COMPLETED"
        assert facts["update_final_status_invocations"] == 1
        assert facts["processing_invocations"] == 10
    ''')


def run(cmd, *, check: bool = True, timeout: int = 900, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kwargs)
    if check:
        assert done.returncode == 0, f"{cmd}: {done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


class Transcript:
    """The outside-app commands and what they printed (FANOUT_TRANSCRIPT=path)."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None

    def add(self, where: str, command: str, done: subprocess.CompletedProcess, seconds: float) -> None:
        if not self.path:
            return
        out = (done.stdout + done.stderr).rstrip()
        with self.path.open("a") as f:
            f.write(f"{where}$ {command}\n{out}\n[exit {done.returncode}, {seconds:.1f} s]\n\n")


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    """The kit's wheel, built and installed offline into a folder of its own; the user's shell."""
    work = tmp_path_factory.mktemp("outside")
    run([sys.executable, "-m", "pip", "wheel", "--no-index", "--no-deps", "--no-build-isolation", "-q",
         "-w", work / "dist", ROOT])
    (wheel,) = (work / "dist").glob("fanout_kit-*.whl")
    run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "-q", "--target", work / "site", wheel])
    # The kit from the wheel (site, its `fanout` script in site/bin), the CDK, moto, pytest... from
    # the venv's packages; -S keeps this repository's .pth (and lambdas/) off the path.
    # ORDERS_TABLE is set in the shell, not in any template: it must not reach a function.
    env = {
        "PATH": f"{work / 'site' / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": f"{work / 'site'}:{sysconfig.get_paths()['purelib']}",
        "HOME": str(work),
        "ORDERS_TABLE": "orders-in-my-shell",
        "AWS_REGION": "eu-west-1",
    }
    return {"work": work, "env": env, "transcript": Transcript(os.environ.get("FANOUT_TRANSCRIPT"))}


def new_app(kit, name: str, app_py: str) -> dict:
    """A new CDK app folder: cdk.json with only "app", its app.py and functions/, synthesized."""
    app = kit["work"] / name
    (app / "functions").mkdir(parents=True)
    (app / "cdk.json").write_text(json.dumps({"app": "python3 app.py"}))
    (app / "app.py").write_text(app_py)
    for file, text in FUNCTIONS.items():
        (app / "functions" / file).write_text(textwrap.dedent(text))
    started = time.monotonic()
    synth = run([sys.executable, "-S", "app.py"], cwd=app, env={**kit["env"], "CDK_OUTDIR": str(app / "cdk.out")})
    kit["transcript"].add(name, "CDK_OUTDIR=cdk.out python3 app.py   # the synth, as `cdk synth` runs the app",
                          synth, time.monotonic() - started)
    return {**kit, "app": app}


@pytest.fixture(scope="module")
def orders(kit):
    return new_app(kit, "orders-app", ORDERS_APP)


@pytest.fixture(scope="module")
def shop(kit):
    return new_app(kit, "shop-app", SHOP_APP)


def fanout(app, *args, code: int | None = None) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = run([sys.executable, "-S", "-m", "fanout_kit", *args], check=False, cwd=app["app"], env=app["env"])
    app["transcript"].add(app["app"].name, "fanout " + " ".join(str(a) for a in args), done, time.monotonic() - started)
    if code is not None:
        assert done.returncode == code, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def write(app, name: str, data) -> str:
    (app["app"] / name).write_text(data if isinstance(data, str) else json.dumps(data))
    return name


def test_the_app_is_the_users_own(orders):
    app = orders["app"]
    assert json.loads((app / "cdk.json").read_text()) == {"app": "python3 app.py"}
    manifest = json.loads((app / "cdk.out" / "manifest.json").read_text())
    stacks = {k: a for k, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}
    assert sorted(stacks) == ["OrdersApp", "StrictApp"]
    assert all(a["environment"] == "aws://unknown-account/unknown-region" for a in stacks.values())


def test_fanout_run_app_succeeds_with_a_transient_failure_retried(orders):
    """From the app folder (synthesized by its cdk.json command), one stack chosen by --stack."""
    batch = write(orders, "batch.json", {"batchId": "order-1", "tasks": {"Reserve": {}, "Charge": {}, "Notify": {}}})
    done = fanout(orders, "run", batch, "--app", ".", "--no-sleep", code=2)
    assert done.stderr.strip().count("\n") == 0
    assert "several stacks hold a workflow: OrdersApp (parallel), StrictApp (parallel); pass --stack NAME" in done.stderr
    done = fanout(orders, "run", batch, "--app", ".", "--stack", "OrdersApp", "--no-sleep",
                  "--fail", "Charge=transient:2", code=0)
    assert "execution SUCCEEDED" in done.stdout
    assert "Charge=3" in done.stdout  # two injected failures, retried
    assert '"status": "SUCCEEDED"' in done.stdout  # the status record


def test_fanout_run_app_dead_letters_a_permanent_failure_with_its_context(orders):
    batch = write(orders, "batch.json", {"batchId": "order-2", "tasks": {"Reserve": {}, "Charge": {"amount": 12},
                                                                         "Notify": {}}})
    done = fanout(orders, "run", batch, "--app", "cdk.out", "--stack", "OrdersApp", "--no-sleep",
                  "--fail", "Charge=permanent", code=1)
    assert "execution FAILED" in done.stdout and "BatchFailed" in done.stdout
    assert "dead-letter queue: 1 message(s)" in done.stdout
    assert "task=Charge error=RetryableTaskError" in done.stdout
    assert "injected permanent failure of Charge" in done.stdout
    assert 'input:     {"amount": 12}' in done.stdout
    assert '"status": "FAILED"' in done.stdout


def test_the_apps_own_error_names_are_retried_or_dead_lettered_as_its_task_says(orders):
    """retry_on / never_retry with the app's own exception classes, run from its own code asset
    (which imports fanout_runtime from the kit's layer)."""
    batch = write(orders, "names.json", {"batchId": "order-names", "tasks": {
        "Reserve": {}, "Charge": {"throttled": 2}, "Notify": {}}})
    done = fanout(orders, "run", batch, "--app", "cdk.out", "--stack", "OrdersApp", "--no-sleep", code=0)
    assert "execution SUCCEEDED" in done.stdout and "Charge=3" in done.stdout
    batch = write(orders, "names.json", {"batchId": "order-declined", "tasks": {
        "Reserve": {}, "Charge": {"declined": True}, "Notify": {}}})
    done = fanout(orders, "run", batch, "--app", "cdk.out", "--stack", "OrdersApp", "--no-sleep", code=1)
    assert "Charge=1" in done.stdout and "dead-letter queue: 1 message(s)" in done.stdout
    assert "task=Charge error=CardDeclined" in done.stdout


def test_what_fails_on_aws_fails_locally(orders):
    batch = write(orders, "strict.json", {"batchId": "strict-1", "tasks": {"ReadsEnv": {}, "ImportsKit": {},
                                                                          "ReturnsSet": {}}})
    done = fanout(orders, "run", batch, "--app", "cdk.out", "--stack", "StrictApp", "--no-sleep", code=1)
    assert "dead-letter queue: 3 message(s)" in done.stdout
    assert "task=ReadsEnv error=KeyError" in done.stdout and "'ORDERS_TABLE'" in done.stdout
    assert "task=ImportsKit error=Runtime.ImportModuleError" in done.stdout
    assert "Unable to import module 'strict_import': No module named 'fanout_kit'" in done.stdout
    assert "task=ReturnsSet error=Runtime.MarshalError" in done.stdout


def test_iam_report_app_evaluates_every_call_of_the_apps_workflow(orders):
    """fanout iam-report --app: the scenarios on the app's own workflow (faults injected by the
    engine), every call of the kit's roles checked against the app's synthesized policies."""
    done = fanout(orders, "iam-report", "--app", "cdk.out", "--stack", "OrdersApp", "--no-ledger", code=0)
    assert "/OrdersApp/Orders: parallel: a batch succeeds, then is started again" in done.stdout
    assert "Reserve fails permanently (injected), is dead-lettered" in done.stdout
    assert "the redrive of Reserve finalizes the batch" in done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("iam: ") and ", 0 denied," in last
    # the success path ran: UpdateFinalStatus wrote the status record with its own grant
    role = done.stdout.split("parallel / UpdateFinalStatus\n", 1)[1].split("\n\n", 1)[0]
    assert "call  dynamodb:UpdateItem" in role and "allowed" in role
    assert "UNEXPLAINED" not in done.stdout


def test_iam_report_app_needs_a_batch_the_apps_functions_accept(orders):
    batch = write(orders, "rejected.json", {"batchId": "r", "tasks": {"Reserve": {"reject": "no stock"},
                                                                     "Charge": {}, "Notify": {}}})
    done = fanout(orders, "iam-report", "--app", "cdk.out", "--stack", "OrdersApp", "--input", batch,
                  "--no-ledger", code=2)
    assert done.stderr.count("\n") == 1 and "--input: the --input batch did not succeed" in done.stderr
    assert "pass --input FILE" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_three_constructs_in_one_stack_without_env(shop):
    batch = write(shop, "batch.json", {"batchId": "order-3", "tasks": {"Reserve": {}, "Charge": {}, "Notify": {}}})
    done = fanout(shop, "run", batch, "--app", "cdk.out", "--no-sleep", code=2)
    assert "stack ShopApp holds several workflows" in done.stderr and "pass --workflow" in done.stderr
    done = fanout(shop, "run", batch, "--app", "cdk.out", "--workflow", "parallel", "--no-sleep", code=0)
    assert "execution SUCCEEDED" in done.stdout


@pytest.mark.slow
def test_a_map_of_5000_items_is_counted(shop):
    manifest = write(shop, "items.csv", "sku,qty\n" + "".join(f"sku-{i},{i % 7}\n" for i in range(5000)))
    batch = write(shop, "map.json", {"batchId": "items-5000"})
    done = fanout(shop, "run", batch, "--app", "cdk.out", "--workflow", "map", "--manifest", manifest, "--no-sleep",
                  code=0)
    assert "map run items: total=5000, succeeded=5000, failed=0" in done.stdout
    assert '"status": "SUCCEEDED"' in done.stdout
    batch = write(shop, "map.json", {"batchId": "items-5000-b"})
    done = fanout(shop, "run", batch, "--app", "cdk.out", "--workflow", "map", "--manifest", manifest, "--no-sleep",
                  "--fail-item", "4321=fatal", code=1)
    assert "total=5000" in done.stdout and "dead-letter queue:" in done.stdout and "4321" in done.stdout


@pytest.mark.slow
def test_a_ledger_batch_is_finalized_once(shop):
    done = fanout(shop, "ledger", "--app", "cdk.out", "--children", "25", "--visibility-timeout", "60", code=0)
    assert "UpdateFinalStatus: ran (1 invocation(s))" in done.stdout
    assert "processing function Process" in done.stdout and ": 25 invocation(s)" in done.stdout
    assert '"status": "SUCCEEDED"' in done.stdout


@pytest.mark.slow
def test_iam_report_app_covers_the_three_constructs(shop):
    done = fanout(shop, "iam-report", "--app", "cdk.out", code=0)
    for scenario in ("/ShopApp/Orders: parallel: the redrive of Reserve finalizes the batch",
                     "/ShopApp/Items: map: one item fails permanently (injected), is retried alone and dead-lettered (batch FAILED)",
                     "/ShopApp/Ledger: ledger: six children over SQS, one dead-lettered"):
        assert scenario in done.stdout
    assert ", 0 denied," in done.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_the_plugin_runs_the_apps_own_tests(shop):
    tests = shop["app"] / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_workflows.py").write_text(IN_APP_TEST)
    started = time.monotonic()
    done = run([sys.executable, "-S", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], check=False,
               cwd=shop["app"], env=shop["env"])
    shop["transcript"].add("shop-app", "python -m pytest -q tests   # the kit's plugin: the fanout_app fixture", done,
                           time.monotonic() - started)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "4 passed" in done.stdout

"""Cost: the list prices (fanout_kit.shared.pricing), ``fanout estimate`` (fanout_kit.shared.cost) and its CLI."""

import json
import math
from pathlib import Path

import pytest

import fanout_kit.local.template as template_module
from fanout_kit.cli.main import main
from fanout_kit.local.cost_estimate import estimate, retry_attempts_and_wait, success_path
from fanout_kit.shared.cost import Assumptions, Usage, price_lines
from fanout_kit.shared import pricing

ARN = "arn:aws:lambda:us-east-1:123456789012:function:Worker"


def tiny_template(per_batch: int | None = 4, execution_type: str = "EXPRESS", memory: int = 1024) -> dict:
    """A Pass, a Distributed Map of one Lambda Task per child, a Succeed; no logs, no tracing."""
    fan = {
        "Type": "Map",
        "Next": "Done",
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": execution_type},
            "StartAt": "Work",
            "States": {"Work": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
                                "Parameters": {"FunctionName": ARN}, "End": True}},
        },
    }
    if per_batch:
        fan["ItemBatcher"] = {"MaxItemsPerBatch": per_batch}
    definition = {"StartAt": "Prep", "States": {"Prep": {"Type": "Pass", "Next": "Fan"}, "Fan": fan,
                                                "Done": {"Type": "Succeed"}}}
    return {"Resources": {
        "Worker": {"Type": "AWS::Lambda::Function",
                   "Properties": {"MemorySize": memory, "Timeout": 30, "Handler": "w.handler"}},
        "Machine": {"Type": "AWS::StepFunctions::StateMachine",
                    "Properties": {"DefinitionString": json.dumps(definition)}},
    }}


def test_estimate_arithmetic_on_a_known_case():
    # 10 items in batches of 4: 3 Express children, each one Lambda call of 0.02 + 4 * 0.5 s at 1 GB
    result = estimate(tiny_template(), "map", 10, "us-east-1", Assumptions(work_seconds=0.5))
    u = result.usage
    assert u.transitions == 3 + 3  # Prep, Fan, Done + one per child execution started
    assert u.express_requests == 3
    assert u.express_gb_seconds == pytest.approx(3 * 2.1 * 64 / 1024)  # 2.02 s -> 2.1 s, 64 MB
    assert u.lambda_requests == 3
    assert u.lambda_gb_seconds_x86_64 == pytest.approx(3 * 2.02 * 1.0)
    assert u.log_bytes == 3 * 600 and u.xray_traces == 0  # no state machine logs, no tracing
    expected = (6 * 0.025 / 1000 + 3 * 1e-6 + 3 * 2.1 / 16 * 0.00001667 + 3 * 0.2e-6
                + 6.06 * 0.0000166667 + 1800 / 1024**3 * 0.50)
    assert result.total_usd == pytest.approx(expected)


def test_no_batching_and_standard_children_are_priced_from_the_edited_map():
    express = estimate(tiny_template(per_batch=None), "map", 10, "us-east-1")
    assert express.usage.express_requests == 10 and express.usage.lambda_requests == 10
    standard = estimate(tiny_template(per_batch=None, execution_type="STANDARD"), "map", 10, "us-east-1")
    # each Standard child: its start (1) and its one state (1); no Express charges
    assert standard.usage.transitions == 3 + 10 * 2 and standard.usage.express_requests == 0


def test_a_failing_batch_adds_its_retries_and_the_dead_letter_send():
    template = tiny_template(per_batch=1)
    definition = json.loads(template["Resources"]["Machine"]["Properties"]["DefinitionString"])
    work = definition["States"]["Fan"]["ItemProcessor"]["States"]["Work"]
    work["Retry"] = [{"ErrorEquals": ["RetryableTaskError"], "IntervalSeconds": 2, "MaxAttempts": 2,
                      "BackoffRate": 2.0, "JitterStrategy": "FULL"}]
    work["Catch"] = [{"ErrorEquals": ["States.ALL"], "Next": "DLQ"}]
    template["Resources"]["Machine"]["Properties"]["DefinitionString"] = json.dumps(definition)
    assert retry_attempts_and_wait(work) == (3, 0.5 * (2 + 4))
    ok = estimate(template, "map", 100, "us-east-1").usage
    half = estimate(template, "map", 100, "us-east-1", Assumptions(failure_rate=0.5)).usage
    assert half.lambda_requests == pytest.approx(ok.lambda_requests + 50 * 2)  # 2 retries each
    assert half.sqs_requests == pytest.approx(50)  # one dead-letter send per failed child


def test_success_path_takes_the_first_choice_rule_and_stops_at_the_end():
    states = {
        "A": {"Type": "Choice", "Choices": [{"Next": "B"}], "Default": "F"},
        "B": {"Type": "Task", "Next": "C", "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "F"}]},
        "C": {"Type": "Pass", "End": True},
        "F": {"Type": "Fail"},
    }
    assert [name for name, _ in success_path(states, "A")] == ["A", "B", "C"]


def test_price_lines_use_the_pricing_module():
    lines = {line.component: line for line in price_lines(Usage(transitions=1000, log_bytes=1024**3))}
    assert lines["transitions"].usd == pytest.approx(1000 * pricing.price("sfn_standard_transition"))
    assert lines["log_bytes"].usd == pytest.approx(pricing.price("cloudwatch_logs_gb_ingested"))
    assert all(p.source.startswith("https://aws.amazon.com/") for p in pricing.PRICES.values())


def test_synthesized_settings_flow_into_the_estimate(synthesized):
    dev, prod = synthesized("dev"), synthesized("prod")
    dev_map = estimate(dev.template("map"), "map", 1000, dev.region).usage
    prod_map = estimate(prod.template("map"), "map", 1000, prod.region).usage
    # cdk.json: dev map.itemsPerBatch 1, prod 20
    assert dev_map.express_requests == 1000 and prod_map.express_requests == math.ceil(1000 / 20)
    ledger = estimate(prod.template("ledger"), "ledger", 1000, prod.region).usage
    assert ledger.dynamodb_write_units >= 4 * 1000  # a transactional mark + counter per child
    parallel = estimate(dev.template("parallel"), "parallel", 3, dev.region).usage
    assert parallel.lambda_requests >= 3 and parallel.transitions > 3


@pytest.fixture
def reuse_session_synth(monkeypatch, dev_app):
    monkeypatch.setattr(template_module, "synthesize", lambda env_name="dev", outdir=None: dev_app)


def test_estimate_json_is_one_object_with_components_and_total(capsys, reuse_session_synth):
    assert main(["estimate", "--workflow", "map", "--items", "1000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["workflow"] == "map" and out["items"] == 1000 and out["region"] == pricing.REGION
    assert {"transitions", "express_requests", "lambda_requests"} <= set(out["components"])
    for component in out["components"].values():
        assert set(component) == {"label", "quantity", "unitUsd", "usd"}
    assert out["total_usd"] == pytest.approx(sum(c["usd"] for c in out["components"].values()), abs=1e-5)
    assert out["assumptions"]["work_seconds"] == 0.1


def test_estimate_text_says_what_it_read_and_assumed(capsys, reuse_session_synth):
    assert main(["estimate", "--workflow", "ledger", "--items", "50", "--work-seconds", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "from the template: SQS consumer" in out and "assumed: work per item: 0.2 s" in out
    assert "total" in out.splitlines()[-1]


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--items", "0"], "--items"),
        (["--items", "ten"], "--items"),
        (["--items", "5", "--workflow", "queue"], "--workflow"),
        (["--items", "5", "--failure-rate", "1.5"], "--failure-rate"),
        (["--items", "5", "--work-seconds", "nan"], "--work-seconds"),
        (["--items", "5", "--env", "nowhere"], "environment"),
    ],
)
def test_bad_estimate_input_is_one_line_and_exit_2(capsys, argv, flag):
    assert main(["estimate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fanout: ") and flag in err


# ------------------------------------------------------------------------------ measured cost
def _scheduled_lambdas(history):
    return sum(1 for e in history if e["type"] == "TaskScheduled"
               and e["taskScheduledEventDetails"]["resourceType"] == "lambda")


def test_metering_a_parallel_run_counts_what_its_history_shows(dev_app):
    from fanout_kit.local.engine import LocalEngine
    from fanout_kit.local.history import state_transitions

    with LocalEngine(dev_app, workflows=("parallel",), sleep_retries=False) as engine:
        result = engine.run("parallel", json.load(open("examples/batch.json")))
        measured = engine.measured_cost([result])
    assert result.status == "SUCCEEDED"
    u = measured.usage
    assert u.transitions == state_transitions(result.history) == measured.counts["transitions"]
    assert u.lambda_requests == _scheduled_lambdas(result.history) == len(engine.router.invocations)
    # ReadBatchStatus (a consistent GetItem) and UpdateFinalStatus's one conditional write
    assert (u.dynamodb_read_units, u.dynamodb_write_units) == (1.0, 1.0)
    assert u.sqs_requests == 0 and u.eventbridge_service_events == 1
    # the estimate reads the same template: same transitions, invocations and request units
    predicted = estimate(dev_app.template("parallel"), "parallel", 3, dev_app.region).usage
    assert (predicted.transitions, predicted.lambda_requests) == (u.transitions, u.lambda_requests)
    assert (predicted.dynamodb_read_units, predicted.dynamodb_write_units) == (1.0, 1.0)
    assert measured.line().startswith("measured cost: $") and measured.total_usd > 0


def test_metering_a_map_run_counts_children_retries_and_the_dead_letter_send(dev_app):
    from fanout_kit.local.engine import LocalEngine
    from fanout_kit.local.history import state_transitions

    items = [{"n": i} for i in range(6)] + [{"n": 6, "simulateFailure": {"mode": "permanent"}}]
    with LocalEngine(dev_app, workflows=("map",), sleep_retries=False) as engine:
        result = engine.run("map", {"batchId": "cost-1", "items": items})
        measured = engine.measured_cost([result])
        worker = next(lid for lid, fn in engine.router.functions.items() if fn.handler == "map_item_worker.handler")
        worker_calls = engine.router.count(worker)
    u, counts = measured.usage, measured.counts
    # dev: one item per child, 7 Express children; the parent's own transitions plus one per child
    assert counts["express_children"] == 7 == u.express_requests
    assert u.transitions == state_transitions(result.history) + 7
    # the poison item: 1 + 2 retries (dev map.retry.retryable.maxAttempts 2), then one DLQ send
    assert worker_calls == 6 + 3
    assert u.lambda_requests == len(engine.router.invocations) >= worker_calls
    assert u.sqs_requests >= 1
    assert u.express_gb_seconds >= 7 * 0.1 * 64 / 1024  # at least 100 ms each, at 64 MB
    assert counts["aws_calls"].get("s3:PutObject", 0) >= 1  # the inline items' manifest, the results


def test_the_cost_page_table_is_what_cost_table_prints(synthesized):
    from tools.cost_table import COST_PAGE, page_block, table

    assert page_block(COST_PAGE.read_text()) == table(synthesized("prod")), (
        "docs/cost.md's cost table is stale: run .venv/bin/python -m tools.cost_table --write")


def test_the_readme_patterns_table_quotes_the_cost_tables_totals(synthesized):
    """The README's table of patterns gives each pattern's cost per million items: the same totals
    (and the same shapes: items per child, batch size, shards) as the cost page's generated table."""
    import re

    from tools.cost_table import rows

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    quoted = {}
    for line in readme.splitlines():
        link = re.match(r"\| \[(Parallel|Distributed Map|Completion ledger)\]\(", line)
        if link:
            quoted[link.group(1)] = line.rstrip(" |").rsplit("| ", 1)[1]
    assert set(quoted) == {"Parallel", "Distributed Map", "Completion ledger"}, quoted
    computed = dict(zip(("Parallel", "Distributed Map", "Completion ledger"), rows(synthesized("prod"))[:3]))
    for pattern, (what, cost) in computed.items():
        shape = what.split(" (", 1)[1].rstrip(")")
        expected = f"${cost.total_usd:,.2f} ({shape})"
        assert quoted[pattern] == expected, (
            f"README.md, the {pattern} row: {quoted[pattern]!r}, the cost table says {expected!r}; "
            "copy it from docs/cost.md (python -m tools.cost_table)")


def test_the_alternatives_cost_what_their_shape_says(synthesized):
    from tools.cost_table import rows

    by_name = {what.split(" (")[0]: e for what, e in rows(synthesized("prod"))}
    kit = by_name["Map workflow"]
    unbatched = by_name["instead: Map without batching"]
    standard = by_name["instead: one Standard child execution per item"]
    per_item = by_name["instead: one Lambda invocation per item via SQS"]
    million = 1_000_000
    assert unbatched.usage.express_requests == million == per_item.usage.lambda_requests
    assert kit.usage.express_requests == million / kit.shape["items_per_batch"]
    assert standard.usage.express_requests == 0 and standard.usage.transitions >= 2 * million
    assert per_item.usage.dynamodb_write_units == 0  # nothing tracks completion
    assert kit.total_usd < unbatched.total_usd < standard.total_usd


def test_estimate_reads_another_apps_assembly_with_app(capsys, dev_app):
    # a synthesized cloud assembly is an --app; this repository's dev assembly: one item per child
    assert main(["estimate", "--app", str(dev_app.outdir), "--workflow", "map", "--items", "40", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["components"]["express_requests"]["quantity"] == 40


def test_estimate_with_app_defaults_to_the_stacks_one_workflow(capsys, dev_app):
    # --stack picks the Map stack of the assembly; no --workflow: its one workflow, the Map
    stack = dev_app.workflow_stacks["map"]
    assert main(["estimate", "--app", str(dev_app.outdir), "--stack", stack, "--items", "40", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["components"]["express_requests"]["quantity"] == 40
    # several stacks hold a workflow and none is named: one line naming the way out
    assert main(["estimate", "--app", str(dev_app.outdir), "--items", "40"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "several stacks hold a workflow" in err and "--stack NAME" in err


def test_estimate_stack_without_app_is_one_line(capsys):
    assert main(["estimate", "--items", "5", "--stack", "Mine"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--stack NAME goes with --app PATH" in err


def test_a_local_ledger_run_prints_its_measured_cost(dev_app):
    """fanout ledger prints what the run used at list prices, as fanout run does: the consumers'
    invocations, the pollers' and the producer's SQS requests, the ledger's DynamoDB writes."""
    import io

    from rich.console import Console

    from fanout_kit.cli.run_ledger import run_and_print

    out = io.StringIO()
    facts = run_and_print(dev_app, Console(file=out, width=400), children=6, fail=[], concurrency=2, duplicate=False,
                          batch_id="cost-ledger")
    cost = facts["measured_cost"]
    assert facts["ledger_status"] == "COMPLETED"
    assert cost["counts"]["transitions"] == 0  # no Step Functions on the ledger path
    assert cost["counts"]["invocations"] >= 1
    # each child: its transactional mark + counter, and the work record (fanout_kit/patterns/completion_ledger/work_record.py)
    assert cost["components"]["dynamodb_write_units"]["quantity"] >= 4 * 6
    assert cost["components"]["sqs_requests"]["quantity"] >= 1  # the producer's send at least
    assert cost["total_usd"] > 0
    assert facts["measured_cost_line"].startswith("measured cost: $") and facts["measured_cost_line"] in out.getvalue()

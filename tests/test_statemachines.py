"""statemachines/ (each workflow's ASL as it deploys, per environment) and the Mermaid pictures in
the README and the pattern pages are generated from the synthesized templates and kept current."""

import json
import re

from fanout_kit.local.template import deployed_definitions, state_machine_definitions
from fanout_kit.shared.asl_graph import iter_states
from tests.conftest import ENVIRONMENTS
from tools.mermaid import retries, to_mermaid
from tools.workflows import PICTURES, ROOT, STATEMACHINES, WORKFLOWS, pictures, stale


def test_the_rendered_asl_and_the_pictures_are_current(synthesized):
    apps = {env_name: synthesized(env_name) for env_name in ENVIRONMENTS}
    assert [str(p.relative_to(ROOT)) for p in stale(apps)] == [], "run .venv/bin/python -m tools.workflows"
    assert {p.relative_to(STATEMACHINES).as_posix() for p in STATEMACHINES.rglob("*.asl.json")} == {
        f"{env}/{wf}.asl.json" for env in ENVIRONMENTS for wf in WORKFLOWS}


def test_the_rendered_asl_is_the_definition_that_runs_locally(synthesized):
    """Replacing each ${...} placeholder by the local stand-in gives the ASL the engine runs."""
    from fanout_kit.local.template import local_names, make_resolver

    for env_name in ENVIRONMENTS:
        app = synthesized(env_name)
        for workflow in WORKFLOWS:
            template = app.template(workflow)
            refs, attrs = local_names(template, app.region)
            local = make_resolver(refs, attrs, app.region)
            text = (STATEMACHINES / env_name / f"{workflow}.asl.json").read_text()
            assert "arn:aws:" not in text and "123456789012" not in text  # nothing resolved to a local name

            def stand_in(m):
                name = m.group(1)
                if name.startswith("AWS::"):
                    return str(local({"Ref": name}))
                lid, _, attr = name.partition(".")
                return str(local({"Fn::GetAtt": [lid, attr]} if attr else {"Ref": lid}))

            assert json.loads(re.sub(r"\$\{([^}]+)\}", stand_in, text)) == \
                next(iter(state_machine_definitions(template, app.region).values()))


def test_every_state_and_every_transition_is_drawn(dev_app):
    drawn = pictures(dev_app)
    for workflow in WORKFLOWS:
        (asl,) = deployed_definitions(dev_app.template(workflow)).values()
        block = drawn[workflow]
        for _, name, state in iter_states(asl):
            assert f'"{name}"' in block or f'"{name}<br/>' in block or f'"{name} (' in block, name
        transitions = sum(("Next" in s) + len(s.get("Choices", [])) + ("Default" in s)
                          + len({c["Next"] for c in s.get("Catch", [])}) for _, _, s in iter_states(asl))
        ends = sum(bool(s.get("End")) for s in asl["States"].values())
        assert len(re.findall(r" (-->|-\.->)", block)) == transitions + ends


def test_retries_catches_and_the_success_end(dev_app):
    (asl,) = deployed_definitions(dev_app.template("parallel")).values()
    block = to_mermaid(asl)
    # ChargePayment's RetryableTaskError rule has MaxAttempts 4 (cdk.json), the other tasks 3
    branch = next(b for b in asl["States"]["RunTasks"]["Branches"] if "Run ChargePayment" in b["States"])
    assert retries(branch["States"]["Run ChargePayment"]) == 4
    assert block.count('Run ChargePayment<br/>up to 4 retries"') == 1
    assert block.count("up to 3 retries") == 2
    # every Catch edge is dashed and styled red: linkStyle lists exactly the dashed edges' indices
    edges = re.findall(r" (-->|-\.->)", block)
    dashed = [str(i) for i, arrow in enumerate(edges) if arrow == "-.->"]
    assert dashed and f"linkStyle {','.join(dashed)} stroke:#dc2626" in block
    # one green end, after each top-level End state: UpdateFinalStatus, and AlreadyFinalized (a
    # duplicate start of a batch already final)
    assert sorted(re.findall(r"(\w+) --> succeeded", block)) == ["AlreadyFinalized", "UpdateFinalStatus"]
    assert block.count('succeeded(("succeeded"))') == 1
    assert "class succeeded succeeded" in block


def test_node_ids_are_unique_and_labels_escaped():
    asl = {"StartAt": 'A "q" <b>', "States": {
        'A "q" <b>': {"Type": "Pass", "Next": "A  q   b"},
        "A  q   b": {"Type": "Task", "Resource": "x", "Retry": [{"ErrorEquals": ["E"], "MaxAttempts": 1}],
                     "End": True}}}
    block = to_mermaid(asl)  # both names give the id A__q___b: the second one is made unique
    assert 'A__q___b["A #quot;q#quot; #lt;b#gt;"]' in block and "<b>" not in block
    assert 'A__q___b_["A  q   b<br/>up to 1 retry"]' in block
    assert "A__q___b --> A__q___b_" in block and "A__q___b_ --> succeeded" in block


def test_each_page_shows_its_workflow_picture():
    for page, workflows in PICTURES.items():
        text = (ROOT / page).read_text()
        for workflow in workflows:
            assert re.search(rf"<!-- workflow-graph:{workflow} -->\n```mermaid\nflowchart TD\n", text), page

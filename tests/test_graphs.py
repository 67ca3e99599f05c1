"""The README's state machine pictures are generated from the synthesized ASL and kept current."""

from fanout.graphs import DOCS, render


def test_committed_pictures_match_the_synthesized_definitions(dev_app):
    for name, svg in render(dev_app).items():
        path = DOCS / name
        assert path.exists(), f"missing {path}: run .venv/bin/python -m fanout.graphs"
        assert path.read_text() == svg, f"{path} is out of date: run .venv/bin/python -m fanout.graphs"


def test_every_state_is_drawn(dev_app):
    from fanout.local.template import state_machine_definitions
    from statemachines.asl_graph import iter_states

    pictures = render(dev_app)
    for workflow in ("parallel", "map"):
        (asl,) = state_machine_definitions(dev_app.template(workflow), dev_app.region).values()
        svg = pictures[f"{workflow}-workflow.svg"]
        for _, name, _ in iter_states(asl):
            assert f">{name}<" in svg or f">{name} (" in svg, name

"""The state machine pictures (docs/*.svg, shown on the pattern pages and one in the README) are generated
from the synthesized ASL and kept current."""

from tools.graphs import DOCS, render


def test_committed_pictures_match_the_synthesized_definitions(dev_app):
    for name, svg in render(dev_app).items():
        path = DOCS / name
        assert path.exists(), f"missing {path}: run .venv/bin/python -m tools.graphs"
        assert path.read_text() == svg, f"{path} is out of date: run .venv/bin/python -m tools.graphs"


def test_each_picture_is_shown_on_its_pattern_page(dev_app):
    pages = {"parallel-workflow.svg": "patterns/parallel.md", "map-workflow.svg": "patterns/distributed-map.md"}
    assert set(render(dev_app)) == set(pages)
    for picture, page in pages.items():
        assert f"](../{picture})" in (DOCS / page).read_text(), f"docs/{page} does not show {picture}"


def test_every_state_is_drawn(dev_app):
    from fanout_kit.local.template import state_machine_definitions
    from fanout_kit.shared.asl_graph import iter_states

    pictures = render(dev_app)
    for workflow in ("parallel", "map"):
        (asl,) = state_machine_definitions(dev_app.template(workflow), dev_app.region).values()
        svg = pictures[f"{workflow}-workflow.svg"]
        for _, name, _ in iter_states(asl):
            assert f">{name}<" in svg or f">{name} (" in svg, name


def test_pictures_fit_the_readme_at_full_size(dev_app):
    """GitHub shows README images at most ~880 px wide: drawn no wider, the 13 px text is not shrunk."""
    import re

    for name, svg in render(dev_app).items():
        width = int(re.search(r'<svg [^>]*width="(\d+)"', svg).group(1))
        assert width <= 880, (name, width)
        assert 'font-size="13"' in svg.splitlines()[0]


def test_retries_next_plus_catch_and_the_success_end_are_drawn(dev_app):
    from fanout_kit.local.template import state_machine_definitions
    from tools.graph_svg import retries, to_svg

    (asl,) = state_machine_definitions(dev_app.template("parallel"), dev_app.region).values()
    svg = to_svg(asl, "t")
    # ChargePayment's RetryableTaskError rule has MaxAttempts 4 (cdk.json), the others 3
    branch = next(b for b in asl["States"]["RunTasks"]["Branches"] if "Run ChargePayment" in b["States"])
    assert retries(branch["States"]["Run ChargePayment"]) == 4
    assert svg.count(">up to 4 retries<") == 1 and svg.count(">up to 3 retries<") == 2
    # RecordBatchFailure -> BatchFailed is its Next and its Catch: a grey and a red line, one label
    assert svg.count(">next + catch<") == 1
    assert svg.count('marker-end="url(#arrow-red)"') == svg.count('stroke="#dc2626" stroke-width="1.3"')
    # a green end after UpdateFinalStatus (the only top-level End state)
    assert svg.count("<title>succeeded</title>") == 1 and 'stroke="#15803d"' in svg

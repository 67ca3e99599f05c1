"""Snapshot of every synthesized template, per environment (review their diffs in PRs).

Update after an intended change with: ``.venv/bin/python -m pytest tests/test_snapshots.py --snapshot-update``.
"""

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from tests.conftest import ENVIRONMENTS
from tests.templates import normalized


@pytest.fixture
def snapshot_json(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
def test_templates_match_snapshot(synthesized, env_name, snapshot_json):
    app = synthesized(env_name)
    for stack_name in sorted(app.templates):
        assert normalized(app.templates[stack_name]) == snapshot_json(name=stack_name)


def test_normalization_only_touches_asset_hashes(dev_app):
    template = dev_app.template("parallel")
    raw, norm = str(template), str(normalized(template))
    assert "<asset-hash>.zip" in norm and "<asset-hash>" not in raw
    assert len(raw) - len(norm) == raw.count(".zip") * (64 - len("<asset-hash>"))

"""`fanout run` reuses one synth per environment while the app's inputs are unchanged, and leaves
nothing in the temporary directory (issue 11: one 832 KB folder per run before)."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path

import pytest

import fanout_kit.local.template as template
import stacks.config
from fanout_kit.shared import app_config


@pytest.fixture
def kit(tmp_path, monkeypatch, dev_app):
    """A copy of the app's inputs as the kit root, and a stand-in synth (a copy of the session's
    real one) that counts its calls."""
    root = tmp_path / "kit"
    for name in template.APP_INPUTS:
        src = stacks.config.ROOT / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            root.mkdir(exist_ok=True)
            shutil.copy(src, root / name)
    monkeypatch.setattr(app_config, "app_root", lambda: root)  # the app folder the kit synthesizes
    calls = []

    def fake_synth(env_name, out):
        calls.append(env_name)
        shutil.copytree(dev_app.outdir, out, dirs_exist_ok=True)
        return dataclasses.replace(dev_app, outdir=out)

    monkeypatch.setattr(template, "_synth", fake_synth)
    return root, calls


def test_second_run_reuses_the_synth_with_the_same_templates(kit, dev_app):
    root, calls = kit
    before = set(Path(tempfile.gettempdir()).glob("fanout-cdk-out-*"))
    first = template.synthesize("dev")
    second = template.synthesize("dev")
    assert calls == ["dev"]
    assert (first.cached, second.cached) == (False, True)
    assert second.outdir == first.outdir and second.outdir.parent == root / ".fanout-cache" / "synth"
    assert second.templates == dev_app.templates
    assert second.workflow_stacks == dev_app.workflow_stacks and second.region == dev_app.region
    after = set(Path(tempfile.gettempdir()).glob("fanout-cdk-out-*"))
    assert after == before  # nothing left in the temporary directory
    assert [p.name for p in (root / ".fanout-cache" / "synth").iterdir()] == [first.outdir.name]


@pytest.mark.parametrize("changed", ["cdk.json", "app.py", "stacks/config.py", "fanout_kit/shared/states.py",
                                     "fanout_kit/patterns/completion_ledger/runtime.py", "lambdas/tasks/handler.py"])
def test_a_changed_input_synthesizes_again_and_replaces_the_old_folder(kit, changed):
    root, calls = kit
    first = template.synthesize("dev")
    with (root / changed).open("a") as f:
        f.write("\n")
    again = template.synthesize("dev")
    assert calls == ["dev", "dev"] and not again.cached
    assert again.outdir != first.outdir and not first.outdir.exists()
    assert [p.name for p in (root / ".fanout-cache" / "synth").iterdir()] == [again.outdir.name]


def test_bytecode_and_other_environments_do_not_invalidate(kit):
    root, calls = kit
    key = template.app_inputs_key("dev", root)
    (root / "lambdas" / "__pycache__").mkdir(exist_ok=True)
    (root / "lambdas" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert template.app_inputs_key("dev", root) == key
    assert template.app_inputs_key("prod", root) != key

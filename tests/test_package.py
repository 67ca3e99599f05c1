"""The package a team installs (issue 21 §4): the kit's Lambda assets hold what their handlers
import and nothing else (no example tasks), and every module has one import name under the kit's
namespace."""

from __future__ import annotations

import ast

import modulefinder
import tomllib
from pathlib import Path

import pytest

from fanout_kit.shared.assets import KIT_HANDLERS, kit_handler_file, module_closure
from tests.conftest import ROOT

KIT_PREFIXES = ("fanout_kit", "fanout_runtime")


def function_assets(app) -> list[tuple[str, str, Path]]:
    """(stack, handler, code asset folder) of every Python function of the synthesized app."""
    found = []
    for stack, template in app.templates.items():
        for resource in template["Resources"].values():
            props = resource.get("Properties", {})
            if resource["Type"] != "AWS::Lambda::Function" or not str(props.get("Runtime", "")).startswith("python"):
                continue
            key = props["Code"]["S3Key"].removesuffix(".zip")
            found.append((stack, props["Handler"], app.outdir / f"asset.{key}"))
    return found


def files_of(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def imported_closure(asset: Path, handler_module: str) -> tuple[set[str], set[str]]:
    """What the handler loads from its asset (modulefinder, the standard library's own import
    walker, with only the asset on its path): (files found, kit modules it imports but the asset
    lacks)."""
    finder = modulefinder.ModuleFinder(path=[str(asset)])
    finder.run_script(str(asset / f"{handler_module.replace('.', '/')}.py"))
    found = {Path(m.__file__).relative_to(asset).as_posix() for m in finder.modules.values()
             if m.__file__ and Path(m.__file__).is_relative_to(asset)}
    missing, _maybe = finder.any_missing_maybe()
    return found, {name for name in missing if name.split(".")[0] in KIT_PREFIXES}


def test_each_kit_function_asset_holds_exactly_what_its_handler_imports(dev_app):
    kit = [(stack, handler, asset) for stack, handler, asset in function_assets(dev_app)
           if handler.rpartition(".")[0] in KIT_HANDLERS]
    assert {h.rpartition(".")[0] for _, h, _ in kit} == set(KIT_HANDLERS)  # every kit handler is deployed
    for stack, handler, asset in kit:
        module = handler.rpartition(".")[0]
        shipped = files_of(asset)
        loaded, missing = imported_closure(asset, module)
        assert missing == set(), f"{stack} {handler}: imports what its asset lacks"
        # modulefinder lists the handler as __main__ (run_script); the rest by name
        assert shipped == loaded | {f"{module}.py"}, f"{stack} {handler}: {sorted(shipped ^ (loaded | {f'{module}.py'}))}"
        assert not any(f.startswith("tasks/") or f in ("map_item_worker.py", "ledger_child_work.py") for f in shipped)
        assert "fanout_kit/__init__.py" in shipped and "fanout_kit/_version.py" in shipped
        assert not any(f.startswith(("fanout_kit/local", "fanout_kit/cli", "fanout_kit/ops", "stacks"))
                       for f in shipped)


def test_the_apps_functions_hold_their_own_code_and_none_of_the_kits_handlers(dev_app):
    app = [(stack, handler, asset) for stack, handler, asset in function_assets(dev_app)
           if handler.split(".")[0] in ("tasks", "map_item_worker", "ledger_child_work")]
    assert len(app) == 5  # three tasks, the Map worker and the ledger's processing function
    for stack, handler, asset in app:
        shipped = files_of(asset)
        module = handler.rpartition(".")[0]
        assert f"{module.replace('.', '/')}.py" in shipped
        assert not shipped & {f"{h}.py" for h in KIT_HANDLERS}, f"{stack} {handler}"
        # only the app's own code: fanout_runtime comes from the runtime layer the constructs
        # attach (fanout_kit.shared.layer), Powertools from its layer
        assert all(f.startswith("tasks/") or f in ("map_item_worker.py", "ledger_child_work.py")
                   for f in shipped), f"{stack} {handler}: {shipped}"
        loaded, _ = imported_closure(asset, module)
        assert shipped == loaded | {f"{module.replace('.', '/')}.py"}, f"{stack} {handler}: {sorted(shipped)}"


def test_the_closure_follows_relative_imports_and_parent_packages(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("from pkg._v import V\n")
    (tmp_path / "pkg" / "_v.py").write_text("V = 1\n")
    (tmp_path / "pkg" / "unused.py").write_text("")
    (tmp_path / "pkg" / "sub" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "sub" / "a.py").write_text("from . import b\nfrom typing import TYPE_CHECKING\n"
                                                   "if TYPE_CHECKING:\n    import pkg.unused\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("import json\ndef f():\n    from ..sub import c\n")
    (tmp_path / "pkg" / "sub" / "c.py").write_text("")
    (tmp_path / "handlers").mkdir()
    (tmp_path / "handlers" / "h.py").write_text("from pkg.sub.a import b\n")
    closure = module_closure(["h"], tmp_path / "handlers", {"pkg": tmp_path})
    assert list(closure) == ["h.py", "pkg/__init__.py", "pkg/_v.py", "pkg/sub/__init__.py", "pkg/sub/a.py",
                             "pkg/sub/b.py", "pkg/sub/c.py"]
    with pytest.raises(FileNotFoundError, match="'nope' not found"):
        module_closure(["nope"], tmp_path / "handlers", {"pkg": tmp_path})


def test_the_wheel_is_the_source_tree():
    """pyproject maps no file to another place: the wheel's packages are the source folders, the
    sdist holds them once, and every kit handler lives in the kit, next to its pattern."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]
    assert config["wheel"]["packages"] == ["fanout_kit", "fanout_runtime"]
    assert "force-include" not in config["wheel"] and "force-include" not in config.get("sdist", {})
    assert {"fanout_kit", "fanout_runtime"} <= set(config["sdist"]["only-include"])
    for name, module in KIT_HANDLERS.items():
        path = kit_handler_file(name)
        assert path.is_relative_to(ROOT / "fanout_kit") and path.stem == name, name
        assert ".handlers." in module, f"{name}: a kit handler lives in a handlers/ folder"
    assert {p.stem for p in (ROOT / "lambdas").glob("*.py")} == {"map_item_worker", "ledger_child_work"}  # the app's only


def test_the_kits_handlers_import_by_absolute_names():
    """A kit handler runs as the top-level module its Handler names (``prepare_map_batch`` in
    /var/task), not as its module in the kit: a relative import in it would fail on AWS."""
    relative = [f"{name}: line {node.lineno}" for name in KIT_HANDLERS
                for node in ast.walk(ast.parse(kit_handler_file(name).read_text()))
                if isinstance(node, ast.ImportFrom) and node.level]
    assert relative == []

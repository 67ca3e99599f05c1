"""The wheel and the sdist, built from this repository offline, installed into clean venvs (issue
21 §4): the installed files are the kit's two import packages and nothing else; ``fanout
--version``, ``import fanout_kit`` and a tiny app using each construct work from the install; the
former top-level names are not importable.

Offline: the artifacts are built with the venv's pinned hatchling (``pip wheel --no-build-isolation``
and hatchling's PEP 517 ``build_sdist``) and installed with ``pip install --no-index --no-deps``.
The kit's dependencies (aws-cdk-lib, constructs, cdk-nag, jsii...) have no wheels on this machine
(pip's cache holds none, and there is no wheelhouse), so the clean venv reaches them through one
``.pth`` line naming this venv's site-packages: a path, not a site dir, so the editable install's
``_fanout_kit.pth`` there (which puts this repository on the path) is not read.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from fanout_kit._version import __version__
from fanout_kit.shared.assets import KIT_HANDLERS
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # two venvs, two builds, two synths: about a minute

TINY_APP = textwrap.dedent('''\
    from pathlib import Path

    from aws_cdk import App, Duration, Stack
    from aws_cdk import aws_lambda as lambda_

    from fanout_kit import CompletionLedger, DistributedMapFanOut, FanOutTask, ParallelFanOut

    app = App(outdir=str(Path(__file__).parent / "cdk.out"))
    stack = Stack(app, "Tiny")


    def function(name):
        return lambda_.Function(stack, name, runtime=lambda_.Runtime.PYTHON_3_13, handler="work.handler",
                                code=lambda_.Code.from_inline("def handler(e, c): return {}"),
                                timeout=Duration.seconds(10))


    ParallelFanOut(stack, "Orders", tasks=[FanOutTask("A", function("A")), FanOutTask("B", function("B"))])
    DistributedMapFanOut(stack, "Items", worker=FanOutTask("Item", function("Item")))
    CompletionLedger(stack, "Ledger", processing_function=function("Process"))
    app.synth()
    ''')
FORMER_NAMES = ("statemachines", "fanout_common", "fanout")  # namespace-move: keep


def run(args, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs)
    assert done.returncode == 0, f"{args}: {done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    """The wheel and the sdist, built from this checkout offline; (folder, wheel, sdist, seconds)."""
    dist = tmp_path_factory.mktemp("dist")
    began = time.perf_counter()
    run([sys.executable, "-m", "pip", "wheel", "--no-index", "--no-deps", "--no-build-isolation", "-q", "-w", dist, ROOT])
    run([sys.executable, "-c", f"from hatchling.build import build_sdist; build_sdist({str(dist)!r})"], cwd=ROOT)
    (wheel,) = dist.glob("fanout_kit-*.whl")
    (sdist,) = dist.glob("fanout_kit-*.tar.gz")
    return dist, wheel, sdist, time.perf_counter() - began


def clean_venv(where: Path, artifact: Path) -> tuple[Path, float]:
    """A new venv with the kit installed from ``artifact`` (offline); its dependencies from this
    venv's site-packages (module docstring). Returns (the venv's python, seconds)."""
    began = time.perf_counter()
    run([sys.executable, "-m", "venv", "--without-pip", where])
    python = where / "bin" / "python"
    purelib = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (purelib / "zz-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps", "--no-build-isolation",
         "-q", artifact])
    return python, time.perf_counter() - began


def installed_files(python: Path) -> list[str]:
    """The kit's installed files, from its dist-info RECORD (paths relative to site-packages),
    without the bytecode pip compiles at install."""
    program = ("import importlib.metadata as m; d = m.distribution('fanout-kit');"
               "print('\\n'.join(str(f) for f in d.files))")
    return sorted(f for f in run([python, "-c", program]).stdout.split() if "/__pycache__/" not in f)


def check_install(python: Path, work: Path) -> None:
    env = {"PATH": f"{python.parent}:{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(work)}
    files = installed_files(python)
    tops = {f.split("/")[0] for f in files}
    assert tops == {"fanout_kit", "fanout_runtime", f"fanout_kit-{__version__}.dist-info", ".."}, tops
    assert [f for f in files if f.startswith("..")] == ["../../../bin/fanout"]  # the console script
    # the source tree as it is: each kit handler in its pattern's folder, nothing mapped elsewhere
    assert {f"{m.replace('.', '/')}.py" for m in KIT_HANDLERS.values()} <= set(files)
    assert not any(f.startswith("fanout_kit/lambdas/") for f in files)
    assert "fanout_kit/patterns/parallel/definition.py" in files and "fanout_kit/patterns/completion_ledger/runtime.py" in files

    version = run([python.parent / "fanout", "--version"], env=env, cwd=work).stdout.strip()
    assert version == f"fanout {__version__}"
    where = run([python, "-c", "import fanout_kit; from fanout_kit import DistributedMapFanOut;"
                 "print(fanout_kit.__file__, DistributedMapFanOut.__name__)"], env=env, cwd=work).stdout.split()
    assert where[0].startswith(str(python.parent.parent)) and where[1] == "DistributedMapFanOut"
    for name in FORMER_NAMES:
        gone = subprocess.run([python, "-c", f"import {name}"], capture_output=True, text=True, env=env, cwd=work)
        assert gone.returncode == 1 and "ModuleNotFoundError" in gone.stderr, name

    app = work / "tiny"
    app.mkdir()
    (app / "app.py").write_text(TINY_APP)
    run([python, "app.py"], env=env, cwd=app)
    template = json.loads((app / "cdk.out" / "Tiny.template.json").read_text())
    machines = [r for r in template["Resources"].values() if r["Type"] == "AWS::StepFunctions::StateMachine"]
    assert len(machines) == 2  # the Parallel and the Map workflow (the ledger has none: its consumers below)
    handlers = {r["Properties"]["Handler"] for r in template["Resources"].values()
                if r["Type"] == "AWS::Lambda::Function" and "Handler" in r["Properties"]}
    assert {"validate_input.handler", "prepare_map_batch.handler", "ledger_sqs_consumer.handler"} <= handlers


def test_the_wheel_holds_the_two_import_packages_and_its_metadata(artifacts):
    _, wheel, _, _ = artifacts
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"fanout_kit", "fanout_runtime", f"fanout_kit-{__version__}.dist-info"}
    assert not any(n.startswith(("fanout_kit/lambdas/", "tasks/", "map_item_worker")) for n in names)  # not the app's
    assert "fanout_kit/py.typed" in names  # PEP 561: the constructs' type hints are for type checkers too
    metadata = zipfile.ZipFile(wheel).read(f"fanout_kit-{__version__}.dist-info/METADATA").decode()
    for line in ("Requires-Python: >=3.11", "License-Expression: Apache-2.0", "Requires-Dist: aws-cdk-lib<3,>=2.275.0",
                 "Classifier: Framework :: AWS CDK :: 2", "Classifier: Programming Language :: Python :: 3.13",
                 "Classifier: Typing :: Typed", "Provides-Extra: local"):
        assert line in metadata.splitlines(), line
    entry_points = zipfile.ZipFile(wheel).read(f"fanout_kit-{__version__}.dist-info/entry_points.txt").decode()
    assert "fanout = fanout_kit.cli.main:console_main" in entry_points
    assert "fanout = fanout_kit.pytest_plugin" in entry_points


def test_the_sdist_holds_the_sources_of_the_wheel_and_not_the_app(artifacts):
    _, _, sdist, _ = artifacts
    names = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
    assert {"pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "PKG-INFO", "fanout_kit/shared/states.py",
            "fanout_kit/__init__.py", "fanout_runtime/errors.py", "fanout_kit/patterns/parallel/handlers/validate_input.py"} <= names
    assert not any(n.startswith(("tests/", "stacks/", "lambdas/", "statemachines/", "benchmarks/", "tools/"))
                   for n in names)
    assert "app.py" not in names and "lambdas/map_item_worker.py" not in names


def test_the_wheel_installs_offline_into_a_clean_venv(artifacts, tmp_path):
    _, wheel, _, built = artifacts
    python, seconds = clean_venv(tmp_path / "venv", wheel)
    check_install(python, tmp_path)
    print(f"build {built:.1f} s, wheel install {seconds:.1f} s")


def test_the_sdist_installs_offline_into_a_clean_venv(artifacts, tmp_path):
    """pip builds the wheel from the sdist (hatchling, no network) and installs it."""
    _, _, sdist, _ = artifacts
    python, seconds = clean_venv(tmp_path / "venv", sdist)
    check_install(python, tmp_path)
    print(f"sdist build+install {seconds:.1f} s")

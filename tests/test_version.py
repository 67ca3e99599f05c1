"""One version number: fanout_kit/_version.py is what ``fanout --version`` prints, what the built
wheel's metadata says and what CHANGELOG.md has a section for; the package metadata a team needs
to depend on the kit (license, Python and CDK versions, classifiers) is in the wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import fanout_kit
from fanout_kit._version import __version__

ROOT = Path(__file__).resolve().parents[1]
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


@pytest.fixture(scope="module")
def wheel_metadata(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-index", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("fanout_kit-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(archive.read(metadata_name).decode())
    return wheel, names, metadata


def test_the_version_is_semantic_and_exported():
    assert SEMVER.match(__version__), __version__
    assert fanout_kit.__version__ == __version__


def test_fanout_version_prints_the_kit_version():
    done = subprocess.run([sys.executable, "-m", "fanout_kit", "--version"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"fanout {__version__}"


def test_the_wheel_carries_the_same_version(wheel_metadata):
    wheel, _, metadata = wheel_metadata
    assert metadata["Version"] == __version__
    assert wheel.name.startswith(f"fanout_kit-{__version__}-")


def test_the_wheel_metadata_is_complete(wheel_metadata):
    _, names, metadata = wheel_metadata
    assert metadata["License-Expression"] == "Apache-2.0"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert metadata["Requires-Python"] == ">=3.11"
    requires = metadata.get_all("Requires-Dist")
    assert any(r.startswith("aws-cdk-lib") and "<3" in r and ">=2." in r for r in requires), requires
    classifiers = metadata.get_all("Classifier")
    assert "Framework :: AWS CDK :: 2" in classifiers
    assert "Programming Language :: Python :: 3.11" in classifiers
    assert metadata["Summary"]


def test_the_changelog_has_a_section_for_this_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, flags=re.MULTILINE)
    names = [name for name, _ in sections]
    assert names[0] == "Unreleased", names
    assert __version__ in names, f"CHANGELOG.md has no '## [{__version__}] - DATE' section"
    released = [tuple(int(p) for p in name.split(".")) for name in names[1:]]
    assert released == sorted(released, reverse=True), "newest version first"
    assert all(date for name, date in sections[1:]), "every released version has a date"

"""The kit's one version number (semantic versioning: docs/compatibility.md).

pyproject.toml reads it for the wheel's metadata (hatch's version source), ``fanout --version``
prints it and the documentation shows it; CHANGELOG.md has a section for it.
"""

__version__ = "0.14.0"

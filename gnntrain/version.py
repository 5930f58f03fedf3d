"""The package version, set in one place: ``pyproject.toml``'s ``[project] version``.

An installed wheel reads it from its own metadata (:func:`importlib.metadata.version`).
A source checkout reads ``pyproject.toml`` itself whenever the file sits beside the
package, even when the checkout is also installed in editable mode: an editable install's
metadata is a copy taken at install time and goes stale when the version changes without
a reinstall, while ``pyproject.toml`` is always the checkout's own. Loads no third-party
package (``import gnntrain`` stays light).
"""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

DIST_NAME = "gnntrain"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def source_version(pyproject: Path) -> str | None:
    """``[project] version`` of ``pyproject`` when it is gnntrain's own, else ``None``."""
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return None
    if project.get("name") != DIST_NAME or not isinstance(project.get("version"), str):
        return None
    return str(project["version"])


def package_version() -> str:
    """The version of the running gnntrain: the source checkout's ``pyproject.toml``, else
    the installed distribution's metadata, else ``"0+unknown"`` (neither exists)."""
    found = source_version(PYPROJECT)
    if found is not None:
        return found
    try:
        return version(DIST_NAME)
    except PackageNotFoundError:
        return "0+unknown"

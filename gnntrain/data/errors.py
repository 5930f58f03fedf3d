"""The loader error type.

:class:`DataError` is raised for anything wrong with a dataset on disk or in memory: a
missing file (the message names the path and the layout expected there), a file that
does not parse (path, line and what was found), or arrays that break the contract of
:class:`~partition.graph.Graph` (which field, the value seen and what is allowed).
It is a ``ValueError``, so callers that treat bad user input alike need no new clause.
"""

from __future__ import annotations

from pathlib import Path


class DataError(ValueError):
    """A dataset source is missing, malformed or inconsistent; the message says which."""


def require_file(path: Path, what: str, layout: str) -> Path:
    """Return ``path`` if it is a file, else raise naming it, ``what`` it is and the layout."""
    if not path.is_file():
        state = "is a directory" if path.is_dir() else "does not exist"
        raise DataError(f"{what}: {path} {state}; expected {layout}")
    return path


def require_dir(path: Path, what: str, layout: str) -> Path:
    """Return ``path`` if it is a directory, else raise naming it and the layout expected."""
    if not path.is_dir():
        state = "is a file, not a directory" if path.exists() else "does not exist"
        raise DataError(f"{what}: {path} {state}; expected {layout}")
    return path

"""Names that become paths: one safe path component each, joined under their root.

A dataset name becomes a run directory (``<train.run_root>/<name>-<stamp>``) and part of
a partition set's directory name; ``meta.json`` names the files of a set. None of them
may leave its root: a name is one path component -- not empty, not ``.`` or ``..``, no
``/``, ``\\`` or NUL -- and a joined path must resolve inside the root.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MAX_NAME", "check_component", "join_under"]

MAX_NAME = 200  # leaves room for the "-<stamp>-N" / "-<method>-k<k>-<key>" suffixes in 255 bytes


def check_component(field: str, value: str) -> str:
    """Return ``value`` if it is one safe path component; else raise ``ValueError`` naming
    ``field``, the value and what is allowed."""
    why = None
    if not value:
        why = "it is empty"
    elif value in (".", ".."):
        why = f"{value!r} refers to a directory, not a name in it"
    elif "\x00" in value:
        why = "it contains a NUL byte"
    elif "/" in value or "\\" in value:
        why = "it contains a path separator"
    elif len(value.encode()) > MAX_NAME:
        why = f"it is longer than {MAX_NAME} bytes"
    if why is not None:
        raise ValueError(f"{field}={value!r}: {why}; it becomes a directory name, so give one "
                         "path component (letters, digits, '-', '_', '.'; no '/', '\\', NUL, "
                         "'.' or '..')")
    return value


def join_under(root: str | Path, rel: str, field: str) -> Path:
    """``root / rel``, refusing a ``rel`` that is absolute, holds ``..``, NUL or a
    backslash, or resolves (through symlinks) outside ``root``."""
    parts = rel.split("/")
    for part in parts:
        check_component(field, part)
    root = Path(root)
    path = root.joinpath(*parts)
    if not path.resolve().is_relative_to(root.resolve()):
        raise ValueError(f"{field}={rel!r}: resolves to {path.resolve()}, outside {root.resolve()}")
    return path

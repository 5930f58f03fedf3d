"""Where a dataset file is: :func:`resolve_path` (relative paths under the data root).

A leaf of ``gnntrain.data``: every loader imports it, and it imports none of them.
"""

from __future__ import annotations

import os
from pathlib import Path

from gnntrain.config import DATA_ENV, data_root
from gnntrain.data.errors import DataError

__all__ = ["resolve_path"]


def resolve_path(path: str | Path, root: Path | None = None, *, field: str = "dataset.path") -> Path:
    """``path`` itself if absolute (``~`` expanded), else ``root`` (default: data root) / path.

    A relative path that does not exist under the root fails here, naming the resolved
    path and where the root came from, so a job that runs elsewhere (a Ray cluster, a
    fresh machine) says how to point it at its data.
    """
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    base = root or data_root()
    full = base / p
    if root is None and not full.exists():
        env = os.environ.get(DATA_ENV)
        how = (f"${DATA_ENV}={env}" if env else
               f"${DATA_ENV} is unset, so the default data root {base} is used")
        raise DataError(f"{field}={str(path)!r} resolves to {full}, which does not exist "
                        f"({how}); set {DATA_ENV} to the folder holding the datasets or give "
                        "an absolute path")
    return full

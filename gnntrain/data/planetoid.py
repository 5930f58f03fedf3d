"""Planetoid citation graphs (Cora, CiteSeer, PubMed) from their raw pickle files.

Layout (PyG's; ``dataset.path`` is either the root or the dataset folder itself)::

    <path>/                     dataset.path, with dataset.planetoid_name: Cora
    └── Cora/
        └── raw/ind.cora.{x,tx,allx,y,ty,ally,graph,test.index}

The graph comes with the public Planetoid split (20 labels per class for training,
500 validation, 1000 test). The raw files are read with PyG's own reader,
``torch_geometric.io.read_planetoid_data`` -- the function
``torch_geometric.datasets.Planetoid`` runs in its ``process()`` step -- so the result
equals ``Planetoid(root, name)[0]`` (a test checks this on a copy), but nothing is
written: ``Planetoid`` would create ``processed/`` next to ``raw/``, and the dataset
store must stay read-only (file permissions do not stop a process running as root).

The raw files are Python pickles, and unpickling can run code. Each file is first read
by an unpickler that builds only what Planetoid files hold (lists, ``defaultdict``,
numpy arrays, scipy CSR matrices); any other object is refused with :class:`DataError`
before PyG's reader sees the file.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from gnntrain.data.build import RawGraph
from gnntrain.data.convert import raw_from_pyg
from gnntrain.data.errors import DataError, require_dir

_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
LAYOUT = "<path>/<Name>/raw/ind.<name>.{" + ",".join(_PARTS) + "} (PyG's Planetoid layout)"


def locate(path: Path, name: str | None) -> tuple[Path, str]:
    """(root, Name) such that ``root/Name/raw`` holds the raw files; raise if it does not."""
    require_dir(path, "planetoid dataset.path", LAYOUT)
    if name is not None and (path / name / "raw").is_dir():
        root = path
    elif (path / "raw").is_dir():
        root, name = path.parent, name or path.name
    else:
        have = sorted(p.name for p in path.iterdir() if (p / "raw").is_dir())
        raise DataError(f"planetoid: no {name or '<Name>'}/raw folder under {path} "
                        f"(dataset folders found: {have or 'none'}); expected {LAYOUT} "
                        "with dataset.planetoid_name naming the folder")
    raw_dir = root / name / "raw"
    prefix = name.lower()
    missing = [f"ind.{prefix}.{p}" for p in _PARTS if not (raw_dir / f"ind.{prefix}.{p}").is_file()]
    if missing:
        raise DataError(f"planetoid: {raw_dir} lacks {', '.join(missing)}; expected {LAYOUT}")
    return root, name


# (module, name) of every object the published Planetoid pickles build
_GLOBALS = frozenset({
    ("builtins", "list"), ("__builtin__", "list"), ("collections", "defaultdict"), ("numpy", "dtype"), ("numpy", "ndarray"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("scipy.sparse.csr", "csr_matrix"), ("scipy.sparse._csr", "csr_matrix"),
})


class _RawUnpickler(pickle.Unpickler):
    """Unpickles only the objects in ``_GLOBALS``; anything else raises before it is built."""

    path = ""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _GLOBALS:
            raise DataError(f"planetoid: {self.path} asks to build {module}.{name}, which no "
                            "Planetoid file holds (only lists, dicts, numpy arrays and scipy CSR "
                            "matrices); refusing to read it: it was altered or is not a Planetoid file")
        return super().find_class(module, name)


def check_raw_pickles(raw_dir: Path, name: str) -> None:
    """Read every pickled raw file of ``name`` with :class:`_RawUnpickler` (see module doc)."""
    for part in _PARTS:
        if part == "test.index":  # a text file
            continue
        path = raw_dir / f"ind.{name.lower()}.{part}"
        with path.open("rb") as f:
            u = _RawUnpickler(f, encoding="latin1")
            u.path = str(path)
            try:
                u.load()
            except DataError:
                raise
            except Exception as e:  # noqa: BLE001 - a damaged pickle: say which file
                raise DataError(f"planetoid: {path} is not a readable pickle ({e}); expected {LAYOUT}") from None


def load_planetoid(path: Path, name: str | None, *, graph_name: str,
                   split: int | str = 0) -> RawGraph:
    """Read Planetoid ``name`` under ``path`` (see module doc) into a :class:`RawGraph`."""
    root, name = locate(path, name)
    from torch_geometric.io import read_planetoid_data

    check_raw_pickles(root / name / "raw", name)
    data = read_planetoid_data(str(root / name / "raw"), name)
    return raw_from_pyg(data, name=graph_name, split=split, where=str(root / name / "raw"))

"""Fixtures of the data-layer tests: files written in each supported layout."""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gnntrain.config import DatasetConfig, parse_dataset
from tests.conftest import real_path


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def rows(arr: np.ndarray, sep: str = ",") -> str:
    """One line per row of a 1-d or 2-d array."""
    arr = np.asarray(arr)
    if arr.ndim == 1:
        arr = arr[:, None]
    return "".join(sep.join(repr(v.item()) if isinstance(v, np.floating) else str(v)
                            for v in r) + "\n" for r in arr)


def dataset(**kw: object) -> DatasetConfig:
    """A DatasetConfig with a default name, for brevity."""
    kw.setdefault("name", "t")
    return parse_dataset(kw)


@pytest.fixture
def planetoid_copy(data_root: Path, tmp_path: Path) -> Path:
    """A writable copy of the Planetoid raw files (PyG's Planetoid writes processed/)."""
    src = real_path(data_root, "planetoid")
    dst = tmp_path / "planetoid"
    for name in ("Cora", "CiteSeer"):
        shutil.copytree(src / name / "raw", dst / name / "raw")
    return dst


class OgbFixture:
    """A small OGB-layout folder with known arrays (edges one-way, as OGB stores them)."""

    def __init__(self, root: Path, n: int = 50, e: int = 200, f: int = 4, classes: int = 3,
                 seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.root = root
        self.n = n
        self.edges = rng.integers(0, n, (e, 2))
        self.x = rng.normal(size=(n, f)).astype(np.float32)
        self.y = rng.integers(0, classes, n).astype(np.float64)
        self.y[-5:] = np.nan  # unlabeled, as in papers100M
        perm = rng.permutation(n - 5)
        self.splits = {"train": np.sort(perm[:25]), "valid": np.sort(perm[25:35]),
                       "test": np.sort(perm[35:])}

    def write(self, split_name: str = "time", gz: bool = True) -> Path:
        ext = ".csv.gz" if gz else ".csv"
        raw = self.root / "raw"
        write_text(raw / f"edge{ext}", rows(self.edges))
        write_text(raw / f"node-feat{ext}", rows(self.x))
        write_text(raw / f"node-label{ext}",
                   "".join("nan\n" if np.isnan(v) else f"{int(v)}\n" for v in self.y))
        write_text(raw / f"num-node-list{ext}", f"{self.n}\n")
        for name, idx in self.splits.items():
            write_text(self.root / "split" / split_name / f"{name}{ext}", rows(idx))
        return self.root


@pytest.fixture
def ogb_dir(tmp_path: Path) -> OgbFixture:
    fx = OgbFixture(tmp_path / "ogbn_fake")
    fx.write()
    return fx


@pytest.fixture
def npz_writer(tmp_path: Path) -> Callable[..., Path]:
    def write(name: str = "g.npz", **arrays: np.ndarray) -> Path:
        path = tmp_path / name
        np.savez(path, **arrays)  # type: ignore[arg-type]
        return path
    return write

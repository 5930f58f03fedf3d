"""Where benchmarks read and write: the repository, ``bench/out`` and its run and partition
roots, the config a benchmark trains with (a dataset YAML plus its overrides), and the data
files a dataset config names that are absent here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gnntrain.config import CsvDataset, RunConfig, data_root, load_config
from gnntrain.data.errors import DataError
from gnntrain.data.load import resolve_path

BENCH = Path(__file__).resolve().parent.parent
REPO = BENCH.parent
OUT = BENCH / "out"
DATASETS = REPO / "datasets"


def out_path(name: str, *, smoke: bool = False, suffix: str = "") -> Path:
    """``bench/out/<name>[-smoke]<suffix>.json``: where benchmark ``name`` writes its figures."""
    return OUT / f"{name}{'-smoke' if smoke else ''}{suffix}.json"


def write_json(doc: Any, path: Path) -> None:
    """Write ``doc`` as indented JSON to ``path`` (its directory made; values JSON does not
    know written as strings) and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    print(f"wrote {path}")


def run_root(tag: str) -> Path:
    """The directory a benchmark's training runs go under: ``bench/out/runs/<tag>``."""
    return OUT / "runs" / tag


def bench_config(yaml_name: str, overrides: list[str], tag: str) -> RunConfig:
    """``datasets/<yaml_name>`` with the bench's overrides; runs and parts go to bench/out."""
    return load_config(DATASETS / yaml_name, [f"train.run_root={run_root(tag)}",
                                              f"partition.root={OUT / 'partitions'}", *overrides])


def data_paths(dataset: Any) -> dict[str, str]:
    """field -> path of the data files a dataset config names, as the loaders read them:
    ``path`` for every source that has one (a file or a directory; a synthetic source has
    none), and for a CSV source also ``edges``, ``labels`` and ``features`` (elsewhere
    ``labels`` names a file inside ``path``)."""
    names = ("path", "edges", "labels", "features") if isinstance(dataset, CsvDataset) else ("path",)
    return {f"dataset.{n}": v for n in names if isinstance(v := getattr(dataset, n, None), str)}


def missing_data(dataset: Any) -> list[str]:
    """The data paths of a dataset config that do not exist here, resolved as the loaders
    resolve them (:func:`gnntrain.data.load.resolve_path`)."""
    out = []
    for field, value in data_paths(dataset).items():
        try:
            full = resolve_path(value, field=field)
        except DataError:  # a relative path absent under the data root
            full = data_root() / value
        if not full.exists():
            out.append(str(full))
    return out

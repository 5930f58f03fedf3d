"""The run directory: every file a run writes, written so that nothing is half-written.

::

    runs/<name>-<YYYYmmdd-HHMMSS>[-N]/
    ├── config.yaml        resolved config (every default filled in)
    ├── model.json         input/output widths and class of the model (gnntrain.load rebuilds it)
    ├── metrics.jsonl      one JSON line per epoch (loss, accuracy, times, bytes, cache)
    ├── comm.json          bytes by category, by worker and the k x k matrix, per epoch and total
    ├── partition.json     partition-quality report of the set the run trained on
    ├── summary.json       final figures (what the terminal table shows)
    ├── failures.json      worker failures and recoveries (only when there were any)
    ├── error.log          full traceback of the error that ended the run (only then)
    ├── checkpoints/       ckpt-<epoch>.pt, the last K kept, each written atomically (with every
    │                      rank's state digest); best.pt: the epoch with the best validation metric
    ├── predictions/       what ``python -m gnntrain.predict`` wrote (only after it ran)
    ├── tb/                TensorBoard events (only when tensorboard is installed)
    └── *.png              loss/accuracy, bytes per epoch, worker heatmap, per-part balance

A run never reuses another run's directory: a clash of names gets a ``-N`` suffix. The
name is one path component (:func:`partition.paths.check_component`): a run directory is
always directly under ``train.run_root``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

from gnntrain.config import RunConfig
from partition.manifest import atomic_write_bytes
from partition.paths import check_component, join_under


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, default=_json_default) + "\n").encode())


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class RunDir:
    """One run's directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, root: str | Path, name: str) -> RunDir:
        root = Path(root)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OSError(f"train.run_root={str(root)!r}: cannot create the run directory: {e}") from e
        check_component("run name (dataset.name)", name)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for n in range(1000):
            path = join_under(root, f"{name}-{stamp}" + (f"-{n}" if n else ""), "run name (dataset.name)")
            try:
                path.mkdir()
                return cls(path)
            except FileExistsError:
                continue
        raise FileExistsError(f"could not find a free run directory name under {root}")

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        p = Path(path)
        if not (p / "config.yaml").is_file():
            raise FileNotFoundError(
                f"--resume {p}: not a run directory (expected {p}/config.yaml and checkpoints/)")
        return cls(p)

    def write_config(self, cfg: RunConfig) -> None:
        atomic_write_bytes(self.path / "config.yaml",
                           yaml.safe_dump(cfg.public_dump(), sort_keys=False).encode())

    def read_config_raw(self) -> dict[str, Any]:
        with (self.path / "config.yaml").open() as f:
            out = yaml.safe_load(f)
        assert isinstance(out, dict)
        return out

    def write_json(self, name: str, obj: Any) -> None:
        atomic_write_json(self.path / name, obj)

    def append_metrics(self, record: dict[str, Any]) -> None:
        with (self.path / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(record, default=_json_default) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def truncate_metrics(self, before_epoch: int) -> None:
        """Drop metric lines of epochs >= ``before_epoch`` (they are redone on resume)."""
        p = self.path / "metrics.jsonl"
        if not p.exists():
            return
        keep = [ln for ln in p.read_text().splitlines() if ln.strip() and json.loads(ln)["epoch"] < before_epoch]
        atomic_write_bytes(p, ("\n".join(keep) + ("\n" if keep else "")).encode())

    def metrics(self) -> list[dict[str, Any]]:
        p = self.path / "metrics.jsonl"
        if not p.exists():
            return []
        return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()]

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

A ``train.run_root`` on object storage (``s3://bucket/prefix``) changes where the files go,
not how they are written: the run directory is a local staging directory mirrored to the
store (:mod:`gnntrain.rundir_store`); :meth:`RunDir.sync` and
:meth:`RunDir.publish_checkpoint` upload it, and do nothing for a local run directory.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import yaml

from gnntrain.config import RunConfig
from gnntrain.rundir_store import RunMirror, staging_dir
from partition.manifest import atomic_write_bytes
from partition.paths import check_component, join_under
from partition.staging import evict_scratch, hold
from partition.storage import LocalStore, Store, is_remote, open_store


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, default=_json_default) + "\n").encode())


def _json_default(o: Any) -> Any:
    if hasattr(o, "tolist"):
        return o.tolist()
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class RunDir:
    """One run's directory: ``path`` on this machine and, for a run on object storage, the
    ``mirror`` that uploads it."""

    def __init__(self, path: Path, mirror: RunMirror | None = None, *, max_bytes: int | None = None) -> None:
        self.path = path
        self.mirror = mirror
        self._hold: IO[str] | None = None
        if mirror is not None:  # a staging copy in node-local scratch: held while this object lives
            self._hold = hold(path)
            self.bound_scratch(max_bytes)

    def bound_scratch(self, max_bytes: int | None) -> list[str]:
        """For a run staged from a store, with ``max_bytes`` (``cluster.scratch_max_gb``):
        remove other entries of the scratch directory until it fits
        (:func:`partition.staging.evict_scratch`); the entries removed."""
        if self.mirror is None or max_bytes is None:
            return []
        return evict_scratch(self.path.parents[2], self.path, max_bytes)

    @property
    def location(self) -> str:
        """Where the run lives: its URI in the store, else its local directory."""
        return self.mirror.uri if self.mirror is not None else str(self.path)

    @classmethod
    def create(cls, root: str | Path, name: str, *, storage_options: Mapping[str, Any] | None = None,
               scratch: str | Path | None = None, max_bytes: int | None = None) -> RunDir:
        """A new run directory under ``root``; under an object-store URI, a new prefix there
        staged in ``scratch`` (:func:`~gnntrain.rundir_store.staging_dir`), after removing
        other scratch entries beyond ``max_bytes`` (:func:`partition.staging.evict_scratch`)."""
        if is_remote(root):
            return cls._create_in_store(str(root), name, storage_options, scratch, max_bytes)
        root = Path(root)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OSError(f"train.run_root={str(root)!r}: cannot create the run directory: {e}") from e
        for leaf in _names(name):
            path = join_under(root, leaf, "run name (dataset.name)")
            try:
                path.mkdir()
                return cls(path)
            except FileExistsError:
                continue
        raise FileExistsError(f"could not find a free run directory name under {root}")

    @classmethod
    def _create_in_store(cls, root: str, name: str, storage_options: Mapping[str, Any] | None,
                         scratch: str | Path | None, max_bytes: int | None) -> RunDir:
        store = open_store(root, storage_options)
        taken = set(store.names())
        for leaf in _names(name):
            if leaf in taken:
                continue
            mirror = RunMirror(store.child(leaf))
            path = staging_dir(mirror.uri, scratch)
            try:
                path.mkdir(parents=True)
                return cls(path, mirror, max_bytes=max_bytes)
            except FileExistsError:
                continue
        raise FileExistsError(f"could not find a free run directory name under {root}")

    @classmethod
    def at(cls, location: str | Path, *, storage_options: Mapping[str, Any] | None = None,
           scratch: str | Path | None = None, max_bytes: int | None = None) -> RunDir:
        """The run directory at exactly ``location`` (a sweep's trial: ``<sweep>/runs/<trial>``),
        made if absent: a local directory, or a store prefix staged in ``scratch``."""
        mirror = RunMirror(open_store(str(location), storage_options)) if is_remote(location) else None
        path = staging_dir(mirror.uri, scratch) if mirror is not None else Path(location)
        path.mkdir(parents=True, exist_ok=True)
        return cls(path, mirror, max_bytes=max_bytes)

    @classmethod
    def open(cls, location: str | Path, *, storage_options: Mapping[str, Any] | None = None,
             scratch: str | Path | None = None, kind: str = "runs", what: str = "--resume",
             max_bytes: int | None = None) -> RunDir:
        """An existing run: a local directory as it is; a run in a store fetched into
        :func:`~gnntrain.rundir_store.staging_dir` (``kind``: ``runs`` to continue it, ``cache``
        to read it) with its newest complete checkpoints, verified against their manifests.
        ``what`` names the argument in the error of a location that holds no run."""
        if is_remote(location):
            mirror = RunMirror(_run_store(str(location), storage_options, what))
            path = staging_dir(mirror.uri, scratch, kind)
            run = cls(path, mirror, max_bytes=max_bytes)  # held, and room made, before the fetch
            mirror.fetch(path)
            return run
        p = Path(location)
        if not (p / "config.yaml").is_file():
            raise FileNotFoundError(
                f"{what} {p}: not a run directory (expected {p}/config.yaml and checkpoints/)")
        return cls(p)

    @classmethod
    def read_config_at(cls, location: str | Path, storage_options: Mapping[str, Any] | None = None,
                       what: str = "--resume") -> dict[str, Any]:
        """The ``config.yaml`` of the run at ``location`` (local or in a store), read in place."""
        if not is_remote(location):
            return cls.open(location, what=what).read_config_raw()
        return _config_mapping(_run_store(str(location), storage_options, what).read_bytes("config.yaml"))

    def sync(self) -> None:
        """Upload what changed to the store (nothing for a local run directory)."""
        if self.mirror is not None:
            self.mirror.sync(self.path)

    def publish_checkpoint(self, stem: str, files: Sequence[str], keep: int | None) -> None:
        """Upload the checkpoint ``stem`` just written (``files`` of ``checkpoints/``, the
        checkpoint itself last) and its manifest (nothing for a local run directory)."""
        if self.mirror is not None:
            self.mirror.put_checkpoint(self.path / "checkpoints", stem, files, keep)

    def write_config(self, cfg: RunConfig) -> None:
        atomic_write_bytes(self.path / "config.yaml",
                           yaml.safe_dump(cfg.public_dump(), sort_keys=False).encode())

    def read_config_raw(self) -> dict[str, Any]:
        return _config_mapping((self.path / "config.yaml").read_bytes())

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
        return metrics_in(LocalStore(self.path))


def metrics_in(run: Store) -> list[dict[str, Any]]:
    """The epoch records of the run directory ``run`` (local or in a store, read in place):
    its ``metrics.jsonl``, one record per line; none when it has no such file yet."""
    if not run.exists("metrics.jsonl"):
        return []
    return [json.loads(ln) for ln in run.read_bytes("metrics.jsonl").decode().splitlines() if ln.strip()]


def _names(name: str) -> Iterator[str]:
    """The candidate names of a new run directory: ``<name>-<stamp>``, then ``-1``, ``-2``, ..."""
    check_component("run name (dataset.name)", name)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        yield f"{name}-{stamp}" + (f"-{n}" if n else "")


def _run_store(uri: str, storage_options: Mapping[str, Any] | None, what: str) -> Store:
    """The store of the run at ``uri``; FileNotFoundError naming ``what`` when it holds no run."""
    store = open_store(uri, storage_options)
    if not store.exists("config.yaml"):
        raise FileNotFoundError(f"{what} {store.uri}: not a run directory (no config.yaml there); "
                                "give the URI of a run, <train.run_root>/<name>-<stamp>")
    return store


def _config_mapping(data: bytes) -> dict[str, Any]:
    out = yaml.safe_load(data)
    assert isinstance(out, dict)
    return out

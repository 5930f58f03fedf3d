"""A run directory on object storage: a local staging copy, mirrored to a store prefix.

With ``train.run_root`` an object-store URI (``s3://bucket/prefix``), the coordinator writes
the run directory exactly as it writes a local one, to a staging directory on its node
(:func:`staging_dir`: ``<cluster.scratch_dir>/runs/<digest of the root URI>/<name>``), and
:class:`RunMirror` uploads it::

    s3://bucket/prefix/<name>-<YYYYmmdd-HHMMSS>[-N]/
    ├── config.yaml, model.json, metrics.jsonl, comm.json, partition.json, summary.json,
    │   failures.json, error.log, *.png, tb/
    │                              each uploaded when it changed: at the run's start, at every
    │                              epoch end and at the run's end (predictions/ stays local)
    └── checkpoints/
        ├── ckpt-<epoch>.part-<p>.pt     per-part side files, uploaded first
        ├── ckpt-<epoch>.pt              the checkpoint, uploaded next
        ├── ckpt-<epoch>.manifest.json   uploaded last: {"format_version": 1,
        │                                "files": {name: {"bytes", "sha256"}}} in upload order
        └── best.pt, best.part-<p>.pt, best.manifest.json   the same for best.pt

Object stores have no rename, so a checkpoint is complete in the store exactly when its
manifest is there: a reader (``--resume``, :func:`gnntrain.load`) trusts only checkpoints
with a manifest and fetches each object it lists into a local directory, checking its size
and SHA-256 on the way (:meth:`partition.storage.Store.fetch`). A checkpoint that is replaced
(``best``) or leaves the rotation (``train.keep_checkpoints``, counted in the store) loses
its manifest first. The other files are single objects, each replaced whole.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gnntrain.checkpoint_names import MANIFEST, checkpoint_file, is_rotating
from partition.manifest import FileMismatch, atomic_write_bytes, manifest_bytes, verify
from partition.paths import check_component, join_under
from partition.storage import StorageError, Store, default_scratch, open_store

__all__ = ["MANIFEST", "RunMirror", "RunStoreError", "check_writable", "staging_dir"]

CHECKPOINTS = "checkpoints"
FORMAT_VERSION = 1
_LOCAL_ONLY = (CHECKPOINTS, "predictions")  # checkpoints go by manifest; predictions stay local


def _manifest_stems(names: Sequence[str]) -> list[str]:
    """The stems of the checkpoint manifests among ``names``."""
    return [n[: -len(MANIFEST)] for n in names if n.endswith(MANIFEST)]


class RunStoreError(ValueError):
    """A run directory in a store is incomplete or differs from its manifests; the message
    names the object's URI and what to do."""


def staging_dir(uri: str, scratch: str | Path | None, kind: str = "runs") -> Path:
    """The local directory of the run at ``uri``: ``<scratch>/<kind>/<digest of the run
    root>/<run name>`` (``scratch`` default :func:`~partition.storage.default_scratch`);
    ``kind`` is ``runs`` for a run's staging copy, ``cache`` for what :func:`gnntrain.load`
    fetches."""
    root, _, name = uri.rstrip("/").rpartition("/")
    check_component("run directory name", name)
    digest = hashlib.sha256(root.encode()).hexdigest()[:12]
    return Path(scratch if scratch is not None else default_scratch()) / kind / digest / name


def check_writable(root: str, storage_options: Mapping[str, Any]) -> None:
    """Write and delete one empty object under ``root``: a missing bucket, a wrong endpoint
    or missing credentials fail now, as :class:`~partition.storage.StorageError`."""
    store = open_store(root, storage_options)
    probe = f".gnntrain-write-check-{uuid.uuid4().hex}"
    store.write_bytes(probe, b"")
    store.remove(probe)


class RunMirror:
    """Uploads a local run directory to the store prefix of one run, and fetches it back."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._sent: dict[str, tuple[int, int]] = {}  # file -> (size, mtime) last uploaded

    @property
    def uri(self) -> str:
        return self.store.uri

    def sync(self, local: Path) -> None:
        """Upload every file of ``local`` that changed since the last sync (checkpoints and
        predictions aside; temp files of unfinished writes skipped)."""
        for path in sorted(local.rglob("*")):
            rel = path.relative_to(local).as_posix()
            parts = rel.split("/")
            if parts[0] in _LOCAL_ONLY or any(p.startswith(".") for p in parts) or not path.is_file():
                continue
            st = path.stat()
            mark = (st.st_size, st.st_mtime_ns)
            if self._sent.get(rel) != mark:
                self.store.put(rel, path)
                self._sent[rel] = mark

    def put_checkpoint(self, local: Path, stem: str, files: Sequence[str], keep: int | None) -> None:
        """Upload checkpoint ``stem``: ``files`` of the local checkpoints directory ``local``
        in their order (side files, then the checkpoint), then its manifest. An upload that
        fails or is interrupted removes what it sent. With ``keep`` (a rotating checkpoint),
        the oldest complete ones beyond ``keep`` are dropped, and so are the objects of any
        other rotating checkpoint without a manifest (an upload killed before its end)."""
        ckpts = self.store.child(CHECKPOINTS)
        ckpts.remove(stem + MANIFEST)  # a replaced checkpoint is absent while its files change
        try:
            records = {name: asdict(ckpts.put(name, local / name)) for name in files}
            ckpts.write_bytes(stem + MANIFEST, manifest_bytes({"format_version": FORMAT_VERSION,
                                                               "files": records}))
        except BaseException:
            with suppress(Exception):  # best effort: the upload's own error is the one raised
                self.drop_checkpoint(stem)
            raise
        if keep is not None:
            complete = self.rotating()
            unlisted = {named[0] for n in ckpts.names()
                        if (named := checkpoint_file(n)) is not None and is_rotating(named[0])} - set(complete)
            for old in complete[:-keep] + sorted(unlisted):
                self.drop_checkpoint(old)

    def rotating(self) -> list[str]:
        """The stems of the complete rotating checkpoints (``ckpt-<epoch>``), oldest first."""
        return sorted(stem for stem in _manifest_stems(self.store.child(CHECKPOINTS).names()) if is_rotating(stem))

    def drop_checkpoint(self, stem: str) -> None:
        """Remove checkpoint ``stem``: its manifest first, then its files."""
        ckpts = self.store.child(CHECKPOINTS)
        ckpts.remove(stem + MANIFEST)
        for name in ckpts.names():
            if name.startswith(stem + ".") and name.endswith(".pt"):
                ckpts.remove(name)

    def fetch(self, local: Path) -> None:
        """Copy the run into ``local``: its top-level files as they are, and the newest
        complete rotating checkpoint and every other complete one (``best``), each object
        checked against its manifest (a local copy that already matches is kept). Local
        checkpoint files the store holds no complete checkpoint of are removed."""
        local.mkdir(parents=True, exist_ok=True)
        for name in self.store.names():
            if self.store.exists(name):  # a file, not the checkpoints/ prefix
                atomic_write_bytes(join_under(local, name, "run directory file"), self.store.read_bytes(name))
        names = self.store.child(CHECKPOINTS).names()
        others = [stem for stem in _manifest_stems(names) if not is_rotating(stem)]
        kept: set[str] = set()
        for stem in self.rotating()[-1:] + sorted(others):
            kept |= self._fetch_checkpoint(stem, local / CHECKPOINTS)
        for path in (local / CHECKPOINTS).glob("*.pt"):
            if path.name not in kept:
                path.unlink()

    def _fetch_checkpoint(self, stem: str, local: Path) -> set[str]:
        """Fetch the files checkpoint ``stem``'s manifest lists into ``local``; their names."""
        ckpts = self.store.child(CHECKPOINTS)
        where = f"{ckpts.uri}/{stem}{MANIFEST}"
        fix = f"delete {where} to use the checkpoint before it"
        try:
            files = json.loads(ckpts.read_bytes(stem + MANIFEST))["files"]
            records = {str(n): (int(r["bytes"]), str(r["sha256"])) for n, r in files.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise RunStoreError(f"{where} is not a checkpoint manifest ({type(e).__name__}: {e}); "
                                f"{fix}") from None
        for name, (size, sha256) in records.items():
            if checkpoint_file(name) is None:
                raise RunStoreError(f"{where} lists {name!r}, not a checkpoint file; {fix}")
            dest = local / name
            try:
                verify(dest, size, sha256)
                continue  # fetched before
            except FileMismatch:
                pass
            try:
                ckpts.fetch(name, dest, size, sha256)
            except FileMismatch as e:
                raise RunStoreError(f"checkpoint object {ckpts.uri}/{name} differs from its manifest "
                                    f"{stem}{MANIFEST} ({e.problem}: expected {e.expected}, got "
                                    f"{e.got}): it was altered or damaged in the store; {fix}") from None
            except StorageError:
                if ckpts.exists(name):
                    raise
                raise RunStoreError(f"checkpoint object {ckpts.uri}/{name} is listed in "
                                    f"{stem}{MANIFEST} but missing; {fix}") from None
        return set(records)

"""The prediction directory's format: the manifest's models, the writer of one part's
shard (each worker calls it for the rows it owns) and the readers; the layout and the
manifest's fields are documented in :mod:`gnntrain.predict`. Every file is recorded with
its size and SHA-256 and ``manifest.json`` is written last (:mod:`partition.manifest`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from partition.manifest import FileMismatch, atomic_write_bytes, record_file, write_manifest
from partition.manifest import read_manifest as load_manifest
from partition.manifest import verify as verify_file
from partition.storage import is_remote, open_store

__all__ = ["FORMAT_VERSION", "SHARD_FORMATS", "FileEntry", "Manifest", "PredictError", "Shard", "export_shard",
           "fetch_predictions", "read_manifest", "read_manifest_file", "read_predictions", "write_manifest_file",
           "write_shard"]

FORMAT_VERSION = 1
SHARD_FORMATS = ("npy", "parquet")


class PredictError(ValueError):
    """Bad input to ``gnntrain.predict``; the message names the value and what is allowed."""


class FileEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    bytes: int
    sha256: str


class Shard(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    part: int
    rows: int
    shape: list[int]
    dtype: str
    files: dict[str, FileEntry]


class Manifest(BaseModel):
    """``manifest.json``; fields documented in the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format_version: int
    what: str
    layer: int
    format: Literal["npy", "parquet"]
    dtype: str
    width: int
    total_rows: int
    shards: list[Shard]
    run_dir: str
    checkpoint_epoch: int
    workers: int


# ----------------------------------------------------------------------------- writing


def write_manifest_file(out_dir: Path, manifest: Manifest) -> None:
    """Write ``manifest.json`` into ``out_dir``, after every shard it lists."""
    write_manifest(out_dir / "manifest.json", manifest.model_dump(mode="json"))


def _file_entry(path: Path) -> dict[str, Any]:
    rec = record_file(path)
    return {"name": path.name, "bytes": rec.bytes, "sha256": rec.sha256}


def _save_npy(path: Path, arr: np.ndarray) -> None:
    with path.open("wb") as f:
        np.save(f, arr, allow_pickle=False)
        f.flush()
        os.fsync(f.fileno())


def export_shard(location: str, part_id: int, ids: np.ndarray, values: np.ndarray, fmt: str,
                 storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write one part's shard (:func:`write_shard`) into the prediction directory at
    ``location``: a local directory, or an object-store URI, where the shard is written to
    a local temp directory and each file uploaded (hashed on the way out and checked
    against the shard's entry). Returns the shard's entry of ``manifest.json``."""
    if not is_remote(location):
        return write_shard(Path(location), part_id, ids, values, fmt)
    store = open_store(location, storage_options)
    with tempfile.TemporaryDirectory(prefix=f"gnntrain-shard-{part_id}-") as tmp:
        entry = write_shard(Path(tmp), part_id, ids, values, fmt)
        for f in entry["files"].values():
            sent = store.put(f["name"], Path(tmp) / f["name"])
            if (sent.bytes, sent.sha256) != (f["bytes"], f["sha256"]):
                raise PredictError(f"{store.uri}/{f['name']}: uploaded {sent.bytes} bytes with another "
                                   "SHA-256 than the shard written; write the predictions again")
    return entry


def write_shard(out_dir: Path, part_id: int, ids: np.ndarray, values: np.ndarray,
                fmt: str) -> dict[str, Any]:
    """Write one part's rows: ``part-<p>.npy`` (values) + ``part-<p>.ids.npy`` (original
    node ids, int64), or one ``part-<p>.parquet`` (columns ``id`` and ``value``, a
    fixed-size list per row). Returns the shard's entry of ``manifest.json``."""
    if fmt not in SHARD_FORMATS:
        raise ValueError(f"format={fmt!r}: expected one of {SHARD_FORMATS}")
    if values.ndim != 2 or values.shape[0] != ids.shape[0]:
        raise ValueError(f"part {part_id}: {ids.shape[0]} ids but values of shape {values.shape}")
    files: dict[str, dict[str, Any]] = {}
    if fmt == "npy":
        for role, name, arr in (("values", f"part-{part_id}.npy", values),
                                ("ids", f"part-{part_id}.ids.npy", ids)):
            _save_npy(out_dir / name, np.ascontiguousarray(arr))
            files[role] = _file_entry(out_dir / name)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        flat = pa.array(np.ascontiguousarray(values).reshape(-1))
        table = pa.table({"id": pa.array(ids),
                          "value": pa.FixedSizeListArray.from_arrays(flat, int(values.shape[1]))})
        path = out_dir / f"part-{part_id}.parquet"
        pq.write_table(table, path)
        files["table"] = _file_entry(path)
    return {"part": int(part_id), "rows": int(ids.shape[0]), "shape": [int(d) for d in values.shape],
            "dtype": str(values.dtype), "files": files}


# ----------------------------------------------------------------------------- reading


def read_manifest(path: str | Path) -> Manifest:
    """The validated ``manifest.json`` of a prediction directory."""
    p = Path(path) / "manifest.json"
    if not p.is_file():
        raise PredictError(f"{str(path)!r} is not a prediction directory (no manifest.json)")
    return read_manifest_file(p, str(p))


def read_manifest_file(p: Path, where: str) -> Manifest:
    """The validated manifest in the file ``p`` (``where`` names it in errors)."""
    raw = load_manifest(p)
    version = raw.get("format_version") if isinstance(raw, dict) else None
    if version != FORMAT_VERSION:
        raise PredictError(f"{where}: format_version={version!r}, this code reads {FORMAT_VERSION}; "
                           "write the predictions again with this version")
    try:
        return Manifest.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        raise PredictError(f"{where}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None


def _checked(root: Path, entry: FileEntry, verify: bool) -> Path:
    path = root / entry.name
    try:
        return verify_file(path, entry.bytes, entry.sha256 if verify else None)
    except FileMismatch as e:
        if e.problem == "sha256":
            raise PredictError(f"{path}: SHA-256 differs from manifest.json (changed after writing); "
                               "write the predictions again") from None
        raise PredictError(f"{path}: missing or not {entry.bytes} bytes as manifest.json records; "
                           "write the predictions again") from None


def _read_shard(root: Path, m: Manifest, shard: Shard, part: str, verify: bool) -> np.ndarray:
    """``part`` (``ids`` or ``values``) of one shard."""
    if m.format == "npy":
        arr = np.load(_checked(root, shard.files[part], verify), mmap_mode="r", allow_pickle=False)
    else:
        import pyarrow.parquet as pq

        col = pq.read_table(_checked(root, shard.files["table"], verify),
                            columns=["id" if part == "ids" else "value"]).column(0).combine_chunks()
        arr = (col.to_numpy() if part == "ids"
               else col.flatten().to_numpy().reshape(shard.rows, m.width))
    expect = (shard.rows,) if part == "ids" else tuple(shard.shape)
    if arr.shape != expect:
        raise PredictError(f"{root}: shard {shard.part} {part} has shape {arr.shape}, manifest "
                           f"says {expect}")
    return arr


def fetch_predictions(uri: str, storage_options: Mapping[str, Any] | None = None) -> Path:
    """The local copy of the prediction directory at ``uri`` in an object store: every file
    its ``manifest.json`` lists fetched into ``gnntrain-scratch/cache`` under the temp
    directory, each checked against its size and SHA-256 on the way in (a local copy that
    already matches is kept), the manifest last."""
    from gnntrain.rundir_store import staging_dir

    store = open_store(uri, storage_options)
    if not store.exists("manifest.json"):
        raise PredictError(f"{store.uri!r} is not a prediction directory (no manifest.json)")
    data = store.read_bytes("manifest.json")
    local = staging_dir(store.uri, None, "cache")
    local.mkdir(parents=True, exist_ok=True)
    (local / "manifest.json").unlink(missing_ok=True)
    atomic_write_bytes(local / ".manifest.json", data)
    m = read_manifest_file(local / ".manifest.json", store.uri)
    for shard in m.shards:
        for f in shard.files.values():
            dest = local / f.name
            try:
                verify_file(dest, f.bytes, f.sha256)
            except FileMismatch:
                try:
                    store.fetch(f.name, dest, f.bytes, f.sha256)
                except FileMismatch:
                    raise PredictError(f"{store.uri}/{f.name}: differs from manifest.json (changed "
                                       "after writing); write the predictions again") from None
    os.replace(local / ".manifest.json", local / "manifest.json")
    return local


def read_predictions(path: str | Path, *, verify: bool = True,
                     storage_options: Mapping[str, Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, values)`` of a prediction directory, sorted by original node id.

    Reads one shard at a time into the preallocated result (values are never held
    twice); ``verify`` checks every file's SHA-256 against the manifest first. A node id
    that appears twice is an error. ``path`` may be an object-store URI (reached with
    ``storage_options``): its files are fetched first (:func:`fetch_predictions`), each
    checked on the way in.
    """
    if is_remote(path):
        path, verify = fetch_predictions(str(path), storage_options), False  # checked while fetched
    root = Path(path)
    m = read_manifest(root)
    all_ids = np.concatenate([np.asarray(_read_shard(root, m, s, "ids", verify), dtype=np.int64)
                              for s in m.shards]) if m.shards else np.empty(0, np.int64)
    if all_ids.size != m.total_rows:
        raise PredictError(f"{root}: {all_ids.size} rows in the shards, manifest says {m.total_rows}")
    order = np.argsort(all_ids, kind="stable")
    ids = all_ids[order]
    dup = np.flatnonzero(ids[1:] == ids[:-1])
    if dup.size:
        raise PredictError(f"{root}: node id {int(ids[dup[0]])} appears more than once")
    pos = np.empty_like(order)
    pos[order] = np.arange(order.size)
    values = np.empty((m.total_rows, m.width), dtype=np.dtype(m.dtype))
    start = 0
    for s in m.shards:
        values[pos[start:start + s.rows]] = _read_shard(root, m, s, "values", verify)
        start += s.rows
    return ids, values

"""Copying a partition set from object storage to node-local scratch, one part at a time.

A worker calls :func:`stage_part` with the set's URI and its part: the set-level files
and that part's files (as ``meta.json`` lists them) are copied to
``<scratch>/<set name>-<meta digest>/``, each one hashed while it is copied and kept only
when its size and SHA-256 match the manifest; ``meta.json`` is written there last. The
local copy is then opened and memory-mapped like any local set. Files already staged
there with their recorded size are reused, so the next run on the node copies nothing
(their checksums are verified again when the part is loaded). No other part's file is
read. A local set is returned as it is.

Works for both set formats (``files`` in ``meta.json`` maps each relative path to its
``bytes`` and ``sha256``; a part's files are under ``part-<p>/``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from partition.errors import PartitionChecksumError, PartitionFormatError
from partition.manifest import FileMismatch, atomic_write_bytes
from partition.paths import check_component, join_under
from partition.storage import (
    StorageError,
    Store,
    default_scratch,
    is_remote,
    local_path,
    open_store,
)

__all__ = ["stage_part", "stage_set", "wanted_files"]

_REBUILD = "the set is damaged: rebuild it (python -m partition --config <dataset.yaml> --force)"


def wanted_files(files: Mapping[str, Any], parts: Iterable[int]) -> list[str]:
    """The files of a set a holder of ``parts`` reads: every set-level file (not under a
    ``part-<p>/`` directory) and those of its own parts, in manifest order."""
    own = {f"part-{int(p)}" for p in parts}
    return [rel for rel in files if not rel.startswith("part-") or rel.split("/", 1)[0] in own]


def _manifest(store: Store) -> tuple[bytes, dict[str, Any]]:
    rebuild = "build it (python -m partition --config <dataset.yaml>) or give the URI of a set"
    if not store.exists("meta.json"):
        raise PartitionFormatError(f"{store.uri} is not a partition set (no meta.json: absent or "
                                   f"not completely written); {rebuild}")
    raw = store.read_bytes("meta.json")
    try:
        meta = json.loads(raw)
        if not isinstance(meta["files"], dict) or not isinstance(meta["meta_sha256"], str):
            raise TypeError("files is not a mapping or meta_sha256 not a string")
    except (ValueError, KeyError, TypeError) as e:
        raise PartitionFormatError(f"{store.uri}/meta.json is not a partition manifest ({e}); "
                                   f"{rebuild}") from None
    return raw, meta


def stage_set(uri: str | Path, parts: Iterable[int], *, scratch: str | Path | None = None,
              storage_options: Mapping[str, Any] | None = None) -> Path:
    """The local directory holding the set at ``uri`` for a reader of ``parts``: ``uri``
    itself when it is local, else a staged copy of the set-level files and those parts'
    files under ``scratch`` (default :func:`~partition.storage.default_scratch`)."""
    if not is_remote(uri):
        return local_path(uri)
    store = open_store(uri, storage_options)
    raw, meta = _manifest(store)
    name = check_component("partition set name", str(uri).rstrip("/").rsplit("/", 1)[-1])
    local = Path(scratch if scratch is not None else default_scratch()) / f"{name}-{meta['meta_sha256'][:16]}"
    for rel in wanted_files(meta["files"], parts):
        entry = meta["files"][rel]
        dest = join_under(local, rel, "meta.json files")
        if dest.is_file() and dest.stat().st_size == int(entry["bytes"]):
            continue  # staged by an earlier run (or a worker beside this one); verified on load
        try:
            store.fetch(rel, dest, int(entry["bytes"]), str(entry["sha256"]))
        except FileMismatch as e:
            what = (f"has {e.got} bytes, meta.json recorded {entry['bytes']}" if e.problem == "size"
                    else "fails its checksum (its sha256 differs from meta.json's)")
            raise PartitionChecksumError(f"partition file {store.uri}/{rel} {what}; {_REBUILD}") from None
        except StorageError:
            if store.exists(rel):
                raise
            raise PartitionChecksumError(f"partition file {store.uri}/{rel} is listed in meta.json but "
                                         f"missing; {_REBUILD}") from None
    if not (local / "meta.json").is_file() or (local / "meta.json").read_bytes() != raw:
        atomic_write_bytes(local / "meta.json", raw)
    return local


def stage_part(uri: str | Path, part: int, *, scratch: str | Path | None = None,
               storage_options: Mapping[str, Any] | None = None) -> Path:
    """:func:`stage_set` for the one part a worker owns."""
    return stage_set(uri, (part,), scratch=scratch, storage_options=storage_options)

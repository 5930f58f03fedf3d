"""Copying a partition set from object storage to node-local scratch, one part at a time.

A worker calls :func:`stage_part` with the set's URI and its part: the set-level files
and that part's files (as ``meta.json`` lists them) are copied to
``<scratch>/<set name>-<meta digest>/``, up to :data:`FETCH_THREADS` files at once, each
one hashed while it is copied and kept only when its size and SHA-256 match the manifest;
``meta.json`` is written there last. The
local copy is then opened and memory-mapped like any local set. Files already staged
there with their recorded size are reused, so the next run on the node copies nothing
(their checksums are verified again when the part is loaded). No other part's file is
read. A local set is returned as it is. What each call did (the files it copied and their
bytes, the files it found staged, its seconds) comes back with the path, as a
:class:`Staged`: a run's summary lists it per worker.

Works for both set formats (``files`` in ``meta.json`` maps each relative path to its
``bytes`` and ``sha256``; a part's files are under ``part-<p>/``).

Staged sets stay on the node for the next run. With ``max_bytes`` (``cluster.scratch_max_gb``)
staging first removes the least recently used other entries of the scratch directory until
they and the set being staged fit (:func:`evict_scratch`): staged sets, and the local copies
of runs on object storage (``runs/``, ``sweeps/``: a run's staging directory, which the
store already mirrors, and ``cache/``: what ``gnntrain.load`` and ``gnntrain.predict``
fetched). An entry a process holds (:func:`hold`: a worker its staged set, a run its staging
directory, for as long as they live) is never removed, nor one used in the last
:data:`EVICT_MIN_AGE_S` seconds (another run on the node may be staging it), nor the set
being staged, so the limit can be exceeded by what is in use.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

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

__all__ = ["EVICT_MIN_AGE_S", "Staged", "check_sizes_in_store", "evict_scratch", "hold", "open_staged",
           "stage_part", "stage_set", "wanted_files"]

FETCH_THREADS = 8
"""Files of a part copied at once."""
EVICT_MIN_AGE_S = 60.0
"""A staged set used this recently is never evicted (another run on the node may be staging it)."""
LAST_USED = ".last-used"
"""The file in a scratch entry whose modification time is the entry's last use."""
IN_USE = ".in-use"
"""The file of a scratch entry that its users hold a shared lock on (:func:`hold`)."""
RUN_KINDS = ("runs", "sweeps", "cache")
"""Scratch subdirectories of run copies: ``<kind>/<digest of the root>/<name>``."""

_REBUILD = "the set is damaged: rebuild it (python -m partition --config <dataset.yaml> --force)"


@dataclass
class Staged:
    """The local directory of a set, and what staging it did: ``fetched`` the files copied
    from the store (relative names, manifest order) and ``fetched_bytes`` their size,
    ``reused`` the files found already staged, ``seconds`` the wall time, of which
    ``open_seconds`` opening the store and reading its manifest, ``evicted`` the other scratch
    entries removed first to stay within the scratch limit (relative to the scratch directory). A local set has ``source`` None and
    nothing fetched."""

    path: Path
    source: str | None = None
    fetched: list[str] = field(default_factory=list)
    fetched_bytes: int = 0
    reused: list[str] = field(default_factory=list)
    seconds: float = 0.0
    open_seconds: float = 0.0
    evicted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path": str(self.path)}


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


def _bytes_under(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _last_used(path: Path) -> float:
    marker = path / LAST_USED
    return (marker if marker.is_file() else path).stat().st_mtime


def hold(path: Path) -> IO[str]:
    """Mark the scratch entry ``path`` in use and used now: a shared lock on its in-use file,
    held until the returned file is closed or this process ends, which
    :func:`evict_scratch` never removes from under it (any number of processes may hold one
    entry)."""
    path.mkdir(parents=True, exist_ok=True)
    f = (path / IN_USE).open("a")
    fcntl.flock(f, fcntl.LOCK_SH)
    (path / LAST_USED).touch()
    return f


def _held(path: Path) -> bool:
    """Whether a process holds ``path`` (:func:`hold`)."""
    try:
        f = (path / IN_USE).open("r")  # none there: never held
    except OSError:
        return False
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False


def _entries(scratch: Path) -> list[Path]:
    """The entries of a scratch directory: staged sets and local copies of runs."""
    if not scratch.is_dir():
        return []
    sets = [d for d in scratch.iterdir() if d.is_dir() and (d / "meta.json").is_file()]
    runs = [d for kind in RUN_KINDS for d in scratch.glob(f"{kind}/*/*") if d.is_dir()]
    return sets + runs


def evict_scratch(scratch: Path, keep: Path, max_bytes: int, needed: int = 0) -> list[str]:
    """Remove entries of ``scratch`` other than ``keep`` (staged sets, local copies of runs),
    least recently used first, none held by a process (:func:`hold`) nor used in the last
    :data:`EVICT_MIN_AGE_S` seconds, until the entries plus ``needed`` more bytes fit in
    ``max_bytes``; the entries removed, relative to ``scratch``."""
    entries = _entries(scratch)
    sizes = {d: _bytes_under(d) for d in entries}
    total = sum(sizes.values()) + needed
    now, removed = time.time(), []
    for d in sorted((d for d in entries if d != keep), key=_last_used):
        if total <= max_bytes:
            break
        if now - _last_used(d) < EVICT_MIN_AGE_S or _held(d):
            continue
        (d / "meta.json").unlink(missing_ok=True)  # no longer a staged set, whatever happens to the rest
        shutil.rmtree(d, ignore_errors=True)
        total -= sizes[d]
        removed.append(d.relative_to(scratch).as_posix())
    return removed


def stage_set(uri: str | Path, parts: Iterable[int], *, scratch: str | Path | None = None,
              storage_options: Mapping[str, Any] | None = None, max_bytes: int | None = None) -> Staged:
    """The local directory holding the set at ``uri`` for a reader of ``parts``: ``uri``
    itself when it is local, else a staged copy of the set-level files and those parts'
    files under ``scratch`` (default :func:`~partition.storage.default_scratch`), after
    evicting other staged sets beyond ``max_bytes`` (module docstring)."""
    if not is_remote(uri):
        return Staged(local_path(uri))
    t0 = time.perf_counter()
    store = open_store(uri, storage_options)
    raw, meta = _manifest(store)
    name = check_component("partition set name", str(uri).rstrip("/").rsplit("/", 1)[-1])
    root = Path(scratch if scratch is not None else default_scratch())
    local = root / f"{name}-{meta['meta_sha256'][:16]}"
    staged = Staged(local, store.uri, open_seconds=time.perf_counter() - t0)
    todo: list[tuple[str, int, str, Path]] = []
    for rel in wanted_files(meta["files"], parts):
        size, sha = int(meta["files"][rel]["bytes"]), str(meta["files"][rel]["sha256"])
        dest = join_under(local, rel, "meta.json files")
        if dest.is_file() and dest.stat().st_size == size:
            staged.reused.append(rel)  # by an earlier run (or a worker beside this one); verified on load
        else:
            todo.append((rel, size, sha, dest))

    if max_bytes is not None:
        staged.evicted = evict_scratch(root, local, max_bytes, sum(size for _, size, *_ in todo))

    def fetch(item: tuple[str, int, str, Path]) -> None:
        rel, size, sha, dest = item
        try:
            store.fetch(rel, dest, size, sha)
        except FileMismatch as e:
            what = (f"has {e.got} bytes, meta.json recorded {size}" if e.problem == "size"
                    else "fails its checksum (its sha256 differs from meta.json's)")
            raise PartitionChecksumError(f"partition file {store.uri}/{rel} {what}; {_REBUILD}") from None
        except StorageError:
            if store.exists(rel):
                raise
            raise PartitionChecksumError(f"partition file {store.uri}/{rel} is listed in meta.json but "
                                         f"missing; {_REBUILD}") from None

    # the files side by side, as a client's bulk get does: one request's latency does not
    # hold up the others; the first error is raised once every copy has ended
    with ThreadPoolExecutor(max_workers=max(1, min(FETCH_THREADS, len(todo)))) as pool:
        for f in [pool.submit(fetch, item) for item in todo]:
            f.result()
    staged.fetched = [rel for rel, *_ in todo]
    staged.fetched_bytes = sum(size for _, size, *_ in todo)
    if not (local / "meta.json").is_file() or (local / "meta.json").read_bytes() != raw:
        atomic_write_bytes(local / "meta.json", raw)
    (local / LAST_USED).touch()
    staged.seconds = time.perf_counter() - t0
    return staged


def stage_part(uri: str | Path, part: int, *, scratch: str | Path | None = None,
               storage_options: Mapping[str, Any] | None = None, max_bytes: int | None = None) -> Staged:
    """:func:`stage_set` for the one part a worker owns."""
    return stage_set(uri, (part,), scratch=scratch, storage_options=storage_options, max_bytes=max_bytes)


class _StoredSet(Protocol):
    remote: Store | None
    staged: Staged | None


SetT = TypeVar("SetT", bound=_StoredSet)


def open_staged(uri: str, open_local: Callable[..., SetT], *, scratch: str | Path | None = None,
                storage_options: Mapping[str, Any] | None = None, **kwargs: Any) -> SetT:
    """The set at ``uri`` in an object store, opened by ``open_local(path, **kwargs)`` from
    a staged copy of its set-level files (no part's file); its ``remote`` (the store) and
    ``staged`` (what staging did) are set. Both set formats open this way."""
    staged = stage_set(uri, (), scratch=scratch, storage_options=storage_options)
    pset = open_local(staged.path, **kwargs)
    pset.remote, pset.staged = open_store(uri, storage_options), staged
    return pset


def check_sizes_in_store(store: Store, files: Mapping[str, Any]) -> None:
    """Every file of a set's manifest (``files``: relative name -> an entry with ``bytes``)
    is in ``store`` with its recorded size; else :class:`PartitionChecksumError` naming it.
    Sizes only: each worker verifies its files' SHA-256 while it stages them."""
    for rel, entry in files.items():
        got = store.size(rel)
        if got != entry.bytes:
            raise PartitionChecksumError(
                f"partition file {store.uri}/{rel} {'is missing' if got is None else f'has {got} bytes'}, "
                f"meta.json recorded {entry.bytes}; {_REBUILD}")

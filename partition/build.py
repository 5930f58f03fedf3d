"""Writing a partition set: assign parts, renumber, write every part, rename into place.

:func:`build_partition_set` is the one entry point. It is idempotent: a set whose key
(graph hash + settings + format version) already exists is opened and returned without
any partitioning. The layout is documented in :mod:`partition.format`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from partition import _kernels
from partition.book import PartitionBook, cut_counts
from partition.config import PartitionConfig
from partition.errors import PartitionError
from partition.format import (
    FORMAT_VERSION,
    FileEntry,
    NodeTypeRanges,
    PartCounts,
    PartCut,
    PartitionMeta,
    meta_digest,
    unset_optional,
    write_npy_to,
)
from partition.graph import Graph, unique_sorted
from partition.manifest import manifest_bytes
from partition.methods import BASELINE_SEED, assign_parts, check_request, random_parts
from partition.paths import check_component, join_under
from partition.steps import StepRecorder, StepStat
from partition.storage import LocalStore, Store, is_remote, local_path, open_store
from partition.store import PartitionSet, open_partition_set, settings_of

__all__ = ["Renumbering", "baseline_parts", "build_partition_set", "cleaned_on_failure", "make_tmp", "move_into_place", "part_files",
           "put_npy", "reuse_set",
           "set_key", "set_path", "set_prefix", "write_meta"]


def set_key(graph_hash: str, cfg: PartitionConfig) -> str:
    """16 hex chars of SHA-256 over the graph hash, the settings and the format version."""
    body = json.dumps({"graph": graph_hash, "settings": settings_of(cfg), "format": FORMAT_VERSION},
                      sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _set_prefix(graph: Graph, cfg: PartitionConfig) -> str:
    return set_prefix(graph.name, cfg)


def set_prefix(graph_name: str, cfg: PartitionConfig) -> str:
    """``<graph>-<method>-k<k>-``: the directory name of a set without its key."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", graph_name) or "graph"
    return f"{name}-{cfg.method}-k{cfg.parts}-"


def set_path(root: str | Path, graph: Graph, cfg: PartitionConfig) -> Path:
    """Directory of the set for this graph and these settings (it may not exist yet)."""
    return join_under(root, _set_prefix(graph, cfg) + set_key(graph.content_hash(), cfg),
                      "partition set name (dataset.name)")


def _may_exist(root: Path, graph: Graph, cfg: PartitionConfig) -> bool:
    """False only when no set of this graph name, method and k is under ``root`` (then the
    content hash cannot find one, and hashing may overlap partitioning)."""
    prefix = _set_prefix(graph, cfg)
    try:
        return any(p.name.startswith(prefix) for p in root.iterdir())
    except OSError:
        return False


class Renumbering:
    """Nodes sorted by part: ``perm[new] = orig``, ``new_of[orig] = new``, and the
    partition book of the new numbering (``book.offsets``: ``k + 1`` ints)."""

    def __init__(self, parts: np.ndarray, k: int) -> None:
        self.perm = np.argsort(parts, kind="stable").astype(np.int64)
        self.new_of = np.empty_like(self.perm)
        self.new_of[self.perm] = np.arange(self.perm.shape[0], dtype=np.int64)
        offsets = np.zeros(k + 1, dtype=np.int64)
        np.cumsum(np.bincount(parts, minlength=k), out=offsets[1:])
        self.book = PartitionBook(offsets)


def make_tmp(root: Path, name: str) -> Path:
    try:
        root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=root))
    except OSError as e:
        raise PartitionError(
            f"partition.root={str(root)!r}: cannot create a partition set there "
            f"({e.strerror or e}); choose a writable directory (partition.root or --root)") from None


def _part_arrays(graph: Graph, ren: Renumbering, p: int, new_splits: dict[str, np.ndarray],
                 baseline: np.ndarray, mark: np.ndarray) -> tuple[dict[str, np.ndarray], PartCounts, PartCut]:
    """Every array of part ``p`` (see :mod:`partition.format`) and its counts."""
    s, t = ren.book.part_range(p)
    owned = ren.perm[s:t]
    deg = graph.indptr[owned + 1] - graph.indptr[owned]
    indptr = np.zeros(t - s + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=np.int64)
    _kernels.permute_rows(graph.indptr, graph.indices, owned, ren.new_of, indptr, indices)
    splits = {}
    for split, ids in new_splits.items():
        lo, hi = np.searchsorted(ids, [s, t])
        splits[split] = ids[lo:hi]
    arrays, counts, cut = part_files(p, ren.book, indptr, indices, graph.x[owned], graph.y[owned], owned,
                                     splits, baseline, mark)
    if graph.edge_rel is not None:  # the relation ids travel with their edges (identity map)
        rel = np.empty_like(indices)
        _kernels.permute_rows(graph.indptr, graph.edge_rel, owned,
                              np.arange(len(graph.edge_type_names), dtype=np.int64), indptr, rel)
        arrays["edge_rel"] = rel
    return arrays, counts, cut


def baseline_parts(train: np.ndarray, k: int, perm: np.ndarray) -> np.ndarray:
    """The random baseline's part of every NEW id (``perm[new] = orig``), from the training
    mask by original id: what the meta's ``random_edge_cut`` counts."""
    return random_parts(train, k, BASELINE_SEED)[perm].astype(np.int32)


def part_files(p: int, book: PartitionBook, indptr: np.ndarray, indices: np.ndarray, x: np.ndarray,
               y: np.ndarray, orig_ids: np.ndarray, splits: dict[str, np.ndarray], baseline: np.ndarray,
               mark: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], PartCounts, PartCut]:
    """The files of part ``p`` from its rows, already in the new numbering (``indices`` are new
    ids, ``splits`` the sorted new ids of its train/val/test nodes): adds the halo, the
    counts and the part's cut figures (``baseline``: :func:`baseline_parts`). ``mark`` (bool
    ``[N]``, all False, left all False) finds the halo in O(N + e_p); without it the halo is
    a sort of the remote in-neighbours (what a process that holds one part and no ``[N]``
    array does)."""
    s, t = book.part_range(p)
    row, random_cut = cut_counts(book, indices, np.repeat(baseline[s:t], np.diff(indptr)), baseline)
    remote = indices[(indices < s) | (indices >= t)]
    if mark is not None:
        mark[remote] = True
        halo = np.flatnonzero(mark).astype(np.int64)
        mark[halo] = False
    else:
        halo = unique_sorted(remote).astype(np.int64)
    arrays: dict[str, np.ndarray] = {
        "indptr": indptr, "indices": indices, "x": x, "y": y,
        "orig_ids": orig_ids, "halo_ids": halo,
        "halo_offsets": book.split_sorted(halo),
    }
    for split in ("train", "val", "test"):
        arrays[f"{split}_idx"] = splits[split]
    counts = PartCounts(nodes=t - s, edges=int(indices.shape[0]), halo=int(halo.shape[0]),
                        cut_edges=int(remote.shape[0]),
                        **{split: int(splits[split].shape[0]) for split in ("train", "val", "test")})
    return arrays, counts, PartCut(row.tolist(), random_cut)


def put_npy(dest: Store, rel: str, arr: np.ndarray) -> FileEntry:
    """Write ``arr`` as the ``.npy`` file ``rel`` of ``dest`` (a local directory or a store),
    checksummed on the way out."""
    with dest.open_write(rel) as f:
        return write_npy_to(f, arr)


class _Writer:
    """Checksums and writes files on one background thread (hashlib, file writes, uploads
    and numpy gathers release the GIL), so part ``p`` is written while part ``p + 1`` is
    gathered. At most two parts' arrays are alive at once."""

    def __init__(self, pool: ThreadPoolExecutor, dest: Store, on_write: Callable[[str], None] | None) -> None:
        self.pool = pool
        self.dest = dest
        self.on_write = on_write
        self.pending: list[tuple[str, Future[FileEntry]]] = []
        self.files: dict[str, FileEntry] = {}

    def submit(self, rel: str, arr: np.ndarray) -> None:
        self.pending.append((rel, self.pool.submit(put_npy, self.dest, rel, arr)))

    def drain(self) -> None:
        for rel, fut in self.pending:
            self.files[rel] = fut.result()
            if self.on_write is not None:
                self.on_write(rel)
        self.pending.clear()


def _write_set(dest: Store, graph: Graph, cfg: PartitionConfig, parts: np.ndarray,
               rec: StepRecorder, key: str, on_write: Callable[[str], None] | None) -> None:
    with rec("renumber"):
        ren = Renumbering(parts, cfg.parts)
        new_splits = {s: np.sort(ren.new_of[graph.split_idx(s)]) for s in ("train", "val", "test")}
    with rec("write"), ThreadPoolExecutor(1, thread_name_prefix="partition-writer") as pool:
        w = _Writer(pool, dest, on_write)
        w.submit("global_degrees.npy", graph.in_degrees()[ren.perm])
        w.submit("new_ids.npy", ren.new_of)
        w.submit("orig_ids.npy", ren.perm)
        mark = np.zeros(graph.num_nodes, dtype=bool)
        baseline = baseline_parts(graph.mask("train"), cfg.parts, ren.perm)
        counts, cuts = [], []
        for p in range(cfg.parts):
            arrays, c, cut = _part_arrays(graph, ren, p, new_splits, baseline, mark)
            counts.append(c)
            cuts.append(cut)
            w.drain()
            for name, arr in arrays.items():
                w.submit(f"part-{p}/{name}.npy", arr)
            del arrays
        w.drain()
    write_meta(dest, key=key, graph_name=graph.name, graph_hash=graph.content_hash(), cfg=cfg,
               num_nodes=graph.num_nodes, num_edges=graph.num_edges, num_features=graph.num_features,
               num_classes=graph.num_classes, feature_dtype=graph.x.dtype.name, offsets=ren.book.offsets,
               counts=counts, cuts=cuts, files=w.files, steps=rec.steps,
               node_types=NodeTypeRanges(names=list(graph.node_type_names),
                                         offsets=list(graph.node_type_offsets))
               if graph.node_type_offsets else None,
               edge_types=list(graph.edge_type_names) if graph.edge_rel is not None else None)
    if on_write is not None:
        on_write("meta.json")


def write_meta(tmp: Path | Store, *, key: str, graph_name: str, graph_hash: str, cfg: PartitionConfig,
               num_nodes: int, num_edges: int, num_features: int, num_classes: int,
               feature_dtype: str, offsets: np.ndarray, counts: list[PartCounts], cuts: list[PartCut],
               files: dict[str, FileEntry], steps: list[StepStat],
               node_types: NodeTypeRanges | None = None,
               edge_types: list[str] | None = None) -> PartitionMeta:
    """Write ``meta.json`` of a set whose array files are already in ``tmp`` (a local
    directory or a store), atomically and last."""
    cut = sum(c.cut_edges for c in counts)
    meta = PartitionMeta(
        format_version=FORMAT_VERSION, key=key, graph_name=graph_name, graph_hash=graph_hash,
        method=cfg.method, settings=settings_of(cfg), num_parts=cfg.parts, num_nodes=num_nodes,
        num_edges=num_edges, num_features=num_features, num_classes=num_classes,
        feature_dtype=feature_dtype, offsets=np.asarray(offsets).tolist(), parts=counts,
        edge_cut=cut, edge_cut_fraction=cut / max(num_edges, 1), files=dict(sorted(files.items())),
        steps=steps, created_utc=datetime.now(UTC).isoformat(timespec="seconds"),
        library={"numpy": np.__version__, "format": str(FORMAT_VERSION)}, node_types=node_types,
        edge_types=edge_types, cut_matrix=[c.row for c in cuts], random_edge_cut=sum(c.random_cut for c in cuts))
    meta = meta.model_copy(update={"meta_sha256": meta_digest(meta)})
    dest = tmp if isinstance(tmp, Store) else LocalStore(tmp)
    dest.write_bytes("meta.json", manifest_bytes(meta.model_dump(mode="json", exclude=unset_optional(meta))))
    return meta


@contextmanager
def cleaned_on_failure(tmp: Path | Store, root: str | Path) -> Iterator[None]:
    """Remove the half-written set ``tmp`` on any failure: a local directory, or a set's
    prefix in an object store (the objects an interrupted upload wrote before its manifest;
    best effort: the error that stopped the build is the one raised). A local write error
    names the root."""
    def clean() -> None:
        with suppress(Exception):  # a store that fails here has failed the build already
            (tmp if isinstance(tmp, Store) else LocalStore(tmp)).remove_all()

    try:
        yield
    except OSError as e:
        clean()
        raise PartitionError(f"partition.root={str(root)!r}: writing the partition set failed "
                             f"({e.strerror or e}); check free space and permissions") from None
    except BaseException:
        clean()
        raise


def move_into_place(tmp: Path, path: Path) -> None:
    """Rename the finished set into place (replacing an old one only when forced)."""
    old = None
    if path.exists():
        old = path.with_name(f".trash-{path.name}-{os.getpid()}")
        os.rename(path, old)
    try:
        os.rename(tmp, path)
    except OSError:
        if old is not None:
            os.rename(old, path)  # put the previous set back
        elif path.exists():  # another process finished the same set first: use theirs
            shutil.rmtree(tmp, ignore_errors=True)
            return
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def reuse_set(location: str | Path, graph_hash: str, cfg: PartitionConfig) -> PartitionSet:
    """The stored set at ``location`` (local, or in the store of ``cfg.storage_options``),
    checked to be of the graph ``graph_hash`` with ``cfg``'s settings and to have every file
    at its recorded size, marked ``reused``."""
    pset = open_partition_set(location, expect_graph_hash=graph_hash, storage_options=cfg.storage_options)
    pset.check_matches(graph_hash, cfg)
    pset.check_files()
    pset.reused = True
    return pset


def build_partition_set(graph: Graph, cfg: PartitionConfig, root: str | Path | None = None, *,
                        force: bool = False, on_write: Callable[[str], None] | None = None
                        ) -> PartitionSet:
    """Partition ``graph`` and write the set under ``root`` (default ``cfg.root``).

    Returns the existing set, without rework, when one with the same graph hash and
    settings is already there (its meta and file sizes are checked; checksums are
    verified when a part is loaded). ``force`` rebuilds it. Steps (time, peak memory)
    are recorded in ``meta.steps``; when no set of the same graph name, method and k
    exists yet, the graph's content hash is computed on a second thread while the graph
    is partitioned, and the ``hash`` step is only the wait for it.

    ``on_write(rel_path)`` is called after each file of the new set is written (last
    ``meta.json``), before the set is renamed into place; tests use it to interrupt the
    write step at a known file.

    A ``root`` that is an object-store URI (``s3://bucket/prefix``; :mod:`partition.storage`)
    gets each file uploaded as it is written and ``meta.json`` last (:func:`_build_in_store`).
    """
    check_request(graph, cfg)
    where = cfg.root if root is None else root
    if is_remote(where):
        return _build_in_store(graph, cfg, open_store(where, cfg.storage_options), force=force,
                               on_write=on_write)
    root = local_path(where)
    rec = StepRecorder()
    if not force and _may_exist(root, graph, cfg):
        with rec("hash"):
            graph_hash = graph.content_hash()
        path = set_path(root, graph, cfg)
        if path.exists():
            return reuse_set(path, graph_hash, cfg)
    tmp = make_tmp(root, _set_prefix(graph, cfg).rstrip("-"))
    with cleaned_on_failure(tmp, root):
        with ThreadPoolExecutor(1, thread_name_prefix="partition-hash") as pool:
            # SHA-256 releases the GIL: the hash (~0.3 s per GB) runs beside symmetrise + METIS
            hashing = pool.submit(graph.content_hash)
            parts = assign_parts(graph, cfg, steps=rec)
            with rec("hash"):  # the wait for the background hash, usually ~0
                graph_hash = hashing.result()
        path = set_path(root, graph, cfg)
        _write_set(LocalStore(tmp), graph, cfg, parts, rec, path.name.rsplit("-", 1)[-1], on_write)
        move_into_place(tmp, path)
    return open_partition_set(path, expect_graph_hash=graph_hash)


def _build_in_store(graph: Graph, cfg: PartitionConfig, store: Store, *, force: bool,
                    on_write: Callable[[str], None] | None) -> PartitionSet:
    """Build the set straight into an object store: no local copy, each file uploaded by
    the writer thread as it is written, ``meta.json`` last. Object stores have no rename, so
    a set is complete or absent by its manifest: a set without ``meta.json`` does not exist
    for a reader, and a forced rebuild deletes the old manifest before it writes anything."""
    rec = StepRecorder()
    with rec("hash"):
        graph_hash = graph.content_hash()
    name = check_component("partition set name (dataset.name)", _set_prefix(graph, cfg) + set_key(graph_hash, cfg))
    dest = store.child(name)
    if not force and dest.exists("meta.json"):
        return reuse_set(dest.uri, graph_hash, cfg)
    dest.remove("meta.json")
    parts = assign_parts(graph, cfg, steps=rec)
    with cleaned_on_failure(dest, store.uri):
        _write_set(dest, graph, cfg, parts, rec, name.rsplit("-", 1)[-1], on_write)
    return open_partition_set(dest.uri, expect_graph_hash=graph_hash, storage_options=cfg.storage_options)

"""Partition a chunked graph (:mod:`partition.chunked`) with Ray tasks, never holding it whole.

:func:`partition_chunks` writes the same partition set as
:func:`~partition.build.build_partition_set` would for the same graph and settings (same
directory name, files and checksums, :mod:`partition.format`), in five steps:

1. ``blocks``: one task per edge chunk sorts its edges by destination and splits them by row
   block (``block_rows`` rows each); one task per row block gathers its pieces into the
   block's in-neighbour CSR (rows in edge-id order, as the in-memory CSR has them) and
   returns its in-degrees. Pieces and blocks hold node ids as the chunks do
   (:func:`~partition.chunked.id_dtype`: int32 below 2^31 nodes).
2. ``assign``: the method (``random``, ``stream`` or ``multilevel``; :mod:`partition.multilevel`)
   runs its per-block work as one task per block; between rounds the coordinator holds
   ``O(N)`` arrays only (degrees, weights, labels, parts).
3. ``renumber``: nodes sorted by part, as :class:`~partition.build.Renumbering` does.
4. ``write``: one task per row block cuts its rows (and its node chunk's features, labels and
   splits) by part, renumbered ids again as :func:`~partition.chunked.id_dtype`; the blocks
   are then removed; one task per part concatenates its pieces and writes the part's files
   (int64 ids, :mod:`partition.format`) through :func:`partition.build.part_files` and
   :func:`partition.format.write_npy`, removing its pieces. The disk the set's temporary
   directory needs at its peak is therefore about the edges once in the chunks' id width
   (pieces) plus once as int64 (the parts).
5. ``meta.json`` by :func:`partition.build.write_meta`, last; a local set is then renamed
   into place.

Where it writes: with a local ``partition.root`` everything (pieces included, under
``.work/``) goes to a temporary directory beside the set, which every Ray node must see (a
shared file system on a cluster). With an object-store root (``s3://bucket/prefix``) no
node needs a shared file system: the pieces are objects under the set's own prefix
(``<set>/.work/``, removed before ``meta.json`` is written), each task reads and writes them
through :mod:`partition.storage`, and each part's files are uploaded by the task that
writes the part; the set exists for a reader only once ``meta.json`` is there. The chunks
themselves may be local or on object storage too (:func:`~partition.chunked.open_chunks`).

Every task is retried by Ray on a lost worker (``max_retries``); an exception in a task, a
chunk failing its checksum or an interrupt removes the temporary directory (the set's
prefix in a store), so no half set is left under the final name.

Ray Data was not used: it needs pandas and pyarrow, which this project does not install,
and its shuffles and groupbys do not keep the order of edges inside a row, which step 1
must keep so that the files equal those of the in-memory path byte for byte. This module
is the only one of ``partition/`` that imports Ray.
"""

from __future__ import annotations

import io
import logging
import re
import resource
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import ray
from tqdm import tqdm

from partition import _kernels
from partition.balance import weights_from
from partition.book import PartitionBook
from partition.build import (
    Renumbering,
    baseline_parts,
    cleaned_on_failure,
    make_tmp,
    move_into_place,
    part_files,
    put_npy,
    reuse_set,
    set_key,
    set_prefix,
    write_meta,
)
from partition.chunked import SPLIT_CODES, ChunkedGraph, id_dtype, open_chunks
from partition.config import PartitionConfig
from partition.errors import PartitionError
from partition.format import FileEntry, PartCounts, PartCut
from partition.methods import _random_parts, check_assignment, check_counts, check_feasible
from partition.multilevel import BLOCK_ROWS, Block, block_bounds, blocked_parts
from partition.paths import check_component
from partition.steps import StepRecorder
from partition.storage import LocalStore, Store, is_remote, local_path, open_store
from partition.store import PartitionSet, open_partition_set

__all__ = ["CHUNKED_METHODS", "ChunkedRun", "RayBlocks", "partition_chunks", "run_chunks"]

T = TypeVar("T")
_ROUND = re.compile(r" (round|pass) \d+/\d+$")
CHUNKED_METHODS = ("random", "stream", "multilevel")
MAX_RETRIES = 3


def _measured(fn: Callable[..., Any], *args: Any) -> tuple[Any, int]:
    """``fn(*args)`` and the peak resident memory of this task: of its process during the
    call, timed as one step (Ray reuses task processes; a step resets the peak first where
    Linux allows), or of a child it waited for when that was larger (METIS on the coarse
    graph runs in a child)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    rec = StepRecorder()
    with rec("task"):
        out = fn(*args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return out, max(rec.steps[0].peak_rss_bytes, after * 1024 if after > children else 0)


@ray.remote(max_retries=MAX_RETRIES)
def _task(fn: Callable[..., Any], *args: Any) -> tuple[Any, int]:
    return _measured(fn, *args)


@ray.remote(max_retries=MAX_RETRIES, num_returns=2)
def _kept_task(fn: Callable[..., Any], *args: Any) -> tuple[Any, int]:
    return _measured(fn, *args)


@ray.remote(max_retries=MAX_RETRIES)
def _gather_task(fn: Callable[..., Any], refs: list[ray.ObjectRef], *args: Any) -> tuple[Any, int]:
    # ``refs`` nested in a list are not resolved before the task starts: as arguments every
    # piece would be fetched and held at once (14 GB of coarse edges at 2.18B edges);
    # fetched one at a time, the task holds one piece beside what it merged
    return _measured(lambda *a: fn((ray.get(r) for r in refs), *a), *args)


def _save(work: Store, rel: str, arr: np.ndarray) -> None:
    """Write an intermediate array to the work area (a local directory or a store prefix)."""
    with work.open_write(rel) as f:
        np.lib.format.write_array(f, np.asanyarray(arr), allow_pickle=False)


def _load(work: Store, rel: str, *, mmap: bool = False) -> np.ndarray:
    """An intermediate array: memory-mapped when ``mmap`` and the work area is local, else
    read whole (one GET on object storage)."""
    if isinstance(work, LocalStore):
        return np.load(work.root / rel, mmap_mode="r" if mmap else None, allow_pickle=False)
    return np.load(io.BytesIO(work.read_bytes(rel)), allow_pickle=False)


def _load_block(work: Store, b: int, lo: int, hi: int) -> Block:
    return Block(index=b, lo=lo, hi=hi, indptr=_load(work, f"block-{b}/indptr.npy", mmap=True),
                 indices=_load(work, f"block-{b}/indices.npy", mmap=True))


def _on_block(work: Store, b: int, lo: int, hi: int, fn: Callable[..., Any], *shared: Any) -> Any:
    return fn(_load_block(work, b, lo, hi), *shared)


class _Runner:
    """Submits tasks, shows progress, and keeps the largest task peak RSS seen per kind of
    task (its progress label without the round: ``coarsen``, ``write parts``)."""

    def __init__(self, progress: bool) -> None:
        self.progress = progress
        self.task_peaks: dict[str, int] = {}

    def record(self, desc: str, peaks: Sequence[int]) -> None:
        kind = _ROUND.sub("", desc)
        self.task_peaks[kind] = max(self.task_peaks.get(kind, 0), *peaks)

    def wait(self, refs: list[Any], desc: str) -> list[Any]:
        """Wait for ``refs`` with a progress bar; return their values."""
        left = list(refs)
        with tqdm(total=len(refs), desc=desc, disable=not self.progress, leave=False) as bar:
            while left:
                done, left = ray.wait(left, num_returns=1)
                bar.update(len(done))
        return list(ray.get(refs))

    def results(self, refs: list[Any], desc: str) -> list[Any]:
        """Values of tasks that return ``(value, peak RSS)``."""
        got = self.wait(refs, desc)
        if got:
            self.record(desc, [int(o[1]) for o in got])
        return [o[0] for o in got]

    def run(self, calls: Sequence[tuple[Any, ...]], desc: str) -> list[Any]:
        return self.results([_task.remote(*c) for c in calls], desc)


class RayBlocks:
    """:class:`~partition.multilevel.BlockMap` over row blocks stored under ``work``: one Ray
    task per block; arrays shared by every block go to the object store once per map."""

    def __init__(self, work: Store, bounds: np.ndarray, runner: _Runner) -> None:
        self.work, self.bounds, self.runner = work, bounds, runner

    def map(self, fn: Callable[..., T], shared: tuple[Any, ...], *, desc: str,
            keep: bool = False) -> list[Any]:
        refs = [ray.put(a) for a in shared]
        calls = [(self.work, b, int(self.bounds[b]), int(self.bounds[b + 1]), fn, *refs)
                 for b in range(self.bounds.shape[0] - 1)]
        if not keep:
            return self.runner.results([_task.remote(_on_block, *c) for c in calls], desc)
        pairs = [_kept_task.remote(_on_block, *c) for c in calls]
        peaks = self.runner.wait([p[1] for p in pairs], desc)  # the results stay in the store
        self.runner.record(desc, peaks)
        return [p[0] for p in pairs]

    def call(self, fn: Callable[..., T], pieces: list[Any], *args: Any) -> T:
        return self.runner.results([_gather_task.remote(fn, pieces, *args)], fn.__name__)[0]


# ---- step 1: edge chunks -> row blocks ------------------------------------------------------

def _split_edges(cg: ChunkedGraph, j: int, bounds: np.ndarray, work: Store) -> np.ndarray:
    """Edges of chunk ``j`` sorted (stably) by destination, one piece per row block."""
    src, dst = cg.edges(j)
    order = np.argsort(dst, kind="stable")
    src, dst = src[order], dst[order]
    cuts = np.searchsorted(dst, bounds)
    counts = np.diff(cuts)
    for b in np.flatnonzero(counts):
        _save(work, f"e{j}-b{b}-src.npy", src[cuts[b]:cuts[b + 1]])
        _save(work, f"e{j}-b{b}-dst.npy", dst[cuts[b]:cuts[b + 1]])
    return counts


def _gather_block(b: int, lo: int, hi: int, chunks: list[int], work: Store) -> np.ndarray:
    """Row block ``b``'s CSR from its pieces (edge-chunk order kept inside each row)."""
    src = [_load(work, f"e{j}-b{b}-src.npy") for j in chunks]
    dst = [_load(work, f"e{j}-b{b}-dst.npy") for j in chunks]
    s = np.concatenate(src) if src else np.zeros(0, np.int64)
    d = np.concatenate(dst) - lo if dst else np.zeros(0, np.int64)
    del src, dst
    order = np.argsort(d, kind="stable")
    indptr = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(np.bincount(d, minlength=hi - lo), out=indptr[1:])
    _save(work, f"block-{b}/indptr.npy", indptr)
    _save(work, f"block-{b}/indices.npy", s[order])
    for j in chunks:
        work.remove(f"e{j}-b{b}-src.npy")
        work.remove(f"e{j}-b{b}-dst.npy")
    return np.diff(indptr)


def _build_blocks(cg: ChunkedGraph, bounds: np.ndarray, work: Store, runner: _Runner) -> np.ndarray:
    nb = bounds.shape[0] - 1
    counts = runner.run([(_split_edges, cg, j, bounds, work) for j in range(len(cg.manifest.edge_chunks))],
                        "split edge chunks")
    has = np.stack(counts) > 0 if counts else np.zeros((0, nb), dtype=bool)
    degs = runner.run([(_gather_block, b, int(bounds[b]), int(bounds[b + 1]),
                        np.flatnonzero(has[:, b]).tolist(), work) for b in range(nb)], "build row blocks")
    return np.concatenate(degs).astype(np.int64)


def _node_splits(cg: ChunkedGraph, j: int) -> np.ndarray:
    """Split codes of node chunk ``j`` (read in a task: the coordinator reads no chunk)."""
    return cg.read("nodes", j, "split")


# ---- step 4: write the parts ---------------------------------------------------------------

def _node_rows(cg: ChunkedGraph, lo: int, hi: int) -> dict[str, np.ndarray]:
    """Features, labels and split codes of rows ``[lo, hi)`` from the node chunks covering them."""
    out: dict[str, list[np.ndarray]] = {"x": [], "y": [], "split": []}
    for j, c in enumerate(cg.manifest.node_chunks):
        if c.hi <= lo or c.lo >= hi:
            continue
        a, z = max(lo, c.lo) - c.lo, min(hi, c.hi) - c.lo
        for name in out:
            out[name].append(cg.read("nodes", j, name)[a:z])
    return {name: np.concatenate(v) for name, v in out.items()}


def _cut_block(block: Block, cg: ChunkedGraph, parts: np.ndarray, new_of: np.ndarray, k: int,
               work: Store) -> None:
    """Cut row block ``block`` by part: pieces of every part's rows, ids already renumbered."""
    rows = _node_rows(cg, block.lo, block.hi)
    local = parts[block.lo:block.hi]
    order = np.argsort(local, kind="stable")
    cuts = np.searchsorted(local[order], np.arange(k + 1))
    deg = np.diff(block.indptr)
    for p in range(k):
        r = order[cuts[p]:cuts[p + 1]]
        if r.size == 0:
            continue
        ptr = np.zeros(r.size + 1, dtype=np.int64)
        np.cumsum(deg[r], out=ptr[1:])
        idx = np.empty(int(ptr[-1]), dtype=id_dtype(new_of.shape[0]))
        _kernels.permute_rows(np.asarray(block.indptr), np.asarray(block.indices), r, new_of, ptr, idx)
        piece = {"deg": deg[r], "indices": idx, "x": rows["x"][r], "y": rows["y"][r],
                 "orig": r + block.lo, "split": rows["split"][r]}
        for name, a in piece.items():
            _save(work, f"b{block.index}-p{p}-{name}.npy", a)


def _write_part(p: int, book: PartitionBook, nb: int, num_features: int, work: Store, dest: Store,
                baseline: np.ndarray) -> tuple[dict[str, FileEntry], PartCounts, PartCut]:
    """Concatenate part ``p``'s pieces in block order and write its files to ``dest``."""
    have = [b for b in range(nb) if work.exists(f"b{b}-p{p}-deg.npy")]
    empty: dict[str, np.ndarray] = {"deg": np.zeros(0, np.int64), "indices": np.zeros(0, np.int64),
             "x": np.zeros((0, num_features), np.float32), "y": np.zeros(0, np.int64),
             "orig": np.zeros(0, np.int64), "split": np.zeros(0, np.int8)}
    got: dict[str, np.ndarray] = {name: np.concatenate([e] + [_load(work, f"b{b}-p{p}-{name}.npy") for b in have])
                                  for name, e in empty.items()}
    indptr = np.zeros(got["deg"].shape[0] + 1, dtype=np.int64)
    np.cumsum(got["deg"], out=indptr[1:])
    s = book.part_range(p)[0]
    splits = {name: np.flatnonzero(got["split"] == code).astype(np.int64) + s
              for name, code in SPLIT_CODES.items()}
    arrays, counts, cut = part_files(p, book, indptr, got["indices"], got["x"], got["y"], got["orig"], splits,
                                     baseline)
    del got
    files = {f"part-{p}/{name}.npy": put_npy(dest, f"part-{p}/{name}.npy", a) for name, a in arrays.items()}
    for b in have:
        for name in empty:
            work.remove(f"b{b}-p{p}-{name}.npy")
    return files, counts, cut


# ---- the pipeline ----------------------------------------------------------------------------

def _assign(cg: ChunkedGraph, blocks: RayBlocks, degrees: np.ndarray, train: np.ndarray,
            cfg: PartitionConfig, rec: StepRecorder) -> np.ndarray:
    if cfg.parts == 1:
        return np.zeros(cg.num_nodes, dtype=np.int64)
    if cfg.method == "random":
        with rec("random"):
            return _random_parts(train, cfg.parts, cfg.seed)
    w, names = weights_from(train, degrees, cfg)
    return blocked_parts(blocks, w, names, cfg, rec)


@dataclass(frozen=True)
class ChunkedRun:
    """What :func:`run_chunks` did: the set, the largest peak resident memory of any of its
    tasks, and that peak per kind of task (``coarsen``, ``refine``, ``write parts``, ...;
    the coordinator's own time and memory per step are in ``pset.meta.steps``)."""

    pset: PartitionSet
    task_peak_rss: dict[str, int] = field(default_factory=dict)

    @property
    def worker_peak_rss(self) -> int:
        return max(self.task_peak_rss.values(), default=0)


def partition_chunks(chunks: str | Path | ChunkedGraph, cfg: PartitionConfig,
                     root: str | Path | None = None, *, force: bool = False,
                     block_rows: int = BLOCK_ROWS, progress: bool = True) -> PartitionSet:
    """:func:`run_chunks`, returning the set only."""
    return run_chunks(chunks, cfg, root, force=force, block_rows=block_rows, progress=progress).pset


def run_chunks(chunks: str | Path | ChunkedGraph, cfg: PartitionConfig,
               root: str | Path | None = None, *, force: bool = False,
               block_rows: int = BLOCK_ROWS, progress: bool = True) -> ChunkedRun:
    """Partition the chunked graph at ``chunks`` on the running Ray instance (a local one is
    started if none is) and write its set under ``root`` (default ``cfg.root``): a local
    directory, or an object-store URI opened with ``cfg.storage_options``. Chunks given as a
    location are opened without storage options (credentials from the environment); open a
    :class:`~partition.chunked.ChunkedGraph` with its own options to pass them.

    Returns the existing set without rework when one with the same graph hash and settings
    exists (``force`` rebuilds). ``block_rows`` sets the rows of a block (one task each); the
    same blocks give the same parts as :func:`partition.methods.assign_parts` with
    :class:`~partition.multilevel.GraphBlocks` of that size. The set's ``meta.steps`` hold
    the coordinator's time and memory per step; the returned :class:`ChunkedRun` the
    tasks' peak resident memory per kind of task (none when the set was reused).
    """
    cg = chunks if isinstance(chunks, ChunkedGraph) else open_chunks(chunks)
    m = cg.manifest
    if cfg.method not in CHUNKED_METHODS:
        raise PartitionError(f"partition.method={cfg.method!r} needs the whole graph in one process; "
                             f"a chunked graph is partitioned with one of {', '.join(CHUNKED_METHODS)}")
    check_counts(m.num_nodes, m.num_train, cfg)
    where = cfg.root if root is None else root
    name = set_prefix(m.name, cfg) + set_key(m.graph_hash, cfg)
    local: Path | None = None
    if is_remote(where):  # the set's own prefix is written in place, meta.json last
        dest = open_store(where, cfg.storage_options).child(
            check_component("partition set name (dataset.name)", name))
        found: str | Path | None = dest.uri if dest.exists("meta.json") else None
    else:  # a temp directory beside the set, renamed into place
        local = local_path(where) / name
        found = local if local.exists() else None
    if found is not None and not force:
        return ChunkedRun(reuse_set(found, m.graph_hash, cfg))
    if not ray.is_initialized():
        ray.init(include_dashboard=False, logging_level=logging.WARNING)
    if local is None:
        dest.remove("meta.json")  # a forced rebuild: the old set is absent from here on
    else:
        dest = LocalStore(make_tmp(local.parent, set_prefix(m.name, cfg).rstrip("-")))
    work = dest.child(".work")
    runner = _Runner(progress)
    rec = StepRecorder()
    with cleaned_on_failure(dest, where):
        bounds = block_bounds(m.num_nodes, block_rows)
        with rec("blocks"):
            degrees = _build_blocks(cg, bounds, work, runner)
            codes = np.concatenate(runner.run([(_node_splits, cg, j) for j in range(len(m.node_chunks))],
                                              "read splits"))
            train = codes == SPLIT_CODES["train"]
        check_feasible(train, degrees, cfg)  # needs the in-degrees: the first pass over the edges
        blocks = RayBlocks(work, bounds, runner)
        parts = _assign(cg, blocks, degrees, train, cfg, rec)
        check_assignment(parts, np.flatnonzero(train), cfg)
        with rec("renumber"):
            ren = Renumbering(parts, cfg.parts)
            baseline = ray.put(baseline_parts(train, cfg.parts, ren.perm))
        del train, codes
        with rec("write"):
            files = {"global_degrees.npy": put_npy(dest, "global_degrees.npy", degrees[ren.perm]),
                     "new_ids.npy": put_npy(dest, "new_ids.npy", ren.new_of),
                     "orig_ids.npy": put_npy(dest, "orig_ids.npy", ren.perm)}
            blocks.map(_cut_block, (cg, parts, ren.new_of, cfg.parts, work), desc="cut blocks by part")
            for b in range(bounds.shape[0] - 1):  # the pieces hold every edge now
                work.child(f"block-{b}").remove_all()
            written = runner.run([(_write_part, p, ren.book, bounds.shape[0] - 1, m.num_features,
                                   work, dest, baseline) for p in range(cfg.parts)], "write parts")
        for f, _, _ in written:
            files.update(f)
        work.remove_all()
        write_meta(dest, key=name.rsplit("-", 1)[-1], graph_name=m.name, graph_hash=m.graph_hash,
                   cfg=cfg, num_nodes=m.num_nodes, num_edges=m.num_edges, num_features=m.num_features,
                   num_classes=m.num_classes, feature_dtype="float32", offsets=ren.book.offsets,
                   counts=[c for _, c, _ in written], cuts=[c for _, _, c in written], files=files,
                   steps=rec.steps)
        if local is not None:
            assert isinstance(dest, LocalStore)
            move_into_place(dest.root, local)
    pset = open_partition_set(local or dest.uri, expect_graph_hash=m.graph_hash, storage_options=cfg.storage_options)
    return ChunkedRun(pset, dict(runner.task_peaks))

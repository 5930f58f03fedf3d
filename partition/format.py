"""On-disk format of a partition set (``FORMAT_VERSION = 1``).

One directory per partition set, named ``<graph>-<method>-k<k>-<key>`` under the
partition root (``partition.root``, default ``partitions/``). ``key`` is a hash of the
graph's content hash, every setting of :class:`~partition.config.PartitionConfig` except
``root`` and ``metis_spill``, and the format version: a changed graph or setting makes a new set, the same
ones reuse it. Every array is a plain ``.npy`` file, so a worker memory-maps its own part
without reading the others. The set is written into ``<root>/.tmp-...`` and renamed into
place, so an interrupted run never leaves a half set under the final name. ``N`` nodes,
``k`` parts, ``n_p`` nodes and ``e_p`` in-edges owned by part ``p``, ``F`` features::

    <graph>-<method>-k<k>-<key>/
    ├── meta.json              the PartitionMeta below (JSON)
    ├── global_degrees.npy     int64 [N]         in-degree of every node, new numbering
    ├── new_ids.npy            int64 [N]         new id of each original id
    ├── orig_ids.npy           int64 [N]         original id of each new id
    └── part-<p>/              one per part p = 0 .. k-1; owns new ids [offsets[p], offsets[p+1])
        ├── indptr.npy         int64 [n_p + 1]   CSR of in-neighbours; row r is node offsets[p] + r
        ├── indices.npy        int64 [e_p]       in-neighbour ids in the new global numbering
        ├── x.npy              float32 [n_p, F]  features of the owned nodes
        ├── y.npy              int64 [n_p]       labels of the owned nodes
        ├── train_idx.npy      int64             new ids of owned training nodes, sorted
        ├── val_idx.npy        int64             new ids of owned validation nodes, sorted
        ├── test_idx.npy       int64             new ids of owned test nodes, sorted
        ├── orig_ids.npy       int64 [n_p]       original id of each owned node
        ├── halo_ids.npy       int64 [h_p]       remote in-neighbours (1-hop halo), sorted by new id
        └── halo_offsets.npy   int64 [k + 1]     halo_ids[halo_offsets[q]:halo_offsets[q + 1]] are owned by q

A typed training graph written as a format-1 set (one with ``train_weight``; typed graphs
otherwise train on their typed format-2 set, :mod:`partition.training_set`) adds
``part-<p>/edge_rel.npy`` (int64 ``[e_p]``: the relation id of each stored edge, aligned
with ``indices``; the names are the meta's ``edge_types``): the relation travels with its
edge, so parallel relations between the same node types stay apart.

Renumbering: nodes are sorted by part (stable, so original order is kept inside a part);
part ``p`` owns the contiguous new ids ``[offsets[p], offsets[p + 1])`` and the partition
book (:class:`~partition.book.PartitionBook`) is just ``offsets``:
``owner(v) = searchsorted(offsets, v, side='right') - 1``. A loaded part checks that its
``halo_offsets`` equal the book's grouping of its ``halo_ids``, and layer-wise evaluation
sends one request per owner straight from them. The
stored CSR is the graph's own in-neighbour CSR (a directed graph stays directed; METIS
saw the symmetrised copy), self-loops and isolated nodes included.

``meta.json`` fields (:class:`PartitionMeta`):

* ``format_version`` (int): 1. Another value is refused with a message saying how to rebuild.
* ``key`` (str): the hash in the directory name (graph hash + settings + format version).
* ``graph_name``, ``graph_hash`` (str): ``Graph.name`` and ``Graph.content_hash()``.
* ``method`` (str) and ``settings`` (object): the ``PartitionConfig`` fields except
  ``root`` and ``metis_spill``.
* ``num_parts`` (k), ``num_nodes`` (N), ``num_edges`` (stored directed edges),
  ``num_features`` (F), ``num_classes`` (int); ``feature_dtype`` (str, ``float32``).
* ``offsets`` (list of k + 1 ints): the partition book.
* ``parts`` (list of k objects): per part ``nodes``, ``edges`` (stored in-edges), ``train``,
  ``val``, ``test``, ``halo`` (distinct remote in-neighbours) and ``cut_edges`` (in-edges
  from another part).
* ``edge_cut`` (int) and ``edge_cut_fraction`` (float): stored edges whose two ends have
  different owners, as a count and as a share of ``num_edges``.
* ``files`` (object): for every ``.npy`` file, keyed by its path relative to the set,
  ``sha256`` (hex of the whole file), ``bytes``, ``dtype`` and ``shape``.
* ``steps`` (list): name, wall and CPU seconds, resident memory at the start and peak of
  each build step.
* ``created_utc`` (str, ISO 8601), ``library`` (object: versions that wrote the set).
* ``node_types`` (object, only for a typed graph trained as one graph): ``names`` and
  ``offsets``, type ``names[t]`` being ORIGINAL ids ``offsets[t]:offsets[t + 1]``; absent
  otherwise (neither written nor digested, so older sets keep their digest).
* ``edge_types`` (list of str, only for a typed graph): the relation names
  (``"src:relation:dst"``) that ``part-<p>/edge_rel.npy`` indexes; when present every
  part has that file. Absent otherwise, like ``node_types``.
* ``cut_matrix`` (list of k lists of k ints) and ``random_edge_cut`` (int), written by the
  builders: row ``p`` counts part ``p``'s stored in-edges by the part that owns their
  source, and ``random_edge_cut`` the stored edges that the random baseline (the seeded
  random assignment of the same training nodes, seed 0: :func:`partition.methods.random_parts`)
  cuts, so a report of the set needs no part's file
  (:func:`partition.report.set_report`). Absent from sets written before them, like
  ``node_types``; the report then reads the parts.
* ``meta_sha256`` (str): SHA-256 of this JSON without this field (sorted keys), so an
  edited ``meta.json`` is detected like an edited array file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from partition.errors import PartitionChecksumError
from partition.manifest import CHUNK, FileMismatch, HashingWriter, json_digest, verify
from partition.paths import join_under
from partition.steps import StepStat

__all__ = [
    "EDGE_REL_FILE", "FORMAT_VERSION", "PART_FILES", "SET_FILES", "FileEntry", "NodeTypeRanges", "PartCounts", "PartCut",
    "PartitionMeta",
    "check_present", "meta_digest", "read_npy", "write_npy", "write_npy_to",
]

FORMAT_VERSION = 1
"""The format version of a homogeneous partition set (``meta.json``'s ``format_version``);
a set of another version is refused with the command that rebuilds it."""
SET_FILES = ("global_degrees.npy", "new_ids.npy", "orig_ids.npy")
PART_FILES = ("indptr.npy", "indices.npy", "x.npy", "y.npy", "train_idx.npy", "val_idx.npy",
              "test_idx.npy", "orig_ids.npy", "halo_ids.npy", "halo_offsets.npy")
#: the per-edge relation ids, written only for a typed graph (``edge_types`` in the meta)
EDGE_REL_FILE = "edge_rel.npy"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileEntry(_Model):
    """Checksum and layout of one ``.npy`` file of the set."""

    sha256: str
    bytes: int
    dtype: str
    shape: list[int]


class PartCounts(_Model):
    """Sizes of one part, as written."""

    nodes: int
    edges: int
    train: int
    val: int
    test: int
    halo: int
    cut_edges: int


@dataclass(frozen=True)
class PartCut:
    """What a builder counts while it writes part ``p``: its row of the cut matrix and the
    in-edges the random baseline cuts (``cut_matrix`` and ``random_edge_cut`` of the meta)."""

    row: list[int]
    random_cut: int


class NodeTypeRanges(_Model):
    """A typed graph made homogeneous: type ``names[t]`` is ORIGINAL ids
    ``offsets[t]:offsets[t + 1]`` (absent from the meta of an untyped graph)."""

    names: list[str]
    offsets: list[int]


class PartitionMeta(_Model):
    """``meta.json``: everything a reader needs before opening any array (see module docstring)."""

    format_version: int
    key: str
    graph_name: str
    graph_hash: str
    method: str
    settings: dict[str, Any]
    num_parts: int = Field(ge=1)
    num_nodes: int = Field(ge=1)
    num_edges: int = Field(ge=0)
    num_features: int = Field(ge=0)
    num_classes: int = Field(ge=1)
    feature_dtype: str
    offsets: list[int]
    parts: list[PartCounts]
    edge_cut: int
    edge_cut_fraction: float
    files: dict[str, FileEntry]
    steps: list[StepStat]
    created_utc: str
    library: dict[str, str]
    node_types: NodeTypeRanges | None = None
    edge_types: list[str] | None = None
    cut_matrix: list[list[int]] | None = None
    random_edge_cut: int | None = None
    meta_sha256: str = ""


def unset_optional(meta: BaseModel) -> set[str]:
    """Optional fields left unset: neither written nor digested, so sets written before
    such a field existed keep their digest."""
    return {k for k in ("node_types", "edge_types", "cut_matrix", "random_edge_cut") if getattr(meta, k, 0) is None}


def meta_digest(meta: BaseModel) -> str:
    """SHA-256 of the meta's JSON without ``meta_sha256`` (sorted keys, compact)."""
    return json_digest(meta.model_dump(mode="json", exclude={"meta_sha256", *unset_optional(meta)}))


def write_npy(path: Path, arr: np.ndarray) -> FileEntry:
    """Write ``arr`` as ``.npy`` and checksum the bytes on the way out (no second read)."""
    with path.open("wb") as raw:
        return write_npy_to(raw, arr)


def write_npy_to(raw: BinaryIO, arr: np.ndarray) -> FileEntry:
    """Write ``arr`` as ``.npy`` to an open binary file (a local file or an object being
    uploaded), checksumming the bytes on the way out."""
    arr = np.ascontiguousarray(arr)
    f = HashingWriter(raw)
    np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(arr))  # type: ignore[arg-type]
    data = memoryview(arr.reshape(-1)).cast("B") if arr.size else memoryview(b"")  # type: ignore[arg-type]
    for start in range(0, len(data), CHUNK):
        f.write(data[start:start + CHUNK])
    rec = f.record()
    return FileEntry(sha256=rec.sha256, bytes=rec.bytes, dtype=arr.dtype.str, shape=list(arr.shape))


def check_present(root: Path, rel: str, entry: FileEntry, *, verify_sha256: bool = False) -> Path:
    """The file ``rel`` of the set at ``root``, checked against ``entry``: present with its
    recorded size and, with ``verify_sha256``, its recorded SHA-256; else
    :class:`PartitionChecksumError` naming the file and the fix."""
    path = join_under(root, rel, "meta.json files")
    how = f"delete {root} to rebuild the set (or rerun with force=True / --force)"
    try:
        return verify(path, entry.bytes, entry.sha256 if verify_sha256 else None)
    except FileMismatch as e:
        if e.problem == "missing":
            raise PartitionChecksumError(f"partition file {path} is missing; {how}") from None
        if e.problem == "size":
            raise PartitionChecksumError(
                f"partition file {path} has {e.got} bytes, meta.json recorded {entry.bytes} "
                f"(truncated or replaced); {how}") from None
        raise PartitionChecksumError(
            f"partition file {path} fails its checksum (sha256 {str(e.got)[:16]}..., meta.json "
            f"recorded {entry.sha256[:16]}...): it was altered or corrupted; {how}") from None


def read_npy(root: Path, rel: str, entry: FileEntry, *, mmap: bool, verify: bool) -> np.ndarray:
    """Load one array file, checking size, optional SHA-256, dtype and shape against ``entry``."""
    path = check_present(root, rel, entry, verify_sha256=verify)
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except ValueError as e:
        raise PartitionChecksumError(f"partition file {path} is not a readable .npy file ({e}); "
                                     f"delete {root} to rebuild the set") from None
    if arr.dtype.str != entry.dtype or list(arr.shape) != entry.shape:
        raise PartitionChecksumError(
            f"partition file {path} holds {arr.dtype.str} {list(arr.shape)}, meta.json recorded "
            f"{entry.dtype} {entry.shape}; delete {root} to rebuild the set")
    return arr

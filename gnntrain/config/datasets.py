"""The ``dataset:`` section: one model per ``source``, and where relative paths resolve.

:data:`DatasetConfig` is the union of the source models, discriminated on ``source``; each
model holds only its own fields, so a key of another source is refused with its path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from gnntrain.config.base import ConfigError, Frozen, check_fracs
from gnntrain.config.loading import format_errors
from partition.paths import check_component

__all__ = [
    "DATA_ENV", "HETERO_SOURCES", "ChunksDataset", "CsvDataset", "DatasetConfig", "HeteroDatasetBase",
    "HeteroDirDataset", "HeteroParquetDataset",
    "HeterophilousDataset", "LightGcnDataset", "LoadedDataset", "NpzDataset", "OgbDataset", "OgbMagDataset",
    "OgblDataset", "ParquetDataset", "ParquetEdges", "ParquetNodes", "PlanetoidDataset",
    "SyntheticConfig", "SyntheticDataset", "SyntheticHeteroConfig", "SyntheticHeteroDataset",
    "data_root", "parse_dataset",
]


class SyntheticConfig(Frozen):
    """Power-law graph with planted classes (``dataset.source: synthetic``).

    See :mod:`gnntrain.data.synthetic`. The defaults are tuned so that structure
    matters: on a 20k-node instance a feature-only MLP reaches 0.34 test accuracy and
    a 3-layer full-batch GraphSAGE 0.91 (``python -m bench.synthetic`` measures it).
    """

    nodes: int = Field(100_000, ge=10)
    avg_degree: float = Field(20.0, gt=0, description="mean in-degree after symmetrising")
    features: int = Field(100, ge=1)
    classes: int = Field(40, ge=2)
    homophily: float = Field(0.55, ge=0.0, le=1.0, description="share of edges inside a class")
    power_law: float = Field(2.5, gt=1.0, description="exponent of the degree distribution")
    feature_noise: float = Field(3.0, ge=0.0, description="noise std relative to centroid spread")
    feature_mismatch: float = Field(0.5, ge=0.0, lt=1.0, description="share of nodes whose "
                                    "features centre on another class's centroid")
    unit_variance: bool = Field(False, description="divide the features by sqrt(1 + "
                                "feature_noise^2), so each has about unit variance (the raw "
                                "features' std is about that factor)")
    train_frac: float = Field(0.6, gt=0.0, lt=1.0)
    val_frac: float = Field(0.2, ge=0.0, lt=1.0)
    seed: int = 0

    @model_validator(mode="after")
    def _fracs(self) -> SyntheticConfig:
        check_fracs(self.train_frac, self.val_frac, "")
        if self.avg_degree >= self.nodes:
            raise ValueError(f"avg_degree={self.avg_degree} must be below nodes={self.nodes}")
        return self


class _DatasetBase(Frozen):
    """What every dataset config has: its ``name`` and its ``source`` (the discriminator)."""

    name: str

    @field_validator("name", "planetoid_name", check_fields=False)
    @classmethod
    def _one_component(cls, v: str | None, info: ValidationInfo) -> str | None:
        # both become directory names (run directory, partition set, <path>/<Name>/raw)
        return v if v is None else check_component(str(info.field_name), v)


def _fallback_dim() -> Any:
    return Field(32, ge=1, description="width of random_projection features")


class LoadedDataset(_DatasetBase):
    """The load-time cleaning and split options shared by every source read from files.

    Each ``source`` and its files are documented in the loader module named for it
    under ``gnntrain/data/`` (``planetoid``, ``npz`` / ``heterophilous``, ``ogb``,
    ``csv`` -> ``edgelist``).
    """

    named_splits: ClassVar[bool] = False  # True where ``split`` may name a split folder

    split: int | str = Field(0, description="split index (npz with 10 splits), OGB split name, "
                             "or 'random' for a random split even where the source has one")
    num_classes: int | None = Field(None, ge=1, description="labels must lie in "
                                    "[0, num_classes); default max label + 1")
    undirected: bool = True
    dedup: bool = True
    self_loops: Literal["keep", "remove", "add"] = "keep"
    train_frac: float = Field(0.6, gt=0.0, lt=1.0)
    val_frac: float = Field(0.2, ge=0.0, lt=1.0)
    split_seed: int = 0
    feature_fallback: Literal["degree", "random_projection"] = Field(
        "degree", description="features built from the structure when the source has none")
    fallback_dim: int = _fallback_dim()
    normalize_features: Literal["none", "row"] = Field(
        "none", description="'row' divides each feature row by its sum (PyG's NormalizeFeatures)")

    @model_validator(mode="after")
    def _split_and_fracs(self) -> LoadedDataset:
        if isinstance(self.split, int) and self.split < 0:
            raise ValueError(f"split={self.split}: a split index must be >= 0")
        if isinstance(self.split, str) and not self.named_splits and self.split != "random":
            src = type(self).model_fields["source"].default
            raise ValueError(f"split={self.split!r}: source={src!r} takes a split index "
                             "(0, 1, ...) or 'random'")
        check_fracs(self.train_frac, self.val_frac, "")
        return self


_PATH_DOC = ("file or directory; a relative path resolves against $GNNTRAIN_DATA, else "
             "$XDG_CACHE_HOME/gnntrain/datasets (~/.cache/gnntrain/datasets)")
_STORAGE_OPTIONS_DOC = ("options of the object store of URI paths, handed to fsspec as they are "
                        "(e.g. endpoint_url): secret-looking keys are never written to config.yaml, "
                        "summary.json or logs")


class PlanetoidDataset(LoadedDataset):
    """PyG's Planetoid raw files (``gnntrain/data/planetoid.py``)."""

    source: Literal["planetoid"] = "planetoid"
    path: str = Field(description=_PATH_DOC)
    planetoid_name: str | None = Field(None, description="folder under path, e.g. Cora")


class NpzDataset(LoadedDataset):
    """One ``.npz`` file of arrays (``gnntrain/data/npz.py``)."""

    source: Literal["npz"] = "npz"
    path: str = Field(description=_PATH_DOC)


class HeterophilousDataset(LoadedDataset):
    """A heterophilous-graphs ``.npz`` (``gnntrain/data/npz.py``): each undirected edge once."""

    source: Literal["heterophilous"] = "heterophilous"
    path: str = Field(description=_PATH_DOC)

    @model_validator(mode="after")
    def _undirected(self) -> HeterophilousDataset:
        if not self.undirected:
            raise ValueError("source='heterophilous' files store each undirected edge once; "
                             "undirected must stay true so the loader adds the reverses")
        return self


class OgbDataset(LoadedDataset):
    """An OGB node-property folder (``gnntrain/data/ogb.py``); ``split`` may name a folder."""

    named_splits: ClassVar[bool] = True
    source: Literal["ogb"] = "ogb"
    path: str = Field(description=_PATH_DOC)


class CsvDataset(LoadedDataset):
    """Edge-list text files plus optional feature and label files (``gnntrain/data/edgelist.py``)."""

    source: Literal["csv"] = "csv"
    path: str | None = Field(None, description="the edge file (same as edges); " + _PATH_DOC)
    edges: str | None = None
    features: str | None = None
    labels: str | None = None
    delimiter: str | None = Field(None, description="field separator; None = detect")
    id_column: str | int | None = Field(None, description="labels: node-id column "
                                        "(header name or 0-based index; default first)")
    label_column: str | int | None = Field(None, description="labels: label column (default last)")
    num_nodes: int | None = Field(None, ge=1, description="node count; default max id + 1")
    relabel: bool = Field(False, description="renumber arbitrary integer ids densely")
    header: bool | None = Field(None, description="edges: the first line is a header "
                                "(true), is not (false), or detect it (None)")

    @model_validator(mode="after")
    def _edges_and_delimiter(self) -> CsvDataset:
        if not (self.path or self.edges):
            raise ValueError("source='csv' needs 'path' (or 'edges'): the edge-list file")
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise ValueError(f"delimiter={self.delimiter!r}: give one character, e.g. ',' "
                             "or '\\t'")
        return self


class ParquetEdges(Frozen):
    """The edge table of ``source: parquet``: one row per directed edge ``src -> dst``."""

    path: str = Field(description="one Parquet file or a directory of them (read in name order); "
                      "a local path (" + _PATH_DOC + ") or a URI the storage layer opens "
                      "(s3://bucket/prefix, gs://..., file://...)")
    src: str = Field("src", description="column of source node ids (integers in [0, num_nodes))")
    dst: str = Field("dst", description="column of destination node ids (integers in [0, num_nodes))")
    edge_type: str | None = Field(None, description="column of edge types (integers or strings): "
                                  "checked when the table is opened; the untyped training graph "
                                  "does not carry it")
    weight: str | None = Field(None, description="column of edge weights (numbers): checked when "
                               "the table is opened; training runs carry no edge weights")


class ParquetNodes(Frozen):
    """The node table of ``source: parquet``: one row per node."""

    path: str = Field(description="one Parquet file or a directory of them (read in name order); "
                      "a local path or a URI, as edges.path")
    id: str | None = Field(None, description="column of node ids, each of 0..N-1 exactly once (rows in "
                           "any order); None: row i (in file order) is node i")
    features: str | list[str] | None = Field(
        None, description="one list column (each row a list of F numbers), or a list of F numeric "
        "columns; None: structural fallback features")
    label: str | None = Field(None, description="column of integer class ids (null or -1: unlabeled)")
    masks: list[str] | None = Field(
        None, description="three boolean columns: the train, val and test masks, as PyG's Data "
        "stores them (e.g. [train_mask, val_mask, test_mask]); None: a random split over the "
        "labeled nodes")

    @field_validator("masks")
    @classmethod
    def _three_masks(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (len(v) != 3 or len(set(v)) != 3):
            raise ValueError(f"masks={v}: give three different columns, the train, val and test "
                             "masks in that order, e.g. [train_mask, val_mask, test_mask]")
        return v


class ParquetDataset(LoadedDataset):
    """Parquet tables (``gnntrain/data/parquet.py``): an edge table and an optional node table,
    each one file or a directory of files, local or on object storage (read with pyarrow:
    ``pip install 'gnntrain[parquet]'``, plus ``[s3]``/``[gcs]`` for remote paths)."""

    source: Literal["parquet"] = "parquet"
    edges: ParquetEdges
    nodes: ParquetNodes | None = Field(None, description="the node table; None: a structure-only "
                                       "graph (fallback features, one class)")
    num_nodes: int | None = Field(None, ge=1, description="node count; default the node table's "
                                  "rows, else the largest edge id + 1")
    storage_options: dict[str, Any] = Field(default_factory=dict, description=_STORAGE_OPTIONS_DOC)


class OgblDataset(LoadedDataset):
    """An OGB link-property folder (``gnntrain/data/link.py``): training edges in ``raw/``,
    validation and test positives and negatives in ``split/<name>/*.pt``; ``split`` names
    the folder. For ``task.kind: link``; other tasks train on its message-passing graph."""

    named_splits: ClassVar[bool] = True
    source: Literal["ogbl"] = "ogbl"
    path: str = Field(description=_PATH_DOC)


class LightGcnDataset(LoadedDataset):
    """LightGCN user-item files ``{train,valid,test}.txt`` (``gnntrain/data/link.py``):
    a bipartite graph, items numbered after users."""

    source: Literal["lightgcn"] = "lightgcn"
    path: str = Field(description=_PATH_DOC)
    eval_negatives: int = Field(1, ge=1, description="random non-interacted items per "
                                "validation/test interaction")


class SyntheticDataset(_DatasetBase):
    """The generator (``gnntrain/data/synthetic.py``): an undirected graph without
    self-loops, with its own split settings under ``synthetic``."""

    source: Literal["synthetic"] = "synthetic"
    synthetic: SyntheticConfig = Field(default_factory=SyntheticConfig)


# ---- typed (heterogeneous) graphs: loaded by gnntrain/data/hetero.py ---------------------


class HeteroDatasetBase(_DatasetBase):
    """What every typed-graph source shares: reverse relations on request, and structural
    features for the node types that have none (``gnntrain/data/features.py``)."""

    add_reverse: bool = Field(False, description="add (dst, rev_<relation>, src) for every relation")
    feature_fallback: Literal["none", "degree", "random_projection"] = Field(
        "none", description="features built from the structure (all relations together, after "
        "add_reverse) for every node type without features; 'none' leaves them featureless")
    fallback_dim: int = _fallback_dim()


class HeteroDirDataset(HeteroDatasetBase):
    """A directory with one edge file per relation named by type letters (``pa.txt`` =
    paper -> author), ``<letter>_feat.npz`` features, target labels and split files
    (HeCo / HGCMA layout; ``gnntrain/data/hetero_dir.py``). The mapping below says which
    letter is which type and which file is which relation, so a directory of this shape
    loads without code."""

    source: Literal["hetero_dir"] = "hetero_dir"
    path: str = Field(description=_PATH_DOC)
    types: dict[str, str] = Field(description="type letter -> node type name, e.g. {p: paper}")
    relations: dict[str, str] = Field(description="edge file stem (two type letters, source "
                                      "first) -> relation name, e.g. {pa: written_by}")
    target: str = Field(description="the labelled node type (a value of types)")
    labels: str = Field("labels.npy", description="target labels file (.npy), one per target node")
    split: str = Field(description="split suffix: train_<split>.npy, val_<split>.npy, test_<split>.npy")
    counts: dict[str, int] = Field(default_factory=dict, description="type letter -> node count; "
                                   "default: the largest of feature rows, labels and edge ids + 1")
    edge_suffix: str = Field(".txt", description="edge file extension")

    @model_validator(mode="after")
    def _names(self) -> HeteroDirDataset:
        letters = sorted(self.types)
        for key in self.types:
            if len(key) != 1:
                raise ValueError(f"types: key {key!r} must be one letter (the letter edge files use)")
        if self.target not in self.types.values():
            raise ValueError(f"target={self.target!r}: not one of the types {sorted(self.types.values())}")
        for stem in self.relations:
            if len(stem) != 2 or any(c not in self.types for c in stem):
                raise ValueError(f"relations: file stem {stem!r} must be two type letters from "
                                 f"{letters} (source first), e.g. 'pa'")
        for key, n in self.counts.items():
            if key not in self.types or n < 1:
                raise ValueError(f"counts: {key!r}={n} must name a type letter from {letters} "
                                 "with a count >= 1")
        return self


class OgbMagDataset(HeteroDatasetBase):
    """OGB-MAG's typed layout: ``raw/relations/<src>___<rel>___<dst>/edge.csv.gz``,
    ``raw/node-feat/<type>/``, ``raw/node-label/<type>/``, ``raw/num-node-dict.csv.gz``,
    ``split/<name>/<type>/`` (``gnntrain/data/hetero_ogb.py``)."""

    source: Literal["ogb_mag"] = "ogb_mag"
    path: str = Field(description=_PATH_DOC)
    target: str = Field("paper", description="the labelled node type")
    split: str | None = Field(None, description="split folder name; default the only one there")


class SyntheticHeteroConfig(Frozen):
    """A typed graph shaped like OGB-MAG (``gnntrain/data/hetero_synthetic.py``): papers
    cite papers, authors write papers, authors are affiliated with institutions, papers
    have topic fields; power-law degrees; paper classes that its typed neighbours share."""

    papers: int = Field(20_000, ge=10)
    authors: int = Field(30_000, ge=1)
    institutions: int = Field(250, ge=1)
    fields: int = Field(1_500, ge=1)
    cites_per_paper: float = Field(5.0, ge=0)
    authors_per_paper: float = Field(3.0, gt=0)
    fields_per_paper: float = Field(4.0, gt=0)
    institutions_per_author: float = Field(1.0, gt=0)
    features: int = Field(64, ge=1, description="paper feature width (other types are featureless)")
    classes: int = Field(16, ge=2)
    homophily: float = Field(0.6, ge=0.0, le=1.0, description="share of a paper's edges to "
                             "neighbours of its own class")
    power_law: float = Field(2.5, gt=1.0, description="exponent of the degree distributions")
    feature_noise: float = Field(2.0, ge=0.0, description="noise std relative to centroid spread")
    train_frac: float = Field(0.6, gt=0.0, lt=1.0)
    val_frac: float = Field(0.2, ge=0.0, lt=1.0)
    seed: int = 0

    @model_validator(mode="after")
    def _fracs(self) -> SyntheticHeteroConfig:
        check_fracs(self.train_frac, self.val_frac, "")
        return self

    @classmethod
    def scaled(cls, papers: int, **fields: Any) -> SyntheticHeteroConfig:
        """The default proportions (papers : authors : institutions : fields = 80 : 120 : 1 : 6)
        at ``papers`` papers; 400k papers give 1.03M nodes and, with the reverse relations,
        10.6M edges."""
        return cls(papers=papers, authors=papers * 3 // 2, institutions=max(papers // 80, 1),
                   fields=max(papers * 3 // 40, 1), **fields)


class SyntheticHeteroDataset(HeteroDatasetBase):
    """The typed generator, with its settings under ``synthetic_hetero``."""

    source: Literal["synthetic_hetero"] = "synthetic_hetero"
    synthetic_hetero: SyntheticHeteroConfig = Field(default_factory=SyntheticHeteroConfig)


class HeteroParquetDataset(HeteroDatasetBase):
    """A typed graph as Parquet tables (``gnntrain/data/hetero_parquet.py``): one edge table per
    relation and a node table per node type that has rows to give (ids, features, and on the
    target type labels and masks), each one file or a directory of files, local or on object
    storage; the columns are named as in ``source: parquet``. DGL's chunked graph format and
    GraphStorm keep typed graphs the same way, a file set per node type and per relation."""

    source: Literal["hetero_parquet"] = "hetero_parquet"
    target: str = Field(description="the labelled node type: its node table gives label and masks")
    nodes: dict[str, ParquetNodes] = Field(
        description="node type -> its node table (ids type-local, 0..N_t-1); a type without a table "
                    "is featureless and takes its count from counts, else its edges")
    edges: dict[str, ParquetEdges] = Field(
        description="relation 'src_type:relation:dst_type' -> its edge table, src ids of src_type and "
                    "dst ids of dst_type (type-local)")
    counts: dict[str, int] = Field(default_factory=dict, description="node type -> node count, for "
                                   "types without a node table; default their largest edge id + 1")
    num_classes: int | None = Field(None, ge=1, description="labels must lie in [0, num_classes); "
                                    "default the labels present (remapped to 0..C-1 when they have gaps)")
    dedup: bool = Field(True, description="drop repeated edges of a relation")
    train_frac: float = Field(0.6, gt=0.0, lt=1.0, description="random split of the labelled target "
                              "nodes when the target table has no masks")
    val_frac: float = Field(0.2, ge=0.0, lt=1.0)
    split_seed: int = 0
    storage_options: dict[str, Any] = Field(default_factory=dict, description=_STORAGE_OPTIONS_DOC)

    @model_validator(mode="after")
    def _types_and_tables(self) -> HeteroParquetDataset:
        if not self.edges:
            raise ValueError("edges: give at least one relation table, e.g. "
                             "{'author:writes:paper': {path: ...}}")
        for key, table in self.edges.items():
            parts = key.split(":")
            if len(parts) != 3 or not all(parts):
                raise ValueError(f"edges: key {key!r} must name a relation as "
                                 "'src_type:relation:dst_type', e.g. 'author:writes:paper'")
            if table.edge_type is not None:
                raise ValueError(f"edges.{key}.edge_type={table.edge_type!r}: each relation has its own "
                                 "table here (the key names it); drop edge_type")
        named = [*self.nodes, *self._relation_types()]
        if self.target not in self.nodes:
            raise ValueError(f"target={self.target!r}: the target type needs a node table with its "
                             f"labels (nodes.{self.target}); node tables given: {sorted(self.nodes)}")
        if self.nodes[self.target].label is None:
            raise ValueError(f"nodes.{self.target}.label is not set: the target type's table gives the "
                             "labels")
        for t, node_table in self.nodes.items():
            if t != self.target and (node_table.label is not None or node_table.masks is not None):
                field = "label" if node_table.label is not None else "masks"
                raise ValueError(f"nodes.{t}.{field}: only the target type ({self.target!r}) carries "
                                 "labels and split masks")
        for t, n in self.counts.items():
            if t not in named or t in self.nodes or n < 1:
                raise ValueError(f"counts: {t!r}={n} must be >= 1 and name a type without a node table "
                                 f"(types: {list(dict.fromkeys(named))}; with tables: {list(self.nodes)})")
        check_fracs(self.train_frac, self.val_frac, "")
        return self

    def node_types(self) -> list[str]:
        """The node types in order: those of ``nodes``, then of ``counts``, then the others as
        ``edges`` first names them."""
        return list(dict.fromkeys([*self.nodes, *self.counts, *self._relation_types()]))

    def _relation_types(self) -> list[str]:
        """The node types ``edges`` names, source then destination of each relation in order."""
        return [t for key in self.edges for t in key.split(":")[::2]]


HETERO_SOURCES = ("hetero_dir", "hetero_parquet", "ogb_mag", "synthetic_hetero")
"""Sources that load a typed graph (:func:`gnntrain.data.hetero.load_hetero`)."""


class ChunksDataset(_DatasetBase):
    """A graph no process holds whole, partitioned by the Ray pipeline (``partition.method``
    stream or multilevel) and never loaded into one process (``--single-process`` is
    refused). Either a chunk directory (``path``: ``partition/chunked.py``, written by
    ``write_chunks`` or ``gnntrain.data.synthetic_chunks``) or Parquet tables (``edges`` and
    ``nodes``, as ``source: parquet`` names them), whose row groups are the chunks
    (``gnntrain/data/parquet.py``): each Ray task reads its own row groups."""

    source: Literal["chunks"] = "chunks"
    path: str | None = Field(None, description="the chunk directory (holds manifest.json): a local path ("
                             + _PATH_DOC + ") or a URI the storage layer opens (s3://bucket/chunks, "
                             "gs://...), whose chunks the pipeline's Ray tasks then read one object "
                             "per array; or give edges and nodes instead")
    edges: ParquetEdges | None = Field(None, description="a Parquet edge table, its row groups the edge "
                                       "chunks (instead of path); edges as stored, no cleaning")
    nodes: ParquetNodes | None = Field(None, description="the Parquet node table that goes with edges, its "
                                       "row groups the node chunks: features, label and masks are "
                                       "required; with an id column each row group must hold "
                                       "consecutive ids in order")
    num_classes: int | None = Field(None, ge=1, description="class count of Parquet tables; default the "
                                    "labels present (remapped to 0..C-1 when they have gaps)")
    storage_options: dict[str, Any] = Field(default_factory=dict, description=_STORAGE_OPTIONS_DOC)

    @model_validator(mode="after")
    def _directory_or_tables(self) -> ChunksDataset:
        tables = self.edges is not None or self.nodes is not None
        if (self.path is None) == (not tables):
            raise ValueError("source='chunks' takes either 'path' (a chunk directory) or 'edges' and "
                             "'nodes' (Parquet tables), " + ("not both" if tables else "and got neither"))
        if not tables:
            if self.num_classes is not None:
                raise ValueError(f"num_classes={self.num_classes}: a chunk directory records its own; "
                                 "num_classes goes with Parquet tables (edges and nodes)")
            return self
        if self.edges is None or self.nodes is None:
            raise ValueError(f"source='chunks' with Parquet tables needs both 'edges' and 'nodes'; "
                             f"'{'nodes' if self.nodes is None else 'edges'}' is missing")
        missing = [k for k in ("features", "label", "masks") if getattr(self.nodes, k) is None]
        if missing:
            raise ValueError(f"nodes.{missing[0]} is not set: chunked Parquet tables need the node "
                             "table's features, label and masks (no fallback features or random "
                             "split without the whole graph); use source: parquet for tables one "
                             "process can load")
        return self


DatasetConfig = Annotated[
    PlanetoidDataset | NpzDataset | HeterophilousDataset | OgbDataset | CsvDataset | OgblDataset
    | LightGcnDataset | ParquetDataset | SyntheticDataset | ChunksDataset | HeteroDirDataset
    | HeteroParquetDataset | OgbMagDataset | SyntheticHeteroDataset,
    Field(discriminator="source")]
"""Where the graph comes from and how it is cleaned at load time: one model per
``source``, each with only its own fields (a key of another source is refused with its
path). Build one from a mapping with :func:`parse_dataset`."""


class _DatasetOnly(Frozen):
    dataset: DatasetConfig


def parse_dataset(raw: Mapping[str, Any]) -> DatasetConfig:
    """Validate one ``dataset:`` section (a mapping with ``source``) into its model."""
    try:
        return _DatasetOnly.model_validate({"dataset": dict(raw)}).dataset
    except ValidationError as e:
        raise ConfigError(format_errors(e, "<dataset>", _DatasetOnly)) from None


DATA_ENV = "GNNTRAIN_DATA"


def data_root() -> Path:
    """Where a relative ``dataset.path`` resolves: ``$GNNTRAIN_DATA``, else
    ``$XDG_CACHE_HOME/gnntrain/datasets``, else ``~/.cache/gnntrain/datasets``."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "gnntrain" / "datasets"

"""Typed run configuration: one frozen pydantic model per concern, loaded from YAML.

A dataset config (``datasets/<name>.yaml``) has the sections ``dataset``, ``partition``,
``sampler``, ``model``, ``train`` and ``cluster``. Unknown keys and wrong types fail with
the field's path (``train.epochs``); ``--set train.epochs=3`` overrides one value and
fails if the key does not exist. Everything is checked here, before data is read or
Ray starts.
"""

from __future__ import annotations

import copy
import os
import re
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args
from urllib.parse import urlparse

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from partition.config import PartitionConfig
from partition.paths import check_component
from samplers.config import CacheConfig, SamplerConfig

__all__ = [
    "DATA_ENV", "CacheConfig", "ChunksDataset", "ClusterConfig", "ConfigError", "CsvDataset",
    "DatasetConfig", "FaultConfig", "HeterophilousDataset", "LightGcnDataset", "LoadedDataset",
    "ModelConfig", "NodeEmbeddingConfig", "NpzDataset", "OgbDataset", "OgblDataset", "PartitionConfig",
    "PlanetoidDataset", "RunConfig", "SamplerConfig", "ScheduledFault", "SyntheticConfig",
    "SyntheticDataset", "TaskConfig", "TrainConfig", "data_root", "load_config", "parse_dataset",
]


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the field."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_fracs(train_frac: float, val_frac: float, where: str) -> None:
    if train_frac + val_frac > 1.0:
        raise ValueError(f"{where}train_frac={train_frac} + {where}val_frac={val_frac} = "
                         f"{train_frac + val_frac:g} > 1: the two must sum to at most 1 "
                         "(the rest is the test split)")


class SyntheticConfig(_Frozen):
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
        _check_fracs(self.train_frac, self.val_frac, "")
        if self.avg_degree >= self.nodes:
            raise ValueError(f"avg_degree={self.avg_degree} must be below nodes={self.nodes}")
        return self


class _DatasetBase(_Frozen):
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
        _check_fracs(self.train_frac, self.val_frac, "")
        return self


_PATH_DOC = ("file or directory; a relative path resolves against $GNNTRAIN_DATA, else "
             "$XDG_CACHE_HOME/gnntrain/datasets (~/.cache/gnntrain/datasets)")


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


class _HeteroDatasetBase(_DatasetBase):
    """What every typed-graph source shares: reverse relations on request, and structural
    features for the node types that have none (``gnntrain/data/features.py``)."""

    add_reverse: bool = Field(False, description="add (dst, rev_<relation>, src) for every relation")
    feature_fallback: Literal["none", "degree", "random_projection"] = Field(
        "none", description="features built from the structure (all relations together, after "
        "add_reverse) for every node type without features; 'none' leaves them featureless")
    fallback_dim: int = _fallback_dim()


class HeteroDirDataset(_HeteroDatasetBase):
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


class OgbMagDataset(_HeteroDatasetBase):
    """OGB-MAG's typed layout: ``raw/relations/<src>___<rel>___<dst>/edge.csv.gz``,
    ``raw/node-feat/<type>/``, ``raw/node-label/<type>/``, ``raw/num-node-dict.csv.gz``,
    ``split/<name>/<type>/`` (``gnntrain/data/hetero_ogb.py``)."""

    source: Literal["ogb_mag"] = "ogb_mag"
    path: str = Field(description=_PATH_DOC)
    target: str = Field("paper", description="the labelled node type")
    split: str | None = Field(None, description="split folder name; default the only one there")


class SyntheticHeteroConfig(_Frozen):
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
        _check_fracs(self.train_frac, self.val_frac, "")
        return self

    @classmethod
    def scaled(cls, papers: int, **fields: Any) -> SyntheticHeteroConfig:
        """The default proportions (papers : authors : institutions : fields = 80 : 120 : 1 : 6)
        at ``papers`` papers; 400k papers give 1.03M nodes and, with the reverse relations,
        10.6M edges."""
        return cls(papers=papers, authors=papers * 3 // 2, institutions=max(papers // 80, 1),
                   fields=max(papers * 3 // 40, 1), **fields)


class SyntheticHeteroDataset(_HeteroDatasetBase):
    """The typed generator, with its settings under ``synthetic_hetero``."""

    source: Literal["synthetic_hetero"] = "synthetic_hetero"
    synthetic_hetero: SyntheticHeteroConfig = Field(default_factory=SyntheticHeteroConfig)


HETERO_SOURCES = ("hetero_dir", "ogb_mag", "synthetic_hetero")
"""Sources that load a typed graph (:func:`gnntrain.data.hetero.load_hetero`)."""
__all__ += ["HETERO_SOURCES", "HeteroDirDataset", "OgbMagDataset", "SyntheticHeteroConfig",
            "SyntheticHeteroDataset"]


class ChunksDataset(_DatasetBase):
    """A chunked graph directory (``partition/chunked.py``; written by ``write_chunks`` or
    ``gnntrain.data.synthetic_chunks``). The run partitions it with
    the Ray pipeline (``partition.method`` stream or multilevel) and never loads the whole
    graph into one process (``--single-process`` is refused)."""

    source: Literal["chunks"] = "chunks"
    path: str = Field(description="the chunk directory (holds manifest.json); " + _PATH_DOC)


DatasetConfig = Annotated[
    PlanetoidDataset | NpzDataset | HeterophilousDataset | OgbDataset | CsvDataset | OgblDataset
    | LightGcnDataset | SyntheticDataset | ChunksDataset | HeteroDirDataset | OgbMagDataset
    | SyntheticHeteroDataset,
    Field(discriminator="source")]
"""Where the graph comes from and how it is cleaned at load time: one model per
``source``, each with only its own fields (a key of another source is refused with its
path). Build one from a mapping with :func:`parse_dataset`."""


BUILTIN_ARCHS = ("sage", "gcn", "gat", "rgcn", "hsage")
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def _check_import_path(value: str, builtin: tuple[str, ...], field: str) -> str:
    if value not in builtin and not _IMPORT_PATH.match(value):
        raise ValueError(f"{field}={value!r}: expected one of {list(builtin)} or an import path "
                         "'package.module:name'")
    return value


EMBEDDING_OPTIMIZERS = ("sparse_adam", "sparse_adagrad", "sgd")


class NodeEmbeddingConfig(_Frozen):
    """A learnable input row per node, partitioned like the features (``model.node_embedding``).

    Each worker owns the rows of its part (:mod:`gnntrain.embedding`); a batch reads its
    input rows from their owners, and the rows it touched are updated sparsely by the
    owner with ``optimizer`` after every step. ``combine`` says how the rows meet the
    dataset's features: ``concat`` (model input width features + dim), ``sum`` (dim must
    equal the feature width) or ``only`` (the features are ignored).
    """

    dim: int = Field(ge=1, description="width of each node's learnable row")
    init: Literal["normal", "uniform"] = Field(
        "normal", description="normal: N(0, init_scale^2); uniform: U(-init_scale, init_scale); "
        "a row depends only on (train.seed, the node's original id), so any partitioning "
        "starts from the same table")
    init_scale: float = Field(1.0, gt=0)
    optimizer: Literal["sparse_adam", "sparse_adagrad", "sgd"] = Field(
        "sparse_adam", description="row-wise update of the rows a step touched")
    lr: float = Field(0.01, gt=0)
    combine: Literal["concat", "sum", "only"] = "concat"
    mmap_above_mb: float | None = Field(
        None, ge=0, description="a part's table (plus optimizer state) larger than this many "
        "MiB is kept in memory-mapped scratch files, which the OS can page out when the table "
        "outgrows memory (sparse steps were 6x slower in bench.embedding); None = never, 0 = always")

    @field_validator("dim", mode="before")
    @classmethod
    def _positive_dim(cls, v: Any) -> Any:
        if isinstance(v, int) and v <= 0:
            raise ValueError(f"dim={v}: the embedding width must be a positive integer")
        return v

    @field_validator("optimizer", mode="before")
    @classmethod
    def _known_optimizer(cls, v: Any) -> Any:
        if v not in EMBEDDING_OPTIMIZERS:
            raise ValueError(f"optimizer={v!r}: a partitioned embedding table is updated with "
                             f"one of {list(EMBEDDING_OPTIMIZERS)} (row-wise, sparse)")
        return v


class ModelConfig(_Frozen):
    """The model: a built-in ``arch`` or a user factory ``package.module:factory`` called
    as ``factory(in_dim, out_dim, model_config)`` (:mod:`gnntrain.models.protocol`).
    ``node_embedding`` adds a learnable row per node to the input (``in_dim`` then counts
    it, see :meth:`input_dim`)."""

    arch: str = Field("sage", description="sage | gcn | gat | rgcn (typed graphs; options "
                      "node_types, relations, bases, root_per_type) | hsage (typed; options node_types, "
                      "relation_dst) | package.module:factory")
    hidden: int = Field(256, ge=1)
    layers: int = Field(3, ge=1)
    dropout: float = Field(0.5, ge=0.0, lt=1.0)
    norm: Literal["none", "batch", "layer"] = "none"
    heads: int = Field(4, ge=1, description="attention heads (gat only)")
    options: dict[str, Any] = Field(default_factory=dict, description="free-form settings for a "
                                    "user factory (it type-checks them); built-ins take none")
    node_embedding: NodeEmbeddingConfig | None = Field(
        None, description="a learnable, partitioned input row per node (none by default)")

    @field_validator("arch")
    @classmethod
    def _arch(cls, v: str) -> str:
        return _check_import_path(v, BUILTIN_ARCHS, "arch")

    def input_dim(self, num_features: int) -> int:
        """The model's input width for a dataset with ``num_features`` features."""
        e = self.node_embedding
        if e is None:
            if num_features == 0:
                raise ValueError("model.node_embedding=null: the dataset has no node features (0 "
                                 "columns on every node type), so the model would read only zeros "
                                 "and stay at chance; set model.node_embedding (e.g. {dim: 64, "
                                 "combine: only}) to learn a row per node")
            return num_features
        if e.combine == "concat":
            return num_features + e.dim
        if e.combine == "sum" and e.dim != num_features:
            raise ValueError(f"model.node_embedding.dim={e.dim} with combine='sum' must equal the "
                             f"dataset's feature width {num_features}; use combine='concat' or 'only'")
        return e.dim


BUILTIN_TASKS = ("node_classification", "link")


class TaskConfig(_Frozen):
    """The learning problem (:mod:`gnntrain.tasks`): a built-in ``kind`` or a user task
    ``package.module:factory``, made with ``options`` as keyword arguments."""

    kind: str = Field("node_classification",
                      description="node_classification | link | package.module:factory")
    options: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the "
                                    "task, e.g. {label_smoothing: 0.1}")

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        return _check_import_path(v, BUILTIN_TASKS, "kind")


FeatureDtype = Literal["float32", "float16", "bfloat16", "int8"]


class TrainConfig(_Frozen):
    epochs: int = Field(10, ge=1)
    lr: float = Field(0.003, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    seed: int = 0
    eval_every: int = Field(1, ge=1)
    eval: Literal["full", "sampled"] = "full"
    eval_max_nodes: int | None = Field(
        200_000, ge=1, description="sampled evaluation scores at most about this many nodes "
        "per split: a larger split is evaluated on a seeded sample (each node kept with "
        "probability eval_max_nodes / split size, by a hash of its id; the same nodes at every "
        "evaluation), and the metrics say how many nodes they count ({split}_nodes); null "
        "evaluates every node. Layer-wise evaluation always scores every node")
    device: Literal["cpu", "cuda"] = "cpu"
    checkpoint_every: int = Field(0, ge=0, description="epochs between checkpoints; 0 = end only")
    keep_checkpoints: int = Field(2, ge=1)
    keep_best: bool = Field(True, description="also write checkpoints/best.pt whenever the validation "
                            "metric reaches a new best; prediction and gnntrain.load use it by default")
    patience: int | None = Field(
        None, ge=1, description="early stopping: end the run once this many evaluations in a row "
        "have not improved the validation metric (the task's headline, e.g. val_acc or val_hits); "
        "the run then ends as after its last epoch (final checkpoint, report), and best.pt holds "
        "the best epoch. Counted in evaluations, so eval_every=5 with patience=3 waits 15 epochs. "
        "None: train every epoch")
    max_failures: int = Field(0, ge=0)
    feature_dtype: FeatureDtype | dict[str, FeatureDtype] = Field(
        "float32", description="dtype feature rows travel in between workers (float32 exact; "
        "float16/bfloat16 2 bytes a value; int8 1 byte plus a float32 scale per row). On a typed "
        "graph a mapping gives each node type its own ({paper: int8, author: float16}); types "
        "it does not name travel float32 (gnntrain/runtime/codec.py)")
    sparse_feature_transfer: bool = Field(
        True, description="an owner sends a feature reply, and a layer-wise evaluation's "
        "hidden-row reply, as CSR (nonzero values at the reply's width, their columns and row "
        "offsets) when that takes at most half the dense bytes: exact, decided per reply from "
        "the rows' own zeros (gnntrain/runtime/codec.py); false: always dense")
    precision: Literal["fp32", "bf16"] = Field(
        "fp32", description="the model's compute: fp32, or bf16 = forward under torch.autocast "
        "in bfloat16 (float16 + a gradient scaler on GPUs without bfloat16); parameters, "
        "gradients, their all-reduce and the optimizer state stay float32 (gnntrain/precision.py)")
    optimizer: Literal["adam", "sgd"] = "adam"
    grad_clip_norm: float | None = Field(
        None, gt=0, description="scale the model's summed gradients down to at most this total "
        "2-norm before each optimizer step (torch.nn.utils.clip_grad_norm_); None: no clipping. "
        "A model.node_embedding table's sparse rows are not clipped")
    run_root: str = "runs"


class ClusterConfig(_Frozen):
    workers: int = Field(1, ge=1)
    address: str | None = Field(None, description="Ray address; None starts Ray embedded")
    num_cpus: float | None = Field(None, gt=0, description="CPUs for the embedded instance")
    cpus_per_worker: float | None = Field(None, gt=0, description="CPUs Ray reserves for each worker; "
                                          "its torch threads are the whole ones (at least 1); None: "
                                          "an equal share of the cluster's, at most 1")
    gpus_per_worker: float | None = Field(None, gt=0, le=1, description="fraction of a GPU per worker "
                                          "with train.device=cuda; default: the GPUs shared evenly")
    call_timeout_s: float = Field(120.0, gt=0, description="per-message limit of a peer's "
                                  "sampling, feature or hidden-row request")
    collective_timeout_s: float = Field(120.0, gt=0, description="limit of one all-reduce")
    stall_timeout_s: float = Field(
        300.0, gt=0, description="a worker busy with a coordinator call (start-up, training, "
        "evaluation, prediction, checkpoint) fails only when it has made no progress for this "
        "long: no step, batch or layer counted and no CPU time used by its training thread, "
        "while none of the other busy workers made progress either. Long phases that make "
        "progress are never cut off")
    epoch_timeout_s: float | None = Field(None, gt=0, description="optional hard limit on one "
                                          "training epoch's wall time; off by default")
    connect_timeout_s: float = Field(20.0, gt=0)
    on_worker_loss: Literal["restart", "shrink"] = Field(
        "restart", description="when a failed worker's node has left the cluster and no new node "
        "joins within replace_timeout_s: 'restart' ends the run naming the worker and the node, "
        "'shrink' places that worker's rank on a surviving node (which then runs two ranks) and "
        "goes on from the last checkpoint with the same ranks, parts, batches and streams")
    replace_timeout_s: float = Field(60.0, gt=0, description="how long a worker whose node left "
                                     "the cluster waits for a new node before on_worker_loss applies")

    @model_validator(mode="after")
    def _address_form(self) -> ClusterConfig:
        if self.address is not None:
            parse_address(self.address)
        return self


def parse_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a Ray address, None for ``auto`` / ``local``; a malformed one
    raises ValueError naming the forms allowed."""
    if address in ("auto", "local"):
        return None
    url = urlparse(address if "://" in address else f"ray://{address}")
    try:
        host, port = url.hostname, url.port
    except ValueError:  # a port that is not a number or out of range
        host, port = None, None
    if url.scheme not in ("ray", "") or not host or not port or url.path not in ("", "/"):
        raise ValueError(f"cluster.address={address!r}: expected 'auto', 'local', 'HOST:PORT' or "
                         "'ray://HOST:PORT' (port 1-65535)")
    return host, port


class _FaultPoint(_Frozen):
    """Where an injected fault strikes: worker ``rank`` at (``epoch``, ``step``)."""

    rank: int = Field(0, ge=0)
    epoch: int = Field(0, ge=0)
    step: int = Field(0, ge=0)


class ScheduledFault(_FaultPoint):
    """One entry of ``faults.schedule``: a fault that stops the run (``raise``, ``exit``
    or ``stall``) at one point, on one attempt of the run."""

    kind: Literal["raise", "exit", "stall"]


class FaultConfig(_FaultPoint):
    """Fault injection for tests and drills: worker ``rank`` fails at (``epoch``, ``step``).

    ``raise`` raises in the training step, ``exit`` kills the worker process, ``stall``
    stops answering (sleeps) so that timeouts and the stall detection are exercised. Two
    kinds are slow but never stalled, and must not be failed: ``slow`` sleeps ``seconds``
    after every step from (``epoch``, ``step``) on, ``busy`` computes for ``seconds`` once
    at (``epoch``, ``step``) without advancing its step. Off by default.

    ``schedule`` injects several faults in order instead of one (with ``kind: none``):
    entry i fires only on attempt i of the run, the attempt after i recoveries, so n
    entries are n failures, one per attempt. A recovery restarts from the last
    epoch-boundary checkpoint, so every entry lies in a later epoch than the one before.
    """

    kind: Literal["none", "raise", "exit", "stall", "slow", "busy"] = "none"
    times: int = Field(1, ge=1, description="how many attempts of the run the fault hits")
    seconds: float = Field(1.0, gt=0, description="the delay of kind slow / busy")
    schedule: list[ScheduledFault] = Field(
        default_factory=list, description="faults injected one per attempt: entry i on the "
        "attempt after i recoveries, at its (epoch, step) on its rank; epochs strictly "
        "increasing; only with kind none")

    @model_validator(mode="after")
    def _one_way_to_inject(self) -> FaultConfig:
        if self.schedule and self.kind != "none":
            raise ValueError(f"faults.kind={self.kind!r} together with faults.schedule "
                             f"({len(self.schedule)} entries): use one or the other (kind none "
                             "with a schedule)")
        for i, (a, b) in enumerate(zip(self.schedule, self.schedule[1:], strict=False)):
            if b.epoch <= a.epoch:
                raise ValueError(
                    f"faults.schedule[{i + 1}].epoch={b.epoch} after faults.schedule[{i}].epoch="
                    f"{a.epoch}: epochs must strictly increase (a recovery goes back to the last "
                    "epoch-boundary checkpoint, so the next fault must lie in a later epoch)")
        return self

    def points(self) -> list[tuple[str, _FaultPoint]]:
        """(config path, fault) of every fault this section injects."""
        single = [] if self.kind == "none" else [("faults", self)]
        return single + [(f"faults.schedule[{i}]", f) for i, f in enumerate(self.schedule)]

    def on_attempt(self, attempt: int) -> FaultConfig:
        """The single fault attempt ``attempt`` of the run injects: this section itself
        without a schedule; with one, its entry ``attempt`` (fired on that attempt only),
        or no fault once the schedule is spent."""
        if not self.schedule:
            return self
        if attempt >= len(self.schedule):
            return FaultConfig()
        e = self.schedule[attempt]
        # `times` counts attempts from the first: attempt i is the last one it hits
        return FaultConfig(kind=e.kind, rank=e.rank, epoch=e.epoch, step=e.step, times=attempt + 1)


class RunConfig(_Frozen):
    dataset: DatasetConfig
    partition: PartitionConfig = Field(default_factory=PartitionConfig)
    sampler: SamplerConfig = Field(default_factory=SamplerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    task: TaskConfig = Field(default_factory=TaskConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    faults: FaultConfig = Field(default_factory=FaultConfig)

    @model_validator(mode="after")
    def _layers_match(self) -> RunConfig:
        if self.model.layers != len(self.sampler.fanouts):
            raise ValueError(
                f"model.layers={self.model.layers} but sampler.fanouts has "
                f"{len(self.sampler.fanouts)} entries {self.sampler.fanouts}: give one fanout per layer")
        if self.sampler.weighted:
            raise ValueError("sampler.weighted=true: training runs carry no edge weights (no "
                             "dataset source provides them); use uniform sampling "
                             "(sampler.weighted=false)")
        return self

    @model_validator(mode="after")
    def _one_part_per_worker(self) -> RunConfig:
        if self.partition.parts != self.cluster.workers:
            raise ValueError(
                f"partition.parts={self.partition.parts} but cluster.workers={self.cluster.workers}: "
                "each worker owns exactly one part; set both (or use --workers K)")
        return self

    @model_validator(mode="after")
    def _faults_fit_the_run(self) -> RunConfig:
        workers = self.cluster.workers
        for where, f in self.faults.points():
            if f.rank >= workers:
                raise ValueError(f"{where}.rank={f.rank} but cluster.workers={workers}: a fault "
                                 f"must strike a worker that exists (rank 0..{workers - 1})")
        if len(self.faults.schedule) > self.train.max_failures:
            raise ValueError(
                f"train.max_failures={self.train.max_failures} but faults.schedule has "
                f"{len(self.faults.schedule)} entries: each entry is one failure the run must "
                f"recover from; set train.max_failures >= {len(self.faults.schedule)}")
        return self

    def with_overrides(self, overrides: Sequence[str]) -> RunConfig:
        """A new config: this one with ``KEY=VALUE`` overrides applied (``--set``'s items),
        validated as :func:`load_config` validates them, with the same errors; this one is
        left as it is. A mapping of overrides becomes items with ``gnntrain.api.override_items``."""
        if isinstance(overrides, str):  # a str is a Sequence[str] of one-letter "items"
            raise TypeError(f"overrides={overrides!r}: give a list of KEY=VALUE items, "
                            f"e.g. [{overrides!r}]")
        return load_config(raw=self.model_dump(mode="json"), overrides=list(overrides))


class _DatasetOnly(_Frozen):
    dataset: DatasetConfig


def parse_dataset(raw: Mapping[str, Any]) -> DatasetConfig:
    """Validate one ``dataset:`` section (a mapping with ``source``) into its model."""
    try:
        return _DatasetOnly.model_validate({"dataset": dict(raw)}).dataset
    except ValidationError as e:
        raise ConfigError(_format_errors(e, "<dataset>", _DatasetOnly)) from None


DATA_ENV = "GNNTRAIN_DATA"


def data_root() -> Path:
    """Where a relative ``dataset.path`` resolves: ``$GNNTRAIN_DATA``, else
    ``$XDG_CACHE_HOME/gnntrain/datasets``, else ``~/.cache/gnntrain/datasets``."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "gnntrain" / "datasets"


def _members(field: FieldInfo) -> dict[str, type[BaseModel]]:
    """For a field holding a union discriminated on a key: tag -> member model; else {}."""
    key = field.discriminator
    if not isinstance(key, str):
        return {}
    return {m.model_fields[key].default: m for m in get_args(field.annotation)}


def _walk(loc: tuple[int | str, ...],
          root: type[BaseModel]) -> tuple[str, str | None, FieldInfo | None]:
    """The field path of a pydantic error location without union tags, the tag (with its
    key) of the union member that holds the last element if any, and the last field."""
    node: Any = root
    path: list[str] = []
    tag: str | None = None  # the tag of the union member ``node`` is, if it is one
    holder: str | None = None
    field: FieldInfo | None = None
    i = 0
    while i < len(loc):
        part = loc[i]
        path.append(str(part))
        i += 1
        fields = getattr(node, "model_fields", None)
        field = fields.get(part) if isinstance(fields, dict) and isinstance(part, str) else None
        holder, tag = tag, None
        if field is None:
            node = None
            continue
        members = _members(field)
        if members and i < len(loc) and loc[i] in members:
            node, tag = members[str(loc[i])], f"{field.discriminator}={loc[i]!r}"
            i += 1
        else:
            node = field.annotation
    return ".".join(path) or "(top level)", holder, field


def _format_errors(err: ValidationError, source: str, root: type[BaseModel] = RunConfig) -> str:
    lines = [f"invalid config {source}:"]
    for e in err.errors():
        path, tag, field = _walk(tuple(e["loc"]), root)
        if e["type"] == "extra_forbidden":
            if tag is not None:
                owner = path.rsplit(".", 1)[0]
                lines.append(f"  {path}: not a setting of {owner}.{tag} (value {e.get('input')!r}); "
                             "check the spelling or the source's settings in its loader module")
            else:
                lines.append(f"  {path}: unknown key (value {e.get('input')!r}); check the spelling")
        elif e["type"] in ("union_tag_invalid", "union_tag_not_found"):
            key = field.discriminator if field is not None else "source"
            got = (e.get("ctx") or {}).get("tag")
            seen = "missing" if got is None else f"got {got!r}"
            tags = ", ".join(_members(field)) if field is not None else ""
            lines.append(f"  {path}.{key}: {seen}; expected one of {tags}")
        elif e["type"] == "missing":
            lines.append(f"  {path}: required{' for ' + tag if tag else ''}, but missing")
        elif e["type"] == "value_error":  # our validators already name field and value
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"  {path}: {msg}")
        else:
            lines.append(f"  {path}: {e['msg']} (got {e.get('input')!r})")
    return "\n".join(lines)


def _apply_override(raw: dict[str, Any], item: str) -> None:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. train.epochs=3")
    key, _, value = item.partition("=")
    parts = key.strip().split(".")
    node: Any = RunConfig
    target = raw
    where = ""  # names the union member whose keys apply, when the section is one
    members: dict[str, type[BaseModel]] = {}
    tag_key = ""
    for i, part in enumerate(parts):
        if node is dict:  # inside a free-form mapping (model.options, task.options): any key
            if i == len(parts) - 1:
                target[part] = yaml.safe_load(value)
            else:
                target = target.setdefault(part, {})
            continue
        fields = getattr(node, "model_fields", None)
        if fields is None or part not in fields:
            known = ", ".join(sorted(fields)) if fields else "(none: not a section)"
            raise ConfigError(
                f"--set {key}: no such key {'.'.join(parts[:i + 1])!r}; known keys here{where}: {known}")
        if i == len(parts) - 1:
            target[part] = yaml.safe_load(value)
            if where and part == tag_key and target[part] in members:
                # switching the source: keep the keys the new source has, drop the old one's
                keep = members[target[part]].model_fields
                for k in [k for k in target if k not in keep]:
                    del target[k]
        else:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ConfigError(f"--set {key}: {'.'.join(parts[:i + 1])} is not a section")
            members = _members(fields[part])
            if members:  # a union section: its keys are those of the member the raw tag names
                tag_key = str(fields[part].discriminator)
                tag = target.get(tag_key)
                if tag not in members and parts[i + 1] != tag_key:
                    raise ConfigError(
                        f"--set {key}: {'.'.join(parts[:i + 1])}.{tag_key}={tag!r} names none of "
                        f"{sorted(members)}; set it first")
                node = members.get(str(tag), next(iter(members.values())))
                where = f" (for {'.'.join(parts[:i + 1])}.{tag_key}={tag!r})"
            else:
                ann = fields[part].annotation
                optional = [a for a in get_args(ann) if a is not type(None)]
                if type(None) in get_args(ann) and len(optional) == 1:
                    ann = optional[0]  # an optional section (model.node_embedding): its keys
                node, where = (dict if typing.get_origin(ann) is dict else ann), ""


def load_config(path: str | os.PathLike[str] | None = None, overrides: list[str] | None = None,
                *, raw: dict[str, Any] | None = None) -> RunConfig:
    """Read a YAML config (or a dict), apply ``KEY=VALUE`` overrides and validate.

    An override of ``dataset.X`` must name a key of the model that the section's
    ``source`` selects; ``dataset.source=S`` switches the model and drops the keys the
    new source does not have (the shared ones, such as ``name``, stay).
    """
    if raw is None:
        if path is None:
            raise ConfigError("load_config: give a path or raw=")
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist; dataset configs live in datasets/*.yaml")
        with p.open() as f:
            loaded = yaml.safe_load(f)
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p}: expected a mapping of sections, got {type(loaded).__name__}")
        raw = loaded
    raw = copy.deepcopy(raw)
    for item in overrides or []:
        _apply_override(raw, item)
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_errors(e, str(path or "<dict>"))) from None

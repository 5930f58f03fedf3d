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
from pathlib import Path
from typing import Any, Literal

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

from partition.config import PartitionConfig
from partition.paths import check_component
from samplers.config import CacheConfig, SamplerConfig

__all__ = [
    "CacheConfig", "ClusterConfig", "ConfigError", "DatasetConfig", "FaultConfig", "ModelConfig",
    "PartitionConfig", "RunConfig", "SamplerConfig", "SyntheticConfig", "TrainConfig",
    "load_config", "data_root",
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
    train_frac: float = Field(0.6, gt=0.0, lt=1.0)
    val_frac: float = Field(0.2, ge=0.0, lt=1.0)
    seed: int = 0

    @model_validator(mode="after")
    def _fracs(self) -> SyntheticConfig:
        _check_fracs(self.train_frac, self.val_frac, "")
        if self.avg_degree >= self.nodes:
            raise ValueError(f"avg_degree={self.avg_degree} must be below nodes={self.nodes}")
        return self


# Fields that mean nothing for source=synthetic (the generator has its own split settings).
_NOT_FOR_SYNTHETIC = ("path", "planetoid_name", "edges", "features", "labels", "train_frac",
                      "val_frac", "split_seed", "split", "num_nodes", "num_classes", "relabel",
                      "delimiter", "id_column", "label_column", "feature_fallback",
                      "fallback_dim", "normalize_features")
_CSV_ONLY = ("edges", "features", "labels", "delimiter", "id_column", "label_column", "relabel")


def _non_default(model: BaseModel, name: str) -> bool:
    """True when field ``name`` differs from its default (a dumped config repeats defaults)."""
    f = type(model).model_fields[name]
    default = f.get_default(call_default_factory=True)
    return bool(getattr(model, name) != default)


class DatasetConfig(_Frozen):
    """Where the graph comes from and how it is cleaned at load time.

    Each ``source`` and its files are documented in the loader module named for it
    under ``gnntrain/data/`` (``planetoid``, ``npz`` / ``heterophilous``, ``ogb``,
    ``csv`` -> ``edgelist``, ``synthetic``).
    """

    name: str
    source: Literal["planetoid", "npz", "heterophilous", "ogb", "csv", "synthetic"]
    path: str | None = Field(None, description="file or directory; relative paths resolve "
                             "against $GNNTRAIN_DATA, else ../shared/datasets beside the checkout")
    planetoid_name: str | None = None
    split: int | str = Field(0, description="split index (npz with 10 splits), OGB split name, "
                             "or 'random' for a random split even where the source has one")
    edges: str | None = None
    features: str | None = None
    labels: str | None = None
    delimiter: str | None = Field(None, description="csv field separator; None = detect")
    id_column: str | int | None = Field(None, description="csv labels: node-id column "
                                        "(header name or 0-based index; default first)")
    label_column: str | int | None = Field(None, description="csv labels: label column "
                                           "(default last)")
    num_nodes: int | None = Field(None, ge=1, description="csv: node count; default max id + 1")
    num_classes: int | None = Field(None, ge=1, description="labels must lie in "
                                    "[0, num_classes); default max label + 1")
    relabel: bool = Field(False, description="csv: renumber arbitrary integer ids densely")
    undirected: bool = True
    dedup: bool = True
    self_loops: Literal["keep", "remove", "add"] = "keep"
    train_frac: float = Field(0.6, gt=0.0, lt=1.0)
    val_frac: float = Field(0.2, ge=0.0, lt=1.0)
    split_seed: int = 0
    feature_fallback: Literal["degree", "random_projection"] = Field(
        "degree", description="features built from the structure when the source has none")
    fallback_dim: int = Field(32, ge=1, description="width of random_projection features")
    synthetic: SyntheticConfig = Field(default_factory=SyntheticConfig)
    normalize_features: Literal["none", "row"] = Field(
        "none", description="'row' divides each feature row by its sum (PyG's NormalizeFeatures)")

    @field_validator("name", "planetoid_name")
    @classmethod
    def _one_component(cls, v: str | None, info: ValidationInfo) -> str | None:
        # both become directory names (run directory, partition set, <path>/<Name>/raw)
        return v if v is None else check_component(str(info.field_name), v)

    @model_validator(mode="after")
    def _consistent(self) -> DatasetConfig:
        src = self.source
        if src != "synthetic" and not (self.path or self.edges):
            raise ValueError(f"source={src!r} needs 'path' (or 'edges' for csv)")
        if src != "csv":
            given = [f for f in _CSV_ONLY if f in self.model_fields_set and _non_default(self, f)]
            if given:
                raise ValueError(f"{given} only apply to source='csv', not source={src!r}")
        if src == "synthetic":
            given = [f for f in _NOT_FOR_SYNTHETIC if f in self.model_fields_set and _non_default(self, f)]
            if given:
                raise ValueError(f"{given} do not apply to source='synthetic'; the generator "
                                 "is configured under dataset.synthetic (its own train_frac, "
                                 "val_frac and seed)")
            if not self.undirected or self.self_loops == "add":
                raise ValueError(f"source='synthetic' makes an undirected graph without "
                                 f"self-loops; undirected={self.undirected}, "
                                 f"self_loops={self.self_loops!r} are not supported")
        elif "synthetic" in self.model_fields_set and _non_default(self, "synthetic"):
            raise ValueError(f"'synthetic' settings only apply to source='synthetic', "
                             f"not source={src!r}")
        if src == "heterophilous" and not self.undirected:
            raise ValueError("source='heterophilous' files store each undirected edge once; "
                             "undirected must stay true so the loader adds the reverses")
        if isinstance(self.split, int) and self.split < 0:
            raise ValueError(f"split={self.split}: a split index must be >= 0")
        if isinstance(self.split, str) and src in ("npz", "heterophilous", "planetoid", "csv") \
                and self.split != "random":
            raise ValueError(f"split={self.split!r}: source={src!r} takes a split index "
                             "(0, 1, ...) or 'random'")
        if self.delimiter is not None and len(self.delimiter) != 1:
            raise ValueError(f"delimiter={self.delimiter!r}: give one character, e.g. ',' "
                             "or '\\t'")
        _check_fracs(self.train_frac, self.val_frac, "")
        return self


class ModelConfig(_Frozen):
    arch: Literal["sage", "gcn", "gat"] = "sage"
    hidden: int = Field(256, ge=1)
    layers: int = Field(3, ge=1)
    dropout: float = Field(0.5, ge=0.0, lt=1.0)
    norm: Literal["none", "batch", "layer"] = "none"
    heads: int = Field(4, ge=1, description="attention heads (gat only)")


class TrainConfig(_Frozen):
    epochs: int = Field(10, ge=1)
    lr: float = Field(0.003, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    seed: int = 0
    eval_every: int = Field(1, ge=1)
    eval: Literal["full", "sampled"] = "full"
    device: Literal["cpu", "cuda"] = "cpu"
    checkpoint_every: int = Field(0, ge=0, description="epochs between checkpoints; 0 = end only")
    keep_checkpoints: int = Field(2, ge=1)
    max_failures: int = Field(0, ge=0)
    feature_dtype: Literal["float32", "float16", "bfloat16", "int8"] = "float32"
    optimizer: Literal["adam", "sgd"] = "adam"
    run_root: str = "runs"


class ClusterConfig(_Frozen):
    workers: int = Field(1, ge=1)
    address: str | None = Field(None, description="Ray address; None starts Ray embedded")
    num_cpus: float | None = Field(None, gt=0, description="CPUs for the embedded instance")
    cpus_per_worker: float | None = Field(None, gt=0)
    gpus_per_worker: float | None = Field(None, gt=0, le=1, description="fraction of a GPU per worker "
                                          "with train.device=cuda; default: the GPUs shared evenly")
    call_timeout_s: float = Field(120.0, gt=0)
    collective_timeout_s: float = Field(120.0, gt=0)
    epoch_timeout_s: float = Field(1800.0, gt=0)
    connect_timeout_s: float = Field(20.0, gt=0)


class FaultConfig(_Frozen):
    """Fault injection for tests and drills: worker ``rank`` fails at (``epoch``, ``step``).

    ``raise`` raises in the training step, ``exit`` kills the worker process, ``stall``
    stops answering (sleeps) so that timeouts and the watchdog are exercised. Off by default.
    """

    kind: Literal["none", "raise", "exit", "stall"] = "none"
    rank: int = Field(0, ge=0)
    epoch: int = Field(0, ge=0)
    step: int = Field(0, ge=0)
    times: int = Field(1, ge=1, description="how many attempts of the run the fault hits")


class RunConfig(_Frozen):
    dataset: DatasetConfig
    partition: PartitionConfig = Field(default_factory=PartitionConfig)
    sampler: SamplerConfig = Field(default_factory=SamplerConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    faults: FaultConfig = Field(default_factory=FaultConfig)

    @model_validator(mode="after")
    def _layers_match(self) -> RunConfig:
        if self.model.layers != len(self.sampler.fanouts):
            raise ValueError(
                f"model.layers={self.model.layers} but sampler.fanouts has "
                f"{len(self.sampler.fanouts)} entries {self.sampler.fanouts}: give one fanout per layer")
        return self


def data_root() -> Path:
    """Where real datasets live: ``$GNNTRAIN_DATA``, else ``../shared/datasets``."""
    env = os.environ.get("GNNTRAIN_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent.parent / "shared" / "datasets"


def _format_errors(err: ValidationError, source: str) -> str:
    lines = [f"invalid config {source}:"]
    for e in err.errors():
        path = ".".join(str(p) for p in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            lines.append(f"  {path}: unknown key (value {e.get('input')!r}); check the spelling")
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
    for i, part in enumerate(parts):
        fields = getattr(node, "model_fields", None)
        if fields is None or part not in fields:
            known = ", ".join(sorted(fields)) if fields else "(none: not a section)"
            raise ConfigError(
                f"--set {key}: no such key {'.'.join(parts[:i + 1])!r}; known keys here: {known}")
        if i == len(parts) - 1:
            target[part] = yaml.safe_load(value)
        else:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ConfigError(f"--set {key}: {'.'.join(parts[:i + 1])} is not a section")
            node = fields[part].annotation


def load_config(path: str | os.PathLike[str] | None = None, overrides: list[str] | None = None,
                *, raw: dict[str, Any] | None = None) -> RunConfig:
    """Read a YAML config (or a dict), apply ``KEY=VALUE`` overrides and validate."""
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

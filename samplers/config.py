"""Settings of the neighbour sampler and the remote-feature cache (``sampler:`` section)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

T = TypeVar("T")


class CacheConfig(BaseModel):
    """Cache of feature rows owned by other workers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Literal["none", "degree", "presample", "lru", "fifo"] = Field(
        "none", description="none; degree: the remote rows of highest degree (PaGraph); presample: "
        "the rows a pre-sampling pass touched most (GNNLab); lru, fifo: filled as rows arrive")
    size: float | dict[str, float] = Field(
        0.0, description="fraction of remote rows (<= 1) or a row count (> 1), or bytes with "
        "unit: bytes. On a typed graph one size is shared by the node types (each type the same "
        "share of its remote rows); a mapping {node type: size} gives each type its own, read the "
        "same way against that type's remote rows, and the types it does not name are not cached")
    unit: Literal["auto", "rows", "bytes"] = Field(
        "auto", description="how to read size: auto (fraction if <= 1, else rows), rows, or bytes")
    presample_epochs: int = Field(1, ge=1, description="epochs of sampling that presample counts")

    @field_validator("size")
    @classmethod
    def _size(cls, v: float | dict[str, float]) -> float | dict[str, float]:
        for key, n in (v.items() if isinstance(v, dict) else [("", v)]):
            if not n >= 0:  # also refuses NaN
                where = f"size.{key}" if key else "size"
                raise ValueError(f"{where}={n}: must be >= 0 (a fraction <= 1, a row count, or bytes)")
        return v


def per_node_type(field: str, mapping: Mapping[str, T], type_names: Sequence[str], default: T,
                  untyped_hint: str) -> tuple[T, ...]:
    """A config mapping ``{node type: value}`` as one value per node type (``default`` for
    the types it does not name). A key that is not a node type, or a mapping on an untyped
    graph, raises ``ValueError`` naming ``field``, the key and the graph's node types."""
    if not type_names:
        raise ValueError(f"{field}={dict(mapping)}: a value per node type needs a typed graph; "
                         f"this graph is untyped, {untyped_hint}")
    unknown = sorted(set(mapping) - set(type_names))
    if unknown:
        raise ValueError(f"{field}: {unknown} are not node types of this graph; "
                         f"node types: {list(type_names)}")
    return tuple(mapping.get(t, default) for t in type_names)


def resolve_type_sizes(size: float | dict[str, float], type_names: Sequence[str]
                       ) -> tuple[float, ...] | None:
    """``sampler.cache.size`` as one size per node type when it is a mapping (0 for the
    types it does not name, :func:`per_node_type`), ``None`` when it is one size."""
    if not isinstance(size, dict):
        return None
    return tuple(float(v) for v in per_node_type("sampler.cache.size", size, type_names, 0.0,
                                                 "give one size"))


def _default_fanouts() -> list[int | dict[str, int]]:
    return [15, 10, 5]


class SamplerConfig(BaseModel):
    """Fanout neighbour sampling. ``fanouts[0]`` is the hop next to the seeds (PyG order).

    On a typed graph a hop may instead map relation names to fanouts (DGL's
    ``{etype: fanout}``): ``{"paper:cites:paper": 10, "author:writes:paper": 5, ...}`` (or
    the bare relation name where it is unique), every relation named, ``-1`` for all of its
    edges, ``0`` for none; :func:`resolve_fanouts` checks the names against the graph."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fanouts: list[int | dict[str, int]] = Field(
        default_factory=lambda: _default_fanouts(),
        description="neighbours drawn per hop, the hop next to the seeds first (one per model "
        "layer); -1 takes all; on a typed graph a hop may map relations to fanouts")
    batch_size: int = Field(1024, description="seeds (link prediction: positive edges) per step "
                            "on each worker; the global batch is workers x batch_size")
    replace: bool = Field(False, description="draw neighbours with replacement")
    weighted: bool = Field(False, description="draw neighbours by edge weight (training runs carry "
                           "no edge weights and refuse it)")
    backend: Literal["numba", "torch"] = Field(
        "numba", description="how a worker draws its own rows' neighbours: numba kernels on the host, "
        "or torch ops on the training device (train.device; a GPU when it is cuda): the same "
        "neighbours either way (samplers/device.py), with every hop there, relabelling included "
        "(peers' rows through the host), and the own feature rows gathered on that device when "
        "they fit (a GPU: at most half its free memory, else read by the GPU from page-locked host "
        "memory; a typed graph's one table per node type); weighted "
        "sampling is numba only")
    shuffle: bool = Field(True, description="shuffle each worker's seeds every epoch")
    prefetch: int = Field(2, ge=0, description="batches sampled ahead of training")
    seed_order: Literal["random", "locality"] = Field(
        "random", description="locality: each part's training nodes in reverse Cuthill-McKee order, "
        "so a batch is a run of nearby seeds (fewer remote rows, batches skewed to few classes)")
    cache: CacheConfig = Field(default_factory=lambda: CacheConfig.model_validate({}),
                               description="the cache of remote feature rows")

    @field_validator("fanouts")
    @classmethod
    def _fanouts(cls, v: list[int | dict[str, int]]) -> list[int | dict[str, int]]:
        if not v:
            raise ValueError("fanouts is empty: give one fanout per layer, e.g. [15, 10, 5]")
        for i, f in enumerate(v):
            if isinstance(f, dict):
                if not f:
                    raise ValueError(f"fanouts[{i}]={{}}: name every relation with its fanout")
                for rel, n in f.items():
                    if n < -1:
                        raise ValueError(f"fanouts[{i}][{rel!r}]={n}: a relation's fanout must be "
                                         ">= 0, or -1 for all its edges")
                if not any(f.values()):
                    raise ValueError(f"fanouts[{i}]={f}: at least one relation needs a fanout "
                                     ">= 1 or -1")
            elif f == 0 or f < -1:
                raise ValueError(f"fanouts[{i}]={f}: each fanout must be >= 1, or -1 for all neighbours")
        return v

    @model_validator(mode="after")
    def _weighted_on_numba(self) -> SamplerConfig:
        if self.weighted and self.backend == "torch":
            raise ValueError("backend='torch' with weighted=true: weighted sampling has no torch draw; "
                             "use backend: numba")
        return self

    @field_validator("batch_size")
    @classmethod
    def _batch(cls, v: int) -> int:
        if v <= 0:
            raise ValueError(f"batch_size={v}: must be >= 1")
        return v


def resolve_fanouts(fanouts: list[int | dict[str, int]], relations: list[str] | tuple[str, ...]
                    ) -> list[int | tuple[int, ...]]:
    """``sampler.fanouts`` for a graph with ``relations`` (``"src:relation:dst"`` names, in
    relation-id order; empty for an untyped graph): an int stays an int, a mapping becomes
    one fanout per relation id. A mapping key is a full name or a relation name that is
    unique in the graph; an unknown or ambiguous key, a relation left out, or a mapping on
    an untyped graph raises ``ValueError`` naming the field, the key and the names allowed."""
    out: list[int | tuple[int, ...]] = []
    for i, f in enumerate(fanouts):
        if not isinstance(f, dict):
            out.append(int(f))
            continue
        if not relations:
            raise ValueError(f"sampler.fanouts[{i}]={f}: per-relation fanouts need a typed graph; "
                             "this graph is untyped, give an int")
        short = [r.split(":")[1] if r.count(":") == 2 else r for r in relations]
        per: dict[int, int] = {}
        for key, n in f.items():
            ids = [j for j, r in enumerate(relations) if r == key] or \
                  [j for j, r in enumerate(short) if r == key]
            if len(ids) != 1:
                why = "names more than one relation" if ids else "is not a relation of this graph"
                raise ValueError(f"sampler.fanouts[{i}]: key {key!r} {why}; relations: {list(relations)}")
            if ids[0] in per:
                raise ValueError(f"sampler.fanouts[{i}]: relation {relations[ids[0]]!r} is named twice")
            per[ids[0]] = int(n)
        missing = [relations[j] for j in range(len(relations)) if j not in per]
        if missing:
            raise ValueError(f"sampler.fanouts[{i}]: no fanout for relations {missing}; name every "
                             "relation (0 skips one, -1 takes all its edges)")
        out.append(tuple(per[j] for j in range(len(relations))))
    return out


def hop_fanouts(fanouts: list[int | dict[str, int]]) -> list[int]:
    """One int per hop (a mapping counts as the sum of its fanouts, -1 if any is -1): what
    an untyped estimate such as the partition report's remote share can use."""
    return [f if isinstance(f, int) else (-1 if -1 in f.values() else sum(f.values()))
            for f in fanouts]

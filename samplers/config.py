"""Settings of the neighbour sampler and the remote-feature cache (``sampler:`` section)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class CacheConfig(BaseModel):
    """Cache of feature rows owned by other workers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Literal["none", "degree", "presample", "lru", "fifo"] = "none"
    size: float = Field(0.0, ge=0.0, description="fraction of remote rows (<= 1) or a row count (> 1)")
    unit: Literal["auto", "rows", "bytes"] = Field(
        "auto", description="how to read size: auto (fraction if <= 1, else rows), rows, or bytes")
    presample_epochs: int = Field(1, ge=1)


class SamplerConfig(BaseModel):
    """Fanout neighbour sampling. ``fanouts[0]`` is the hop next to the seeds (PyG order)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fanouts: list[int] = Field(default_factory=lambda: [15, 10, 5])
    batch_size: int = 1024
    replace: bool = False
    weighted: bool = False
    shuffle: bool = True
    prefetch: int = Field(2, ge=0, description="batches sampled ahead of training")
    seed_order: Literal["random", "locality"] = "random"
    cache: CacheConfig = Field(default_factory=lambda: CacheConfig.model_validate({}))

    @field_validator("fanouts")
    @classmethod
    def _fanouts(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("fanouts is empty: give one fanout per layer, e.g. [15, 10, 5]")
        for i, f in enumerate(v):
            if f == 0 or f < -1:
                raise ValueError(f"fanouts[{i}]={f}: each fanout must be >= 1, or -1 for all neighbours")
        return v

    @field_validator("batch_size")
    @classmethod
    def _batch(cls, v: int) -> int:
        if v <= 0:
            raise ValueError(f"batch_size={v}: must be >= 1")
        return v

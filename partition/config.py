"""Settings of a partitioning run (the ``partition:`` section of a dataset config)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

Method = Literal["metis", "random", "ldg", "stream", "multilevel", "kahypar"]
METHODS: tuple[str, ...] = get_args(Method)


class PartitionConfig(BaseModel):
    """How the graph is cut into parts.

    Every field except ``root`` (where sets live) and ``metis_spill`` (changes memory and
    time, never the parts) is part of the partition set's key.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Method = Field("metis", description="metis, random, ldg (one streaming process), stream "
                           "(LDG restreamed over row blocks in parallel) or multilevel (label-propagation "
                           "coarsening over row blocks, METIS on the coarse graph, refinement) or kahypar "
                           "(Mt-KaHyPar, the optional extra gnntrain[kahypar], then the same refinement)")
    parts: int = Field(1, ge=1, description="number of parts k (one Ray worker each)")
    objective: Literal["cut", "vol"] = "cut"
    imbalance: float = Field(1.05, ge=1.0, le=2.0, description="max/mean load tolerated per constraint")
    balance_train: bool = True
    balance_edges: bool = True
    balance_node_types: bool = Field(True, description="typed graphs: balance each node type's count "
                                      "over the parts too (types with at least 1/(imbalance-1) nodes "
                                      "per part), as DistDGL does")
    seed: int = 0
    allow_empty_train: bool = False
    root: str = "partitions"
    metis_spill: bool = Field(True, description="let METIS keep big coarsened graphs in temporary "
                              "files: ~60% less METIS memory on large graphs, ~20% slower, same parts")

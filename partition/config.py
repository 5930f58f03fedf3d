"""Settings of a partitioning run (the ``partition:`` section of a dataset config)."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

Method = Literal["metis", "random", "ldg", "stream", "multilevel", "kahypar"]
METHODS: tuple[str, ...] = get_args(Method)


class PartitionConfig(BaseModel):
    """How the graph is cut into parts.

    Every field except ``root`` and ``storage_options`` (where sets live) and ``metis_spill``
    (changes memory and time, never the parts) is part of the partition set's key.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Method = Field("metis", description="metis, random, ldg (one streaming process), stream "
                           "(LDG restreamed over row blocks in parallel) or multilevel (label-propagation "
                           "coarsening over row blocks, METIS on the coarse graph, refinement) or kahypar "
                           "(Mt-KaHyPar, the optional extra gnntrain[kahypar], then the same refinement)")
    parts: int = Field(1, ge=1, description="number of parts k (one Ray worker each)")
    objective: Literal["cut", "vol"] = Field("cut", description="what METIS minimises: edge cut or "
                                             "communication volume")
    imbalance: float = Field(1.05, ge=1.0, le=2.0, description="max/mean load tolerated per constraint")
    balance_train: bool = Field(True, description="balance training nodes (the task's training "
                                "weight per node) over the parts")
    balance_edges: bool = Field(True, description="balance in-edges over the parts")
    balance_node_types: bool = Field(True, description="typed graphs: balance each node type's count "
                                      "over the parts too (types with at least 1/(imbalance-1) nodes "
                                      "per part), as DistDGL does")
    seed: int = Field(0, description="partitioner seed: the same seed gives the same parts")
    allow_empty_train: bool = Field(False, description="allow parts without training nodes (more "
                                    "parts than training nodes)")
    root: str = Field("partitions", description="directory of stored partition sets; a relative "
                      "path is resolved on the driver. An object-store URI (s3://bucket/prefix, "
                      "gs://bucket/prefix) writes each set straight to the store, and each worker "
                      "stages its own part to cluster.scratch_dir")
    storage_options: dict[str, Any] = Field(
        default_factory=dict, description="options of the object store of a URI root, handed to "
        "fsspec as they are (e.g. endpoint_url of an on-premise S3, anon, profile; key/secret/"
        "token only where the standard places cannot be used): secret-looking keys are never "
        "written to config.yaml, summary.json or logs")
    metis_spill: bool = Field(True, description="let METIS keep big coarsened graphs in temporary "
                              "files: ~60% less METIS memory on large graphs, ~20% slower, same parts")

"""Typed run configuration: one frozen pydantic model per concern, loaded from YAML.

A dataset config (``datasets/<name>.yaml``) has the sections ``dataset``, ``partition``,
``sampler``, ``model``, ``train`` and ``cluster``. Unknown keys and wrong types fail with
the field's path (``train.epochs``); ``--set train.epochs=3`` overrides one value and
fails if the key does not exist. Everything is checked here, before data is read or
Ray starts.

The package by job: :mod:`~gnntrain.config.datasets` (the ``dataset:`` section, one model
per source), :mod:`~gnntrain.config.run` (the other sections and :class:`RunConfig`),
:mod:`~gnntrain.config.loading` (YAML, overrides, error messages),
:mod:`~gnntrain.config.plugins` (the built-in models' and tasks' names, and import paths),
:mod:`~gnntrain.config.base` (what they share). Importing it loads neither torch, numba
nor Ray.
"""

from gnntrain.config.base import ConfigError
from gnntrain.config.datasets import (
    DATA_ENV,
    HETERO_SOURCES,
    ChunksDataset,
    CsvDataset,
    DatasetConfig,
    HeteroDatasetBase,
    HeteroDirDataset,
    HeteroParquetDataset,
    HeterophilousDataset,
    LightGcnDataset,
    LoadedDataset,
    NpzDataset,
    OgbDataset,
    OgblDataset,
    OgbMagDataset,
    ParquetDataset,
    ParquetEdges,
    ParquetNodes,
    PlanetoidDataset,
    SyntheticConfig,
    SyntheticDataset,
    SyntheticHeteroConfig,
    SyntheticHeteroDataset,
    data_root,
    parse_dataset,
)
from gnntrain.config.run import (
    BUILTIN_ARCHS,
    BUILTIN_TASKS,
    EMBEDDING_OPTIMIZERS,
    ClusterConfig,
    FaultConfig,
    FeatureDtype,
    ModelConfig,
    NodeEmbeddingConfig,
    RunConfig,
    ScheduledFault,
    TaskConfig,
    TrainConfig,
    load_config,
    parse_address,
)
from partition.config import PartitionConfig
from samplers.config import CacheConfig, SamplerConfig

__all__ = [
    "BUILTIN_ARCHS", "BUILTIN_TASKS", "CacheConfig", "ChunksDataset", "ClusterConfig",
    "ConfigError", "CsvDataset", "DATA_ENV", "DatasetConfig", "EMBEDDING_OPTIMIZERS", "FaultConfig",
    "FeatureDtype", "HETERO_SOURCES", "HeteroDatasetBase", "HeteroDirDataset", "HeteroParquetDataset",
    "HeterophilousDataset", "LightGcnDataset",
    "LoadedDataset", "ModelConfig", "NodeEmbeddingConfig", "NpzDataset", "OgbDataset",
    "OgbMagDataset", "OgblDataset", "ParquetDataset", "ParquetEdges", "ParquetNodes",
    "PartitionConfig", "PlanetoidDataset", "RunConfig",
    "SamplerConfig", "ScheduledFault", "SyntheticConfig", "SyntheticDataset",
    "SyntheticHeteroConfig", "SyntheticHeteroDataset", "TaskConfig", "TrainConfig", "data_root",
    "load_config", "parse_address", "parse_dataset",
]

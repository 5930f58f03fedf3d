"""The bottom layer: the canonical graph, the partition book, partitioners and the
on-disk partition set.

Graph -> k balanced parts: METIS (multi-constraint), random and LDG partitioners,
renumbering into contiguous per-part id ranges (:class:`PartitionBook`), the on-disk
partition set (:mod:`partition.format`) and the partition-quality report.

Layers: ``partition`` <- ``samplers`` <- ``gnntrain``. Nothing here imports
``samplers`` or ``gnntrain`` (``tests/test_layering.py`` checks it), except the
``python -m partition`` entry point (:mod:`partition.cli`), which reaches up for the
dataset loaders and the run config. Importing the package loads numpy and pydantic
only; the partitioners and the report (numba, scipy) load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from partition.book import PartitionBook
from partition.config import PartitionConfig
from partition.errors import PartitionChecksumError, PartitionError, PartitionFormatError
from partition.format import FORMAT_VERSION, PartitionMeta
from partition.graph import Graph, GraphError, csr_from_edges
from partition.steps import StepStat
from partition.store import Part, PartitionSet, open_partition_set

if TYPE_CHECKING:
    from partition.build import build_partition_set
    from partition.methods import assign_parts
    from partition.report import PartitionReport, quality_report, set_report, write_report
    from partition.training_set import TrainingSet, build_training_set, open_training_set

__all__ = [
    "FORMAT_VERSION", "Graph", "GraphError", "Part", "PartitionBook", "PartitionChecksumError",
    "PartitionConfig", "PartitionError", "PartitionFormatError", "PartitionMeta", "PartitionReport",
    "PartitionSet", "StepStat", "TrainingSet", "assign_parts", "build_partition_set", "build_training_set",
    "csr_from_edges", "open_partition_set", "open_training_set", "quality_report", "set_report",
    "write_report",
]

_LAZY = {  # names whose modules load numba or scipy
    "build_partition_set": "partition.build",
    "assign_parts": "partition.methods",
    "PartitionReport": "partition.report",
    "quality_report": "partition.report",
    "set_report": "partition.report",
    "write_report": "partition.report",
    "TrainingSet": "partition.training_set",
    "build_training_set": "partition.training_set",
    "open_training_set": "partition.training_set",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'partition' has no attribute {name!r}")

"""Graph -> k balanced parts: METIS (multi-constraint), random and LDG partitioners,
renumbering into contiguous per-part id ranges, the on-disk partition set
(:mod:`partition.format`) and the partition-quality report.

Imports numpy, scipy, numba and pydantic only (never Ray, torch or the runtime).
"""

from partition.build import build_partition_set
from partition.config import PartitionConfig
from partition.errors import PartitionChecksumError, PartitionError, PartitionFormatError
from partition.format import FORMAT_VERSION, PartitionMeta
from partition.methods import assign_parts
from partition.report import PartitionReport, quality_report, write_report
from partition.steps import StepStat
from partition.store import Part, PartitionSet, open_partition_set

__all__ = [
    "FORMAT_VERSION", "Part", "PartitionChecksumError", "PartitionConfig", "PartitionError",
    "PartitionFormatError", "PartitionMeta", "PartitionReport", "PartitionSet", "StepStat",
    "assign_parts", "build_partition_set", "open_partition_set", "quality_report", "write_report",
]

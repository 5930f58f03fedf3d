"""Exceptions of the partition package.

Every exception a user can cause is a :class:`ValueError` subclass whose message names
the argument or file, the value seen and what is allowed (or how to fix it).
"""

from __future__ import annotations


class PartitionError(ValueError):
    """Impossible partitioning request: bad ``k``, no training nodes per part, unwritable root."""


class PartitionFormatError(PartitionError):
    """A partition directory is foreign, from an older format, or belongs to another graph."""


class PartitionChecksumError(PartitionFormatError):
    """A file of a partition set is missing, truncated or altered (its checksum differs)."""

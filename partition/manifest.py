"""Checksummed manifests: the data files first, each recorded with its size and SHA-256,
then the manifest that lists them, written last and atomically; a reader trusts only the
files the manifest lists, and checks each against its record before use.

Partition sets (``meta.json``, :mod:`partition.format`), chunk directories
(:mod:`partition.chunked`), prediction directories (:mod:`gnntrain.predict.format`) and
checkpoints (:mod:`gnntrain.checkpoint`) all keep their files this way. Each format keeps its
own manifest model and JSON keys and words its own errors; this module does the hashing
(streamed, 16 MiB at a time, never a whole file in memory), the checks and the writes.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

__all__ = ["CHUNK", "FileMismatch", "FileRecord", "HashingWriter", "atomic_write_bytes", "json_digest",
           "manifest_bytes", "read_manifest", "record_bytes", "record_file", "sha256_file", "verify", "write_manifest"]

CHUNK = 16 << 20
"""Bytes hashed or written per piece."""


@dataclass(frozen=True)
class FileRecord:
    """What a manifest records of one file: its size and the SHA-256 (hex) of its bytes."""

    bytes: int
    sha256: str


class HashingWriter:
    """A binary file wrapper that hashes and counts the bytes on their way out, so a file
    is recorded as it is written (no second read)."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw, self.hash, self.count = raw, hashlib.sha256(), 0

    def write(self, b: bytes | memoryview) -> int:
        self.hash.update(b)
        self.count += len(b)
        return self.raw.write(b)

    def record(self) -> FileRecord:
        """The record of everything written so far."""
        return FileRecord(bytes=self.count, sha256=self.hash.hexdigest())


def sha256_file(path: Path) -> str:
    """SHA-256 (hex) of a whole file, read in :data:`CHUNK` pieces."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def record_file(path: Path) -> FileRecord:
    """The record of a file already written."""
    return FileRecord(bytes=path.stat().st_size, sha256=sha256_file(path))


def record_bytes(data: bytes) -> FileRecord:
    """The record of a file that holds exactly ``data``."""
    return FileRecord(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())


class FileMismatch(Exception):
    """A listed file that does not match its record: ``problem`` is ``missing``, ``size``
    (``got`` the size found) or ``sha256`` (``got`` the digest found). The format that
    catches it words the error for its users."""

    def __init__(self, path: Path, problem: Literal["missing", "size", "sha256"],
                 expected: int | str | None = None, got: int | str | None = None) -> None:
        super().__init__(f"{path}: {problem} (expected {expected}, got {got})")
        self.path, self.problem, self.expected, self.got = path, problem, expected, got


def verify(path: Path, size: int, sha256: str | None = None) -> Path:
    """``path`` if it is a file of ``size`` bytes and, when ``sha256`` is given, has that
    digest (the size is checked first, so a missing or truncated file costs no hashing);
    else :class:`FileMismatch`."""
    if not path.is_file():
        raise FileMismatch(path, "missing", size)
    got = path.stat().st_size
    if got != size:
        raise FileMismatch(path, "size", size, got)
    if sha256 is not None:
        digest = sha256_file(path)
        if digest != sha256:
            raise FileMismatch(path, "sha256", sha256, digest)
    return path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp file in the same directory, fsync, then rename over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def manifest_bytes(body: Mapping[str, Any]) -> bytes:
    """The bytes of a manifest file: JSON, one-space indent, a final newline."""
    return (json.dumps(body, indent=1) + "\n").encode()


def write_manifest(path: Path, body: Mapping[str, Any]) -> None:
    """Write a manifest, atomically: the last write of a set of files, after every file it
    lists."""
    atomic_write_bytes(path, manifest_bytes(body))


def read_manifest(path: Path) -> Any:
    """The JSON a manifest file holds; OSError or ValueError if it cannot be read."""
    return json.loads(path.read_text())


def json_digest(body: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a JSON body with sorted keys and compact separators: a manifest's
    digest of itself, so an edited manifest is detected like an edited file."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

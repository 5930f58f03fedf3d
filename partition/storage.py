"""Where files live: a local directory or an object-store prefix, behind one small interface.

:func:`open_store` gives a :class:`Store` for a location: a local path (or ``file://``
URI) is a :class:`LocalStore` (plain ``pathlib`` I/O, nothing else imported); any other
URI (``s3://bucket/prefix``, ``gs://bucket/prefix``, ``memory://...``, every protocol
fsspec knows) is an :class:`FsspecStore`. fsspec and its cloud back-ends (s3fs, gcsfs)
are imported only when a URI asks for them. Credentials come from the back-end's
standard places (environment, profile files, instance roles) and from the
``storage_options`` mapping (``endpoint_url`` of an on-premise S3, ``key``/``secret``,
``token``, ...), which is handed to the back-end as is.

Secrets never leave through this module: errors name the URI and the operation, never the
options, and :func:`redact` drops secret-looking keys (key, secret, token, password,
credential) from a mapping before anything is written.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from partition.errors import PartitionError
from partition.manifest import CHUNK, FileMismatch, FileRecord, HashingWriter, atomic_write_bytes

__all__ = ["FsspecStore", "LocalStore", "Store", "StorageError", "default_scratch", "is_remote",
           "local_path", "open_parent", "open_store", "redact", "secret_keys"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SECRET = re.compile(r"key|secret|token|password|passwd|credential|session", re.IGNORECASE)


class StorageError(PartitionError):
    """A store could not be read or written: the message names the URI, the operation and
    the back-end's reason (never the storage options)."""


def is_remote(location: str | Path) -> bool:
    """Whether ``location`` is a URI other than ``file://`` (then fsspec opens it)."""
    m = _SCHEME.match(str(location))
    return m is not None and m.group(1).lower() != "file"


def local_path(location: str | Path) -> Path:
    """The local path of a plain path or ``file://`` URI."""
    s = str(location)
    return Path(s[len("file://"):]) if s.lower().startswith("file://") else Path(s)


def default_scratch() -> Path:
    """The node-local scratch directory used when none is configured: ``gnntrain-scratch``
    under the system temp directory."""
    return Path(tempfile.gettempdir()) / "gnntrain-scratch"


def redact(options: Any) -> Any:
    """``options`` without the values of secret-looking keys (key, secret, token, password,
    credential, session; nested mappings too): what may be written to a log or a file."""
    if isinstance(options, Mapping):
        return {k: redact(v) for k, v in options.items() if not _SECRET.search(str(k))}
    if isinstance(options, list | tuple):
        return [redact(v) for v in options]
    return options


def secret_keys(options: Any, prefix: str = "") -> list[str]:
    """The dotted names of the secret-looking keys in ``options`` (those :func:`redact` drops)."""
    if isinstance(options, Mapping):
        return [name for k, v in options.items()
                for name in ([f"{prefix}{k}"] if _SECRET.search(str(k)) else secret_keys(v, f"{prefix}{k}."))]
    if isinstance(options, list | tuple):
        return [name for i, v in enumerate(options) for name in secret_keys(v, f"{prefix}{i}.")]
    return []


class Store(ABC):
    """A directory of files addressed by ``/``-separated relative names."""

    uri: str

    @abstractmethod
    def child(self, name: str) -> Store:
        """The store of the sub-directory (or sub-prefix) ``name``."""

    @abstractmethod
    def exists(self, rel: str) -> bool:
        """Whether the file ``rel`` exists."""

    @abstractmethod
    def names(self) -> list[str]:
        """Names directly under this store (files and sub-directories); [] when it is absent."""

    @abstractmethod
    def size(self, rel: str) -> int | None:
        """Size in bytes of the file ``rel``, None when it is absent."""

    @abstractmethod
    def read_bytes(self, rel: str) -> bytes:
        """The whole file ``rel`` (small files: manifests)."""

    @abstractmethod
    def write_bytes(self, rel: str, data: bytes) -> None:
        """Replace ``rel`` with ``data`` atomically: a reader sees the old or the new file."""

    @abstractmethod
    def open_write(self, rel: str) -> Any:
        """A context manager giving a binary file that writes ``rel`` (parents created)."""

    @abstractmethod
    def remove(self, rel: str) -> None:
        """Delete the file ``rel`` if it exists."""

    @abstractmethod
    def remove_all(self) -> None:
        """Delete this directory (prefix) and everything under it, if it exists."""

    @abstractmethod
    def open_read(self, rel: str) -> Any:
        """A context manager giving a binary file that reads ``rel``."""

    def read_checked(self, rel: str, size: int, sha256: str | None = None) -> bytes:
        """The whole file ``rel`` if it has ``size`` bytes and, when given, that SHA-256;
        else :class:`~partition.manifest.FileMismatch` (``missing``, ``size`` or ``sha256``)."""
        where = Path(f"{self.uri}/{rel}")
        got = self.size(rel)
        if got is None:
            raise FileMismatch(where, "missing", size)
        if got != size:
            raise FileMismatch(where, "size", size, got)
        data = self.read_bytes(rel)
        if len(data) != size:  # replaced between the two requests
            raise FileMismatch(where, "size", size, len(data))
        if sha256 is not None and (digest := hashlib.sha256(data).hexdigest()) != sha256:
            raise FileMismatch(where, "sha256", sha256, digest)
        return data

    def put(self, rel: str, src: Path) -> FileRecord:
        """Copy the local file ``src`` to ``rel``, hashing it on the way out: the record
        (size, SHA-256) of what was written. On an object store the object appears whole
        or not at all."""
        with src.open("rb") as f, self.open_write(rel) as out:
            writer = HashingWriter(out)
            while chunk := f.read(CHUNK):
                writer.write(chunk)
        return writer.record()

    def fetch(self, rel: str, dest: Path, size: int, sha256: str) -> None:
        """Copy ``rel`` to the local file ``dest``, hashing it on the way in; ``dest``
        appears (by rename) only when the copy has ``size`` bytes and that SHA-256, else
        :class:`~partition.manifest.FileMismatch` and nothing is left behind."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.parent)
        try:
            h, n = hashlib.sha256(), 0
            with os.fdopen(fd, "wb") as out, self.open_read(rel) as src:
                while chunk := src.read(CHUNK):
                    h.update(chunk)
                    n += len(chunk)
                    out.write(chunk)
            where = Path(f"{self.uri}/{rel}")
            if n != size:
                raise FileMismatch(where, "size", size, n)
            if h.hexdigest() != sha256:
                raise FileMismatch(where, "sha256", sha256, h.hexdigest())
            os.replace(tmp, dest)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class LocalStore(Store):
    """A local directory (plain ``pathlib``)."""

    def __init__(self, root: str | Path) -> None:
        self.root = local_path(root)
        self.uri = str(self.root)

    def child(self, name: str) -> LocalStore:
        return LocalStore(self.root / name)

    def exists(self, rel: str) -> bool:
        return (self.root / rel).is_file()

    def names(self) -> list[str]:
        try:
            return [p.name for p in self.root.iterdir()]
        except OSError:
            return []

    def size(self, rel: str) -> int | None:
        try:
            return (self.root / rel).stat().st_size
        except OSError:
            return None

    def read_bytes(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()

    def write_bytes(self, rel: str, data: bytes) -> None:
        atomic_write_bytes(self.root / rel, data)

    @contextmanager
    def open_write(self, rel: str) -> Iterator[BinaryIO]:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:
            yield f

    def remove(self, rel: str) -> None:
        (self.root / rel).unlink(missing_ok=True)

    def remove_all(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def open_read(self, rel: str) -> Any:
        return (self.root / rel).open("rb")


class FsspecStore(Store):
    """A prefix of an fsspec file system (``s3://bucket/prefix`` and the like). Object
    stores have no rename: a single-object write is atomic, so :meth:`write_bytes` is one
    put, and sets of files keep their manifest last (:mod:`partition.manifest`)."""

    def __init__(self, uri: str, storage_options: Mapping[str, Any] | None = None, *, _fs: Any = None) -> None:
        self.uri = uri.rstrip("/")
        self.options = dict(storage_options or {})
        if _fs is None:
            self.fs, self.path = _filesystem(self.uri, self.options)
        else:
            self.fs, self.path = _fs, _fs._strip_protocol(self.uri)

    def __repr__(self) -> str:
        return f"FsspecStore({self.uri!r})"  # never the options

    def _p(self, rel: str) -> str:
        return f"{self.path}/{rel}" if rel else self.path

    @contextmanager
    def _errors(self, what: str, rel: str) -> Iterator[None]:
        try:
            yield
        except (FileMismatch, StorageError):
            raise
        except FileNotFoundError:
            raise StorageError(f"{self.uri}/{rel}: not found ({what}); check the URI, the bucket "
                               "and the prefix") from None
        except PermissionError as e:
            raise StorageError(f"{self.uri}/{rel}: access denied ({what}: {e}); check the "
                               "credentials (environment, profile, or storage_options)") from None
        except Exception as e:  # the back-ends raise their own types (botocore, aiohttp, ...)
            raise StorageError(f"{self.uri}/{rel}: {what} failed ({type(e).__name__}: {e}); check "
                               "the URI, the endpoint (storage_options.endpoint_url) and the "
                               "credentials") from None

    def child(self, name: str) -> FsspecStore:
        return FsspecStore(f"{self.uri}/{name}", self.options, _fs=self.fs)

    def exists(self, rel: str) -> bool:
        return self.size(rel) is not None

    def names(self) -> list[str]:
        with self._errors("list", ""):
            try:
                entries = self.fs.ls(self.path, detail=False, refresh=True)
            except FileNotFoundError:
                return []
        return [str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries]

    def size(self, rel: str) -> int | None:
        with self._errors("stat", rel):
            try:
                self.fs.invalidate_cache(self._p(rel))
                info = self.fs.info(self._p(rel))
            except FileNotFoundError:
                return None
        return int(info["size"]) if info.get("type") == "file" else None

    def read_bytes(self, rel: str) -> bytes:
        with self._errors("read", rel):
            return bytes(self.fs.cat_file(self._p(rel)))

    def write_bytes(self, rel: str, data: bytes) -> None:
        with self._errors("write", rel):
            self.fs.pipe_file(self._p(rel), data)

    @contextmanager
    def open_write(self, rel: str) -> Iterator[BinaryIO]:
        with self._errors("write", rel), self.fs.open(self._p(rel), "wb") as f:
            yield f

    def remove(self, rel: str) -> None:
        if self.exists(rel):
            with self._errors("delete", rel):
                self.fs.rm_file(self._p(rel))

    def remove_all(self) -> None:
        if self.names():
            with self._errors("delete", ""):
                self.fs.rm(self.path, recursive=True)

    @contextmanager
    def open_read(self, rel: str) -> Iterator[BinaryIO]:
        with self._errors("read", rel), self.fs.open(self._p(rel), "rb", block_size=CHUNK) as f:
            yield f


def _filesystem(uri: str, options: Mapping[str, Any]) -> tuple[Any, str]:
    """The fsspec file system of ``uri`` (its back-end imported now) and the path in it."""
    try:
        import fsspec
    except ImportError:
        raise StorageError(f"{uri}: reading object storage needs fsspec; pip install "
                           "'gnntrain[s3]' (or [gcs])") from None
    protocol = _SCHEME.match(uri).group(1).lower()  # type: ignore[union-attr]
    extra = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}.get(protocol)
    try:
        fs, path = fsspec.core.url_to_fs(uri, **options)
    except ImportError:
        hint = f"pip install 'gnntrain[{extra}]'" if extra else f"install the fsspec back-end of {protocol}://"
        raise StorageError(f"{uri}: the {protocol}:// back-end is not installed; {hint}") from None
    except (TypeError, ValueError) as e:
        raise StorageError(f"{uri}: cannot open the store ({type(e).__name__}: {e}); check "
                           "partition.storage_options") from None
    return fs, str(path).rstrip("/")


def open_store(location: str | Path, storage_options: Mapping[str, Any] | None = None) -> Store:
    """The store at ``location``: local for a path or ``file://`` URI, fsspec otherwise."""
    if is_remote(location):
        return FsspecStore(str(location), storage_options)
    return LocalStore(location)


def open_parent(uri: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Store, str]:
    """The store holding the single object at ``uri``, and the object's name in it."""
    parent, _, name = uri.rstrip("/").rpartition("/")
    return open_store(parent, storage_options), name

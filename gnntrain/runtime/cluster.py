"""Starting Ray embedded (locked with a token of its own, :func:`embedded_auth`), or joining a
cluster, with a bounded wait either way; how the worker actors find the user's code
(:func:`worker_runtime_env`); and how their allocator is set up and trimmed
(:data:`WORKER_MALLOC_ENV`, :func:`trim_heap`)."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import secrets
import site
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

from gnntrain.allocator import TORCH_ALLOC_ENV
from gnntrain.config import ClusterConfig
from gnntrain.runtime import interrupts
from gnntrain.runtime.worker_pool import POOL


class ClusterError(RuntimeError):
    """Ray could not be started or reached."""


def _check_reachable(address: str, timeout_s: float) -> None:
    """Fail within ``timeout_s`` when a ``host:port`` address does not answer."""
    if address in ("auto", "local"):
        return
    url = urlparse(address if "://" in address else f"ray://{address}")
    host, port = url.hostname, url.port
    if not host or not port:
        raise ClusterError(f"cluster.address={address!r}: expected 'auto', 'HOST:PORT' or 'ray://HOST:PORT'")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        raise ClusterError(
            f"cluster.address={address!r}: nothing answers at {host}:{port} ({e}); start the head "
            "with `ray start --head` or drop --address to run Ray embedded") from None


def check_address(cfg: ClusterConfig) -> None:
    """Raise :class:`ClusterError` now if the configured cluster cannot be reached."""
    address = cfg.address or os.environ.get("RAY_ADDRESS")
    if address:
        _check_reachable(address, cfg.connect_timeout_s)


AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@functools.cache
def _embedded_token() -> str:
    """One random token per process: Ray's token loader caches the first token it reads, so
    every embedded instance a process starts must use the same one."""
    return secrets.token_hex(32)


@contextmanager
def embedded_auth() -> Iterator[None]:
    """Token authentication for a Ray instance started here, unless ``RAY_AUTH_MODE`` is set.

    Ray's ports listen on every interface and anyone who reaches them can run code on the
    instance. Ray itself turns token authentication on for a new local instance, but writes
    the token to ``~/.ray/auth_token``; here the token is this process's own
    (:func:`_embedded_token`), handed to Ray's daemons and workers through the environment
    and never written to disk. The previous environment is restored afterwards. A
    ``RAY_AUTH_MODE`` already set (``token`` with your own token, or ``disabled``) is left
    as it is.
    """
    if "RAY_AUTH_MODE" in os.environ:
        yield
        return
    saved = {k: os.environ.get(k) for k in AUTH_ENV}
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=_embedded_token())
    _reload_ray_auth()
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        _reload_ray_auth()


def _reload_ray_auth() -> None:
    """Make this process's Ray read the authentication settings from the environment again:
    it caches its config and the token the first time it reads them (Ray's own test helpers
    reset both this way, the config first). A Ray without token authentication has neither."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]
    except ImportError:
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@contextmanager
def ray_session(cfg: ClusterConfig, workers: int) -> Iterator[bool]:
    """Yield with Ray initialised; shut it down afterwards if this process started it.

    Yields True when Ray was started here (embedded), False when joining a cluster.
    """
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    address = cfg.address or os.environ.get("RAY_ADDRESS")
    if ray.is_initialized():
        with interrupts.recorded():
            yield False
        return
    if address:
        _check_reachable(address, cfg.connect_timeout_s)
        try:
            ray.init(address=address, log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ClusterError(f"cluster.address={address!r}: could not join the Ray cluster: {e}") from None
        with interrupts.recorded():
            yield False
        return
    num_cpus = max(1, round(cfg.num_cpus)) if cfg.num_cpus else (os.cpu_count() or 1)
    with embedded_auth():
        # address="local": always a new instance, never another session's Ray on this machine
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, object_store_memory=int(5e8),
                 _temp_dir=os.path.join(tempfile.gettempdir(), "ray"), log_to_driver=True,
                 configure_logging=True, logging_level=logging.WARNING)
        try:
            with interrupts.recorded():
                yield True
        finally:
            POOL.release()  # kept workers (reuse_workers) end with the Ray that runs them
            ray.shutdown()


def driver_code_paths() -> list[str]:
    """Directories on this process's ``sys.path`` that a fresh interpreter would not have:
    not the interpreter's own (stdlib, site-packages), not already in ``$PYTHONPATH`` and
    not the working directory (Ray gives its workers both). A user module found through
    ``sys.path.insert`` (a notebook, a test's temporary directory) lives in one of them."""
    own = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    own |= {os.path.realpath(p) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    given = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    given.add(os.path.realpath(os.getcwd()))
    out: list[str] = []
    for entry in sys.path:
        real = os.path.realpath(entry or os.getcwd())
        if (not os.path.isdir(real) or real in given or real in out
                or any(real == o or real.startswith(o + os.sep) for o in own)):
            continue
        out.append(real)
    return out


WORKER_MALLOC_ENV: dict[str, str] = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": str(16 << 20),
                                     "MALLOC_TRIM_THRESHOLD_": str(128 << 20), **TORCH_ALLOC_ENV}
"""glibc's and torch's allocator settings for the worker processes, unless the driver's
environment sets them (torch's: huge pages for large tensors, :mod:`gnntrain.allocator`).

- Two arenas: a worker allocates its batches, peer replies and layer outputs on several
  threads (training, serving, Ray's own); with glibc's default of 8 arenas per core each
  thread's arena keeps the holes its freed arrays leave, and a worker's private memory grew
  epoch after epoch on synthetic-small (25-70 MiB per epoch with 2-4 workers). With two
  arenas it levels off after the first epochs, at the same epoch time (``python -m bench.soak``).
- Blocks of 16 MiB and more mapped on their own: glibc's default threshold starts at
  128 KiB and rises to the size of each mapped block freed, up to 32 MiB, after which a
  step's 16-32 MiB layer outputs (bfloat16 ones above all) come from the heap, whose holes
  between batches of varying size stay resident. Fixed at 16 MiB, a bf16 run of the
  ``bench.distdgl`` workload in one process peaked at ~1.13 GiB instead of 1.48-1.66, fp32
  at ~1.02 instead of 1.15-1.31, at the same step time. A fixed threshold also fixes the
  heap's trim threshold (128 KiB by default), so that one is raised to 128 MiB: the heap's
  top is not given back and faulted in again on every step (:func:`trim_heap` returns it
  after each call)."""


@functools.cache
def _malloc_trim() -> Any:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c")), "malloc_trim", None)
    except OSError:
        return None


def trim_heap() -> bool:
    """Give the pages of the allocator's free chunks back to the OS (glibc
    ``malloc_trim(0)``: the top of every arena, and whole free pages inside them); False
    where the C library has no such call. A worker actor calls it after each coordinator
    call (an epoch, an evaluation phase). With two arenas a worker's RSS still rose for
    its first epochs and then crept (2 workers on synthetic-small: 1,023 -> 1,229 MiB from
    epoch 2 to 12): freed batch and reply arrays stay mapped between uses. Trimmed, epoch 2
    to 10 went 1,215 -> 1,042 MiB (``python -m bench.soak``)."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True


def worker_runtime_env() -> dict[str, Any]:
    """The ``runtime_env`` of the worker actors: :data:`WORKER_MALLOC_ENV`, and the
    driver's extra code directories (:func:`driver_code_paths`) put in front of the
    workers' ``PYTHONPATH``, so a model or task that the driver imports from there
    (``model.arch: mymod:factory``, or a Python object pickled by reference) imports on
    the workers too. Ray itself passes only the working directory and the script's
    directory, and merges these ``env_vars`` with the job's.

    No ``PYTHONPATH`` when the job ships its code itself (a ``working_dir`` or
    ``py_modules``, as ``ray job submit --working-dir .`` gives: Ray puts it on every
    worker's path) or when there is nothing to add.
    """
    import ray

    env = {k: os.environ.get(k, v) for k, v in WORKER_MALLOC_ENV.items()}
    job_env = ray.get_runtime_context().runtime_env
    paths = [] if job_env.get("working_dir") or job_env.get("py_modules") else driver_code_paths()
    if paths:
        # ${PYTHONPATH}: Ray expands it to the path the worker would have had
        env["PYTHONPATH"] = os.pathsep.join([*paths, "${PYTHONPATH}"])
    return {"env_vars": env}

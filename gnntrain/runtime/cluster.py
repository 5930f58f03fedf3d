"""Starting Ray embedded, or joining a cluster, with a bounded wait either way."""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

from gnntrain.config import ClusterConfig


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


@contextmanager
def ray_session(cfg: ClusterConfig, workers: int) -> Iterator[bool]:
    """Yield with Ray initialised; shut it down afterwards if this process started it.

    Yields True when Ray was started here (embedded), False when joining a cluster.
    """
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    address = cfg.address or os.environ.get("RAY_ADDRESS")
    if ray.is_initialized():
        yield False
        return
    if address:
        _check_reachable(address, cfg.connect_timeout_s)
        try:
            ray.init(address=address, log_to_driver=True)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ClusterError(f"cluster.address={address!r}: could not join the Ray cluster: {e}") from None
        started = False
    else:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        num_cpus = max(1, round(cfg.num_cpus)) if cfg.num_cpus else (os.cpu_count() or 1)
        # address="local": always a new instance, never another session's Ray on this machine
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, object_store_memory=int(5e8),
                 _temp_dir=os.path.join(tempfile.gettempdir(), "ray"), log_to_driver=True,
                 configure_logging=True, logging_level=logging.WARNING)
        started = True
    try:
        yield started
    finally:
        if started:
            ray.shutdown()

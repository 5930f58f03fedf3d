"""One local Ray instance for the whole test session, small and explicit (RAY-NOTES)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """Ray with 2 CPUs, no dashboard, its files under a temp dir; always shut down."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tmp = tempfile.mkdtemp(prefix="rt-", dir="/tmp")  # short: Ray's socket paths are limited
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=int(3e8), _temp_dir=tmp,
             logging_level="warning", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()

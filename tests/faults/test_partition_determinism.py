"""A recovered run equals an undisturbed one only if both train on the same parts.

METIS draws from the C library's ``rand()``, which every thread of a process shares; a run
started next to Ray's threads (a test session's local Ray, a driver after ``ray.init``)
partitioned the same graph differently now and then, so its parameters differed from the
undisturbed run's although recovery itself was exact. The partition is now computed in a
process of its own: another thread drawing from ``rand()`` throughout must not change it.
"""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import numpy as np

from partition import build_partition_set
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg

GRAPH = make_graph(2000, seed=7)


def parts(root: Path) -> np.ndarray:
    return np.asarray(build_partition_set(GRAPH, tiny_cfg(root, workers=2).partition).assignment())


def test_metis_parts_do_not_depend_on_other_threads_drawing_from_rand(tmp_path: Path) -> None:
    quiet = parts(tmp_path / "quiet")
    libc = ctypes.CDLL(None)
    stop = threading.Event()

    def draw() -> None:  # what a library thread calling rand() does, as often as it can
        while not stop.is_set():
            libc.rand()

    t = threading.Thread(target=draw, daemon=True)
    t.start()
    try:
        noisy = [parts(tmp_path / f"noisy{i}") for i in range(4)]
    finally:
        stop.set()
        t.join(timeout=5)
    for i, p in enumerate(noisy):
        assert np.array_equal(p, quiet), f"try {i}: {int((p != quiet).sum())} nodes in another part"

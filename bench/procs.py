"""The processes a benchmark started: their memory, waiting for them to go, killing them;
:func:`polled`, a sampler run on a thread while a block runs, and :func:`tree_peaks`, the
peaks of a process tree's memory sampled that way; :func:`peer_environ`, the environment
a peer system's process (DGL's) starts with.

psutil only (no torch, no Ray), so a runner imports it at no cost; the lists of processes
come from the caller (``gnntrain.runtime.ray_group.worker_processes`` for Ray workers, or
a process tree)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

import psutil

from gnntrain.allocator import TORCH_ALLOC_ENV


def rss(procs: Iterable[psutil.Process]) -> dict[int, int]:
    """pid -> RSS (bytes) of every live process of ``procs``, zombies and processes gone
    left out."""
    out = {}
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out[p.pid] = p.memory_info().rss
        except psutil.Error:
            continue
    return out


def status_kib(pid: int, key: str) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (Linux): ``VmHWM`` (peak resident),
    ``RssAnon`` (resident anonymous memory: what the process allocated, without the file
    pages it has mapped, which the kernel can drop and reread), ...; 0 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    return 0


def wait_gone(procs: Sequence[psutil.Process], timeout_s: float = 30.0) -> tuple[int, float]:
    """(live processes of ``procs`` left, seconds waited) once none is left or
    ``timeout_s`` passed."""
    t0 = time.monotonic()
    while rss(procs) and time.monotonic() - t0 < timeout_s:
        time.sleep(0.5)
    return len(rss(procs)), time.monotonic() - t0


def kill(procs: Iterable[psutil.Process]) -> None:
    """SIGKILL every live process of ``procs``."""
    for p in procs:
        try:
            if p.is_running():  # never a later process that reuses a dead one's pid
                p.kill()
        except psutil.Error:
            continue


@contextmanager
def polled(sample: Callable[[], None], every_s: float) -> Iterator[None]:
    """Call ``sample`` every ``every_s`` seconds on a daemon thread while the block runs,
    once more as it ends."""
    stop = threading.Event()

    def loop() -> None:
        while True:
            sample()
            if stop.wait(every_s):
                return

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


@contextmanager
def tree_peaks(root: psutil.Process, key: str, every_s: float,
               tag: Callable[[psutil.Process], str | None], *,
               include_root: bool = True) -> Iterator[dict[int, tuple[str, int]]]:
    """Poll ``root``'s descendants (and ``root`` itself unless ``include_root`` is false)
    while the block runs; yields {pid: (tag, peak of the ``/proc/<pid>/status`` field
    ``key`` in KiB)}, filled as it runs. ``tag`` names a process the first time it is seen;
    None leaves it out."""
    seen: dict[int, tuple[str, int]] = {}

    def poll() -> None:
        try:
            procs = [root, *root.children(recursive=True)] if include_root else root.children(recursive=True)
        except psutil.Error:
            return
        for p in procs:
            try:
                name = seen[p.pid][0] if p.pid in seen else tag(p)
                if name is not None:
                    seen[p.pid] = (name, max(seen.get(p.pid, (name, 0))[1], status_kib(p.pid, key)))
            except (OSError, ValueError, psutil.Error):
                continue

    with polled(poll, every_s):
        yield seen


def peer_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a peer's process (DGL's): this one's, with ``DGLBACKEND`` set and
    without the torch allocator setting that importing gnntrain puts in it
    (:data:`gnntrain.allocator.TORCH_ALLOC_ENV`, huge pages for large tensors), so a peer
    runs with torch's defaults, as its users get them; ``extra`` goes on top."""
    env = {k: v for k, v in os.environ.items() if k not in TORCH_ALLOC_ENV}
    return {**env, "DGLBACKEND": "pytorch", **(extra or {})}

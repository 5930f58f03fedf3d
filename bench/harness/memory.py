"""The one memory meter of the benchmarks: the peak of a ``/proc/<pid>/status`` field
(``VmRSS`` resident, ``VmHWM`` the kernel's own peak of it, ``RssAnon`` anonymous resident
memory: what a process allocated, without the file pages it maps, which the kernel can
drop and reread) over a set of processes that may change while it runs (this process, a
child's tree, this process's descendants), per process and summed over each sample.

:class:`PeakMeter` samples when called (:meth:`PeakMeter.sample`) or on a thread while a
block runs (:meth:`PeakMeter.polling`); :func:`own_peak` and :func:`children_peak` read
the peaks the kernel keeps for this process and its waited-for children.

psutil only (no Ray), so a runner imports it at no cost; which processes to sample comes
from the caller (``gnntrain.runtime.ray_group.worker_processes`` for Ray workers, or
:func:`tree`). :class:`DeviceMeter` is the same peak for a CUDA device's memory, from
the driver (torch, imported only when one is made)."""

from __future__ import annotations

import resource
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager

import psutil

MIB = 1 << 20
GIB = 1 << 30


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
    """A ``kB`` field of ``/proc/<pid>/status`` (Linux), such as ``VmHWM`` or ``RssAnon``;
    0 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for ln in f:
            if ln.startswith(key + ":"):
                return int(ln.split()[1])
    return 0


def tree(root: psutil.Process, *, include_root: bool = True) -> list[psutil.Process]:
    """``root``'s descendants, with ``root`` first unless ``include_root`` is false; empty
    when ``root`` is gone."""
    try:
        kids = root.children(recursive=True)
    except psutil.Error:
        return []
    return [root, *kids] if include_root else kids


def own_peak() -> int:
    """This process's peak resident memory over its whole life (bytes), across the resets
    of ``partition.steps.StepRecorder`` that give each step its own peak."""
    from partition.steps import process_peak_rss

    return process_peak_rss()


def children_peak() -> int:
    """The largest peak resident memory of this process's waited-for children (bytes)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


@contextmanager
def polled(sample: Callable[[], object], every_s: float) -> Iterator[None]:
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


def _untagged(p: psutil.Process) -> str:
    return ""


class PeakMeter:
    """Peaks of the status field ``field`` over the processes ``procs()`` returns at each
    sample: ``by_pid`` {pid: (tag, peak bytes)}, filled as it runs, and ``total``, the
    largest sum over one sample. ``tag`` names a process the first time it is seen; None
    leaves it out (it is asked again at the next sample)."""

    def __init__(self, procs: Callable[[], Iterable[psutil.Process]], field: str = "VmRSS", *,
                 tag: Callable[[psutil.Process], str | None] = _untagged) -> None:
        self.procs, self.field, self.tag = procs, field, tag
        self.by_pid: dict[int, tuple[str, int]] = {}
        self.total = 0

    def sample(self) -> list[psutil.Process]:
        """Read the field of every process ``procs()`` gives now; returns those processes."""
        procs = list(self.procs())
        now = 0
        for p in procs:
            try:
                name = self.by_pid[p.pid][0] if p.pid in self.by_pid else self.tag(p)
                if name is None:
                    continue
                value = status_kib(p.pid, self.field) * 1024
            except (OSError, ValueError, psutil.Error):
                continue
            now += value
            self.by_pid[p.pid] = (name, max(self.by_pid.get(p.pid, (name, 0))[1], value))
        self.total = max(self.total, now)
        return procs

    @contextmanager
    def polling(self, every_s: float) -> Iterator[PeakMeter]:
        """Sample every ``every_s`` seconds on a thread while the block runs (and once as it
        ends); yields this meter."""
        with polled(self.sample, every_s):
            yield self

    def peak(self, pid: int) -> int:
        """The peak of process ``pid`` (bytes; 0 when never seen)."""
        return self.by_pid.get(pid, ("", 0))[1]

    def largest(self) -> int:
        """The largest peak of any one process (bytes)."""
        return max((v for _, v in self.by_pid.values()), default=0)


def own_meter(field: str = "RssAnon") -> PeakMeter:
    """A meter of this process alone."""
    me = psutil.Process()
    return PeakMeter(lambda: [me], field)


def descendants_meter(field: str, tag: Callable[[psutil.Process], str | None]) -> PeakMeter:
    """A meter of this process's descendants (not itself), tagged by ``tag``."""
    me = psutil.Process()
    return PeakMeter(lambda: tree(me, include_root=False), field, tag=tag)


DISTDGL_PEER = "_distdgl_peer.py"  # the DistDGL launcher's script: its processes carry the name


def role(p: psutil.Process) -> str | None:
    """The role of a process: ``gnntrain:worker`` for a worker actor (the processes
    ``gnntrain.runtime.ray_group.worker_processes`` lists), ``dgl:<role>:<machine>`` for a
    DistDGL server or trainer, None for anything else."""
    cmd = " ".join(p.cmdline()) + p.name()
    if "GnnWorker" in cmd:
        return "gnntrain:worker"
    if DISTDGL_PEER not in cmd:
        return None
    env = p.environ()
    if env.get("DGL_ROLE") == "server":
        return f"dgl:server:{env.get('DGL_SERVER_ID')}"
    if env.get("DGL_ROLE") == "client":
        return f"dgl:trainer:{env.get('RANK')}"
    return None


def peak_rss(every_s: float = 0.25) -> AbstractContextManager[PeakMeter]:
    """Poll the descendants of this process that have a :func:`role` for their peak
    resident memory (``VmHWM``) while the block runs; yields the meter, whose ``by_pid``
    is {pid: (role, peak bytes)}."""
    return descendants_meter("VmHWM", role).polling(every_s)


class DeviceMeter:
    """The peak memory in use on a CUDA device by every process that shares it (the
    driver's count, ``torch.cuda.mem_get_info``), above what was in use when the meter was
    made: what a single process or a group of workers sharing one GPU holds at its peak.
    This process's cached blocks are released first, so an earlier run's cache is not
    counted as in use before the next."""

    def __init__(self, device: int = 0) -> None:
        import torch

        torch.cuda.empty_cache()
        self.device = device
        free, total = torch.cuda.mem_get_info(device)
        self.base = total - free
        self.peak = 0

    def sample(self) -> None:
        import torch

        free, total = torch.cuda.mem_get_info(self.device)
        self.peak = max(self.peak, total - free - self.base)

    @contextmanager
    def polling(self, every_s: float) -> Iterator[DeviceMeter]:
        """Sample every ``every_s`` seconds on a thread while the block runs; yields this meter."""
        with polled(self.sample, every_s):
            yield self

"""Soak: a long run with a fault injected every few minutes (not in CI).

    python -m bench.soak                          # synthetic-small, 4 workers, 30 min, a fault every 3 min
    python -m bench.soak --minutes 3 --every-min 1
    python -m bench.soak --smoke                  # synthetic-tiny, 2 workers, 11 epochs, two faults

Workload: ``datasets/synthetic-small.yaml`` on ``--workers`` Ray workers (one part each),
a checkpoint every epoch (the last 2 kept), collective timeout 60 s (a stalled worker's
peers give up on their all-reduce after it, also on a loaded 2-core machine), the
default stall limit. First a 2-epoch undisturbed probe of the same config measures the
epoch time (the wall time between the first and second epoch's metrics line, so
evaluation and checkpointing count). The soak run then trains ceil(minutes * 60 / epoch
time) epochs (at least 5) with
``faults.schedule`` set to one fault every k = max(1, round(every_min * 60 / epoch time))
epochs (0-based epochs k, 2k, ..., leaving the last 7 epochs undisturbed so the last worker
group's memory growth is measured), at step 1 of that epoch, kinds
rotating raise, exit, stall and ranks rotating 0..workers-1, and ``train.max_failures`` =
the number of faults. The faults add their detection and recovery time to the run (a
stall: about the collective timeout). ``--smoke`` runs ``datasets/synthetic-tiny.yaml``
on 2 workers for 11 epochs with faults at 0-based epochs 2 and 4 (raise, then exit).

While the run goes, a thread samples the RSS of every live worker process (``ray::GnnWorker``
descendants of this process, zombies left out) 4 times a second and closes an epoch's
record when its line appears in the run's ``metrics.jsonl``, from the last sample taken
before the line (at most two sampling intervals before the epoch's end, when the next
epoch's fault cannot have struck yet): the largest worker RSS (max), the workers' mean
RSS (mean) and the live workers; and the workers' mean RSS averaged over all the samples
taken while the epoch ran (avg), which the memory checks compare. An epoch that is redone
after a fault replaces its earlier record. The run has a hard wall-clock limit (twice the planned epochs' time +
10 min): past it the module reports a hang, kills this run's workers and exits 2.

Checks (``bench.harness.verdict``; exit status 1 when one fails): every epoch finished; every
scheduled fault is in the summary's failures, with a recovery time and a restart from its
epoch's checkpoint; never more live workers at an epoch's end than ``--workers`` (a
recovery that leaks a process shows as extra ones); no worker process left 30 s after the
run; memory flat: within every worker group of 7 or more epochs (the epochs one set of
worker processes trained; every recovery starts all workers afresh, so a ratio across
groups would compare different processes), the averaged worker RSS of its last 3 epochs /
that of its fourth (a fresh group's RSS climbs for its first three) < 1.05 (< 1.10 for
``--smoke``: :data:`RSS_FLAT_SMOKE`); at least one group must be measured. The table lists per
epoch the wall time since the run's start, worker RSS max / mean / avg (MiB), live workers
and the fault injected in it; the failures list
kind, rank, epoch, ``detect s`` (attempt start -> failure detected, ``after_s``) and
``recovery s`` (detected -> new workers ready). The 1-minute load average is recorded
before and after. JSON: bench/out/soak.json (``soak-smoke.json``).
"""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness.cli import bench_parser
from bench.harness.memory import MIB, rss
from bench.harness.paths import bench_config, out_path, run_root
from bench.harness.procs import kill, wait_gone
from bench.harness.runs import quiet
from bench.harness.system import loadavg, machine
from bench.harness.verdict import Check, check, conclude, finish
from gnntrain.api import override_items
from gnntrain.config import RunConfig
from gnntrain.rundir import RunDir
from gnntrain.runtime.ray_group import worker_processes

KINDS = ("raise", "exit", "stall")


def soak_config(yaml_name: str, workers: int, tag: str, *extra: str) -> RunConfig:
    return bench_config(yaml_name, [f"cluster.workers={workers}", f"partition.parts={workers}",
                                    "train.checkpoint_every=1", "train.keep_checkpoints=2",
                                    "cluster.collective_timeout_s=60", *extra], tag)


WARMUP = 3
"""Epochs a fresh worker group's RSS climbs for (allocator arenas, caches filling) before it
levels: its memory growth is measured from its next epoch on."""

TAIL = WARMUP + 4
"""Fault-free epochs a soak ends with: the last worker group is at least this long, so its
memory growth is measured (see :func:`group_growth`)."""


def schedule(epochs: int, every: int, workers: int) -> list[dict[str, Any]]:
    """One fault every ``every`` epochs (epochs every, 2 every, ... leaving the last
    :data:`TAIL` epochs undisturbed), at step 1; kinds rotate raise, exit, stall and ranks
    0..workers-1."""
    return [{"kind": KINDS[i % len(KINDS)], "rank": i % workers, "epoch": e, "step": 1}
            for i, e in enumerate(range(every, epochs - TAIL + 1, every))]


def plan(epoch_s: float, minutes: float, every_min: float, workers: int) -> tuple[int, list[dict[str, Any]]]:
    """(epochs, fault schedule) of a soak of ``minutes`` with a fault every ``every_min``."""
    epochs = max(TAIL, math.ceil(round(minutes * 60 / epoch_s, 6)))
    every = max(1, round(every_min * 60 / epoch_s))
    return epochs, schedule(epochs, every, workers)


class Watch:
    """Samples the live workers' RSS every ``every_s`` and closes one record per
    epoch line of the run's ``metrics.jsonl`` under ``run_root`` (see the module docstring)."""

    def __init__(self, run_root: Path, every_s: float = 0.25) -> None:
        self.run_root, self.every_s = run_root, every_s
        self.t0 = time.monotonic()
        self.epochs: dict[int, dict[str, Any]] = {}  # 1-based epoch -> its record
        self.epoch_times: list[float] = []  # when each epoch line was first seen
        self._sum, self._n = 0.0, 0  # workers' mean RSS summed over this epoch's samples
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _lines(self) -> int:
        files = list(self.run_root.glob("*/metrics.jsonl"))
        if not files:
            return 0
        return sum(1 for ln in files[0].read_text().splitlines() if ln.strip())

    def _loop(self) -> None:
        done = 0  # epoch lines seen
        before: dict[int, int] = {}  # a sample surely taken before the newest line
        while not self._stop.is_set():
            now = rss(worker_processes())
            done = self.tick(now, before, done, self._lines())
            before = now  # taken before this read of the metrics, so before any line it missed
            self._stop.wait(self.every_s)

    def tick(self, now: dict[int, int], before: dict[int, int], done: int, lines: int) -> int:
        """One sample ``now`` (pid -> RSS) with ``lines`` epoch lines in the metrics, of which
        ``done`` were seen before: close the epochs that finished since (from ``before``, and
        the samples averaged since the last close), then count ``now`` towards the next
        epoch's average. Returns the lines seen."""
        if lines > done:  # epochs done+1..lines finished (a truncation after a fault only lowers it)
            for epoch in range(done + 1, lines + 1):
                self._close(epoch, before)
            self._sum, self._n = 0.0, 0
        if now:
            self._sum, self._n = self._sum + sum(now.values()) / len(now), self._n + 1
        return lines

    def _close(self, epoch: int, live: dict[int, int]) -> None:
        rss = list(live.values()) or [0]
        self.epochs[epoch] = {"epoch": epoch, "wall_s": time.monotonic() - self.t0,
                              "rss_max_mib": max(rss) / MIB, "rss_mean_mib": sum(rss) / len(rss) / MIB,
                              "rss_avg_mib": (self._sum / self._n if self._n else sum(rss) / len(rss)) / MIB,
                              "live_workers": len(live)}
        self.epoch_times.append(time.monotonic())


def train_guarded(cfg: RunConfig, run_root: Path, limit_s: float) -> tuple[dict[str, Any] | None, str | None, Watch]:
    """Run ``cfg`` in a thread under a :class:`Watch`; (summary, error, watch). The
    summary is None and the error says "hang" when the run is still going after ``limit_s``."""
    from gnntrain.runtime.coordinator import run_training

    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["summary"] = run_training(cfg, progress=False, console=quiet())
        except Exception as e:  # noqa: BLE001 - a failed soak is a result, reported below
            result["error"] = f"{type(e).__name__}: {str(e)[:500]}"

    with Watch(run_root) as watch:
        t = threading.Thread(target=target, daemon=True)
        t.start()
        t.join(timeout=limit_s)
    if t.is_alive():
        return None, f"hang: the run was still going after {limit_s:.0f} s", watch
    return result.get("summary"), result.get("error"), watch


RSS_KEY = "rss_avg_mib"
"""The per-epoch figure the growth checks compare: the workers' mean RSS averaged over the
epoch's samples. One sample at the epoch's end (``rss_mean_mib``) lands in whatever phase
the workers are in then (an evaluation's arrays, or just after the heap was trimmed) and
moved between ~800 and ~1,150 MiB from one epoch to the next without a trend."""


def group_growth(rows: list[dict[str, Any]], faults: list[dict[str, Any]]) -> list[float]:
    """Per worker group (the epochs one set of worker processes trained: a fault restarts
    them all, and the group after fault i starts with the redone 1-based epoch
    ``epoch_i + 1``) of at least :data:`TAIL` epochs: mean worker RSS (:data:`RSS_KEY`) of
    its last 3 epochs / that of its first epoch after :data:`WARMUP`. Growth within a group
    is what a leak shows as; a ratio across groups would compare different processes."""
    by = {r["epoch"]: r[RSS_KEY] for r in rows}
    starts = [1, *sorted(f["epoch"] + 1 for f in faults)]
    ends = [*(s - 1 for s in starts[1:]), max(by, default=0)]
    out = []
    for lo, hi in zip(starts, ends, strict=True):
        first, last = lo + WARMUP, range(hi - 2, hi + 1)
        if hi - lo + 1 >= TAIL and all(e in by for e in (first, *last)) and by[first]:
            out.append(sum(by[e] for e in last) / 3 / by[first])
    return out


def report(rows: list[dict[str, Any]], faults: list[dict[str, Any]], failures: list[dict[str, Any]]) -> None:
    at = {f["epoch"] + 1: f"{f['kind']} rank {f['rank']} step {f['step']}" for f in faults}
    print(f"{'epoch':>5} {'wall s':>8} {'RSS max MiB':>11} {'RSS mean MiB':>12} {'RSS avg MiB':>11} {'live':>4}  fault")
    for r in rows:
        print(f"{r['epoch']:>5} {r['wall_s']:>8.1f} {r['rss_max_mib']:>11.0f} {r['rss_mean_mib']:>12.0f} "
              f"{r[RSS_KEY]:>11.0f} {r['live_workers']:>4}  {at.get(r['epoch'], '')}")
    print("(epoch is 1-based; a fault's row is the epoch it struck, which was redone)")
    print(f"\n{'kind':<6} {'rank':>4} {'epoch':>5} {'blamed':>6} {'restart':>7} {'detect s':>8} {'recovery s':>10}")
    for f, got in zip(faults, failures + [{}] * len(faults), strict=False):
        print(f"{f['kind']:<6} {f['rank']:>4} {f['epoch']:>5} {got.get('worker', '-'):>6} "
              f"{got.get('restart_from_epoch', '-'):>7} {got.get('after_s', float('nan')):>8.1f} "
              f"{got.get('recovery_s', float('nan')):>10.1f}")


RSS_FLAT = 1.05
"""Bound of a worker group's RSS growth (last 3 epochs / its fourth) in a soak run."""
RSS_FLAT_SMOKE = 1.10
"""The same bound for ``--smoke``: its last group has 7 epochs of a 5,000-node graph, where
the ratio reads 1.01-1.06 run to run on 2 cores with no leak (the same spread before and
after a change); a leak of a part's features or of an epoch's batches shows far above it."""


def checks(cfg: RunConfig, s: dict[str, Any] | None, faults: list[dict[str, Any]], rows: list[dict[str, Any]],
           left: int, groups: list[float], flat: float = RSS_FLAT) -> list[Check]:
    failures = (s or {}).get("failures") or []
    recovered = len(failures) == len(faults) and all(
        got.get("recovery_s") is not None and got.get("restart_from_epoch") == f["epoch"]
        for f, got in zip(faults, failures, strict=False))
    most = max((r["live_workers"] for r in rows), default=0)
    return [
        check(f"all {cfg.train.epochs} epochs finished", s is not None and s["epochs"] == cfg.train.epochs,
              f"{None if s is None else s['epochs']} epochs"),
        check(f"every one of the {len(faults)} scheduled faults recovered from its epoch's checkpoint",
              recovered, f"{len(failures)} failures, restarts from "
              f"{[g.get('restart_from_epoch') for g in failures]}, scheduled epochs {[f['epoch'] for f in faults]}"),
        check(f"never more than {cfg.cluster.workers} live workers at an epoch's end",
              most <= cfg.cluster.workers, f"at most {most}"),
        check("no worker process left 30 s after the run", left == 0, f"{left} left"),
        check(f"worker memory flat in every worker group of {TAIL}+ epochs: averaged RSS of its last 3 epochs "
              f"/ its epoch {WARMUP + 1} < {flat:.2f}", bool(groups) and max(groups) < flat,
              f"per group {[round(g, 3) for g in groups]}" if groups else f"not measured (no group of {TAIL}+ epochs)"),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="synthetic-tiny, 2 workers, 11 epochs, two faults")
    ap.add_argument("--minutes", type=float, default=30.0, help="length of the soak run, without its faults' cost")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--every-min", type=float, default=3.0, help="minutes between faults")
    args = ap.parse_args(argv)
    if args.minutes <= 0 or args.every_min <= 0 or args.workers < 1:
        ap.error(f"--minutes {args.minutes}, --every-min {args.every_min}, --workers {args.workers}: "
                 "all must be positive")
    tag = "soak-smoke" if args.smoke else "soak"
    yaml_name, workers = ("synthetic-tiny.yaml", 2) if args.smoke else ("synthetic-small.yaml", args.workers)
    root = run_root(tag)
    shutil.rmtree(root, ignore_errors=True)
    info = machine()
    load0 = loadavg()
    from gnntrain.runtime.cluster import ray_session

    base = soak_config(yaml_name, workers, f"{tag}/probe", "train.epochs=2")
    with ray_session(base.cluster, workers):
        s, err, probe = train_guarded(base, root / "probe", limit_s=1200)
        if s is None or len(probe.epoch_times) < 2:
            return conclude("soak", [check("the 2-epoch probe finishes", False, str(err))])
        # between the two lines; never less than the training the metrics count (lines seen together)
        epoch_s = max(probe.epoch_times[1] - probe.epoch_times[0],
                      RunDir(Path(s["run_dir"])).metrics()[1]["epoch_s"])
        minutes, every_min = (11 * epoch_s / 60, 2 * epoch_s / 60) if args.smoke else (args.minutes, args.every_min)
        epochs, faults = plan(epoch_s, minutes, every_min, workers)
        cfg = soak_config(yaml_name, workers, f"{tag}/soak").with_overrides(override_items(
            {"faults.schedule": faults, "train.epochs": epochs, "train.max_failures": len(faults)}))
        print(f"soak: {yaml_name}, {workers} Ray workers, probe epoch {epoch_s:.1f} s -> {epochs} epochs, "
              f"{len(faults)} faults at epochs {[f['epoch'] for f in faults]}; load average {load0}", flush=True)
        limit = 2 * epochs * epoch_s + 600
        t0 = time.perf_counter()
        s, err, watch = train_guarded(cfg, root / "soak", limit_s=limit)
        wall = time.perf_counter() - t0
        if err is not None and err.startswith("hang"):
            print(f"HANG: {err}; killing this run's workers")
            kill(worker_processes())
            conclude("soak", [check("the run ends within its wall-clock limit", False, err)])
            os._exit(2)  # the run's thread holds Ray: leave without waiting for it
        left, waited = wait_gone(worker_processes())
    rows = [watch.epochs[e] for e in sorted(watch.epochs)]
    groups = group_growth(rows, faults)
    failures = (s or {}).get("failures") or []
    report(rows, faults, failures)
    load1 = loadavg()
    print(f"\nrun {wall:.0f} s; error: {err or 'none'}; worker processes left {left} after {waited:.1f} s; "
          f"RSS growth within worker groups of {TAIL}+ epochs (last 3 / epoch {WARMUP + 1}) "
          f"{' '.join(f'{g:.3f}' for g in groups) or '- (none)'}; "
          f"load average {load0} -> {load1}")
    out: dict[str, Any] = {
        "machine": info, "config": yaml_name, "workers": workers, "probe_epoch_s": epoch_s,
        "epochs": epochs, "schedule": faults, "wall_s": wall, "error": err, "rows": rows,
        "failures": [{k: v for k, v in f.items() if k != "detail"} for f in failures],
        "workers_left": left, "rss_growth_per_group": groups,
        "loadavg_before": load0, "loadavg_after": load1}
    status = finish("soak", checks(cfg, s, faults, rows, left, groups, RSS_FLAT_SMOKE if args.smoke else RSS_FLAT),
                    out, out_path(tag))
    shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())

"""Run every benchmark's ``--smoke`` version in sequence; exit non-zero if any fails.

    python -m bench.smoke                  # what CI runs (`make bench-smoke`)
    python -m bench.smoke --only epoch,comm

Each module (sampling, cache, partition, partition_scale, synthetic, epoch, precision, distdgl,
workers, comm, faults, soak, embedding, typed, link, link_recipe, configs; a module that
does not exist is listed as skipped) runs as ``python -m bench.<name> --smoke`` in its
own process group (its own Ray instance, its own memory), with a time limit past which
the group and every process of its tree are killed (``run_limited``, which bench.configs
also runs the CLI with). Their output goes straight through; a summary table follows. A module fails when it exits non-zero
(a correctness check of its own failed, ``bench.verdict``, or it crashed) or runs past the
limit; the summary names each failed module and its exit status, and the runner exits 1.
JSON goes to bench/out/smoke.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench import procs

BENCH = Path(__file__).resolve().parent
MODULES = ("sampling", "cache", "partition", "partition_scale", "synthetic", "epoch", "precision",
           "distdgl", "workers", "comm", "faults", "soak", "embedding", "typed", "link",
           "link_recipe", "configs")


def command(name: str) -> list[str]:
    """The command line that runs one module's smoke version."""
    return [sys.executable, "-m", f"bench.{name}", "--smoke"]


@dataclass(frozen=True)
class Finished:
    """How one command run by :func:`run_limited` ended."""

    rc: int | None  # exit status; None when it was killed at its time limit
    seconds: float
    peak_rss: int  # bytes: the largest summed RSS of its process tree seen (0 when not sampled)
    left: int  # Ray worker processes of its tree still alive after the run (and the clean-up)
    workers: int = 0  # Ray worker processes seen in its tree


def run_limited(cmd: list[str], limit_s: float, *, sample_s: float | None = None) -> Finished:
    """Run ``cmd`` in the repository root, in its own process group, with its output
    going straight through. Past ``limit_s`` the whole group is killed, and with it every
    process ever seen in its tree (an embedded Ray's raylet and workers may leave the
    group). With ``sample_s``, the tree (the process and its descendants) is sampled that
    often for its summed RSS and its Ray workers. Afterwards the Ray workers seen are given
    30 s to go, then killed; ``left`` counts those that were still there. (Ray starts
    each worker in a process group of its own, so killing the group alone would leave them.)"""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=BENCH.parent, start_new_session=True)
    root = psutil.Process(proc.pid)
    seen: dict[int, psutil.Process] = {proc.pid: root}
    workers: dict[int, psutil.Process] = {}
    peak = 0

    def sample() -> None:
        from gnntrain.runtime.ray_group import worker_processes  # imports Ray: only when sampling

        nonlocal peak
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        for p in tree:  # the first object of a pid: is_running() then tells a reused pid apart
            seen.setdefault(p.pid, p)
        peak = max(peak, sum(procs.rss(tree).values()))
        workers.update((p.pid, p) for p in worker_processes(root))

    rc: int | None = None
    while True:
        try:
            rc = proc.wait(timeout=sample_s or 1.0)
            break
        except subprocess.TimeoutExpired:
            if time.perf_counter() - t0 > limit_s:
                sample()  # the tree as it is when killed
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                procs.kill(seen.values())
                proc.wait()
                break
            if sample_s:
                sample()
    seconds = time.perf_counter() - t0
    left = 0
    if workers:
        left, _ = procs.wait_gone(list(workers.values()))
        if left:
            procs.kill(workers.values())
    return Finished(rc=rc, seconds=seconds, peak_rss=peak, left=left, workers=len(workers))


def run_module(name: str, timeout_s: float) -> dict[str, Any]:
    if not (BENCH / f"{name}.py").is_file():
        return {"module": name, "status": "skipped (no module)", "rc": None, "seconds": 0.0}
    print(f"\n===== python -m bench.{name} --smoke =====", flush=True)
    done = run_limited(command(name), timeout_s)
    status = (f"FAILED (over {timeout_s:.0f} s)" if done.rc is None else
              "ok" if done.rc == 0 else f"FAILED (exit {done.rc})")
    return {"module": name, "status": status, "rc": done.rc, "seconds": done.seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(MODULES), help="comma-separated subset of the modules")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per module (a hang, not a slow run, is what it catches)")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        ap.error(f"--only: unknown module(s) {unknown}; known: {', '.join(MODULES)}")
    t0 = time.perf_counter()
    rows = [run_module(n, args.timeout) for n in names]
    total = time.perf_counter() - t0
    print(f"\n{'module':<10} {'status':<24} {'seconds':>8}")
    for r in rows:
        print(f"{r['module']:<10} {r['status']:<24} {r['seconds']:>8.1f}")
    failed = [r["module"] for r in rows if r["status"].startswith("FAILED")]
    print(f"total {total:.1f} s; {'all smoke benchmarks passed' if not failed else 'FAILED: ' + ', '.join(failed)}",
          flush=True)
    out = BENCH / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "smoke.json").write_text(json.dumps({"rows": rows, "total_s": total}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

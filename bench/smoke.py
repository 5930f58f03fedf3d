"""Run every benchmark's ``--smoke`` version in sequence; exit non-zero if any fails.

    python -m bench.smoke                  # what CI runs (`make bench-smoke`)
    python -m bench.smoke --only epoch,comm

Each module (sampling, cache, partition, partition_scale, synthetic, epoch, precision, distdgl,
workers, comm, faults, soak, embedding, typed, link, link_recipe, configs, storage, gpu (on the
CPU), and regress, the no-regression check against bench/baseline.json; a module that does
not exist is listed as skipped) runs as ``python -m bench.<name> --smoke`` in its
own process group (its own Ray instance, its own memory), with a time limit past which
the group and every process of its tree are killed (``bench.harness.run_limited``, which
bench.configs also runs the CLI with). Their output goes straight through; a summary table follows. A module fails when it exits non-zero
(a correctness check of its own failed, ``bench.harness.verdict``, or it crashed) or runs past the
limit; the summary names each failed module and its exit status, and the runner exits 1.
JSON goes to bench/out/smoke.json.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from bench.harness.cli import bench_parser, csv_list
from bench.harness.paths import BENCH
from bench.harness.runs import run_limited

MODULES = ("sampling", "cache", "partition", "partition_scale", "synthetic", "epoch", "precision",
           "distdgl", "workers", "comm", "faults", "soak", "embedding", "typed", "link",
           "link_recipe", "configs", "storage", "gpu", "regress")


def command(name: str) -> list[str]:
    """The command line that runs one module's smoke version."""
    return [sys.executable, "-m", f"bench.{name}", "--smoke"]


def run_module(name: str, timeout_s: float) -> dict[str, Any]:
    if not (BENCH / f"{name}.py").is_file():
        return {"module": name, "status": "skipped (no module)", "rc": None, "seconds": 0.0}
    print(f"\n===== python -m bench.{name} --smoke =====", flush=True)
    done = run_limited(command(name), timeout_s)
    status = (f"FAILED (over {timeout_s:.0f} s)" if done.rc is None else
              "ok" if done.rc == 0 else f"FAILED (exit {done.rc})")
    return {"module": name, "status": status, "rc": done.rc, "seconds": done.seconds}


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument("--only", default=",".join(MODULES), help="comma-separated subset of the modules")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per module (a hang, not a slow run, is what it catches)")
    args = ap.parse_args(argv)
    names = csv_list(args.only)
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

"""``method: kahypar`` (Mt-KaHyPar + the multi-constraint repair) against METIS, same run.

    python -m bench.kahypar                  # synthetic 1M nodes / 20M edges / 100 features, k=8
    python -m bench.kahypar --nodes 30000    # a quick version

Each build runs in its own process: the synthetic graph generated in memory, then
``build_partition_set`` with ``metis`` or ``kahypar`` (symmetrise, partition, refine, renumber,
write). Peak memory is that of the largest process, sampled from outside (:func:`_spawn`):
the build process (generation included: the graph is part of what it holds; Mt-KaHyPar runs
in it) or the process METIS runs in (``partition.balance.metis_in_child``); ``sum MiB``
is the largest sampled sum of both. A last process generates the graph again and
checks every set (:func:`bench.partition_scale._check_set`: edge cut, imbalance, round trip).
Gated (exit status 1): every set round-trips, every node is owned once, every balance
constraint within ``partition.imbalance``. Reported: edge cut, time and memory as ratios
against METIS. JSON goes to bench/out/kahypar.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.harness.cli import bench_parser
from bench.harness.memory import MIB, PeakMeter, children_peak, tree
from bench.harness.paths import out_path, write_json
from bench.partition_scale import check_set, graph_cfg, peak_mib

METHODS = ("metis", "kahypar")


def _cpu_s() -> float:
    """CPU seconds of this process, all its threads, and its finished children (METIS runs in one)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _child_build(a: dict[str, Any]) -> dict[str, Any]:
    from gnntrain.data.synthetic import generate
    from partition import PartitionConfig, build_partition_set
    from partition.kahypar import threads_available

    t0 = time.perf_counter()
    g = generate(graph_cfg(a), name=a["name"])
    t1, c1 = time.perf_counter(), _cpu_s()
    pset = build_partition_set(g, PartitionConfig(method=a["method"], parts=a["parts"]), a["root"])
    seconds, cpu = time.perf_counter() - t1, _cpu_s() - c1
    return {"seconds": seconds, "cpu_s": cpu, "generate_s": t1 - t0, "maxrss_mib": peak_mib(),
            "children_maxrss_mib": children_peak() / MIB,
            "threads": threads_available(), "path": str(pset.path),
            "steps": {s.name: round(s.seconds, 1) for s in pset.meta.steps}}


def _child_check(a: dict[str, Any]) -> dict[str, Any]:
    from gnntrain.data.synthetic import generate

    g = generate(graph_cfg(a), name=a["name"])
    return {name: check_set(g, path) for name, path in a["sets"].items()}


CHILDREN = {"build": _child_build, "check": _child_check}


def _spawn(kind: str, a: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run a child step; sample the resident memory of its process tree every 50 ms from here
    (the child's own ``ru_maxrss`` and a sampling thread inside it both read low while
    Mt-KaHyPar runs: ``ps`` showed 2.4 GiB where ``ru_maxrss`` said 1.1 GiB; the partition
    step recorder's peak reset clears ``ru_maxrss``, so ``maxrss_mib`` now reads the peak
    across resets, ``partition.steps.process_peak_rss``)."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.kahypar", "--child", kind, json.dumps(a)],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    t0 = time.perf_counter()
    with proc:
        top = psutil.Process(proc.pid)
        meter = PeakMeter(lambda: tree(top))
        while proc.poll() is None:
            if time.perf_counter() - t0 > timeout:
                proc.kill()
                raise RuntimeError(f"step {kind} {a.get('method', '')} ran past {timeout} s")
            meter.sample()
            time.sleep(0.05)
        out = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        raise RuntimeError(f"step {kind} {a.get('method', '')} failed with exit status {proc.returncode}")
    row = dict(json.loads(out.strip().splitlines()[-1]))
    if kind != "build":
        return row
    peak = max(meter.largest() / MIB, row.get("maxrss_mib", 0.0), row.get("children_maxrss_mib", 0.0))
    return row | {"peak_mib": peak, "sum_peak_mib": meter.total / MIB}


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per step")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(CHILDREN[args.child[0]](json.loads(args.child[1]))), flush=True)
        return 0
    work = Path(tempfile.mkdtemp(prefix="bench-kahypar-"))
    base = {"nodes": args.nodes, "avg_degree": args.avg_degree, "features": args.features, "classes": 40,
            "parts": args.parts, "name": "kahypar", "root": str(work / "sets")}
    t0 = time.perf_counter()
    try:
        rows = {}
        for m in METHODS:
            rows[m] = _spawn("build", base | {"method": m}, args.timeout)
            print(f"{m}: {rows[m]}", flush=True)
        checks = _spawn("check", base | {"sets": {m: r["path"] for m, r in rows.items()}}, args.timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return _summarise(base, rows, checks, time.perf_counter() - t0)


def _summarise(base: dict[str, Any], rows: dict[str, dict[str, Any]], checks: dict[str, dict[str, Any]],
               total: float) -> int:
    ref, rc = rows["metis"], checks["metis"]
    print(f"\ngraph: {base['nodes']:,} nodes, avg degree {base['avg_degree']}, {base['features']} features, "
          f"k={base['parts']}; {rows['kahypar']['threads']} threads")
    print(f"{'method':<8} {'seconds':>8} {'x metis':>7} {'CPU s':>7} {'x metis':>7} {'peak MiB':>9} {'x metis':>7} {'sum MiB':>8} {'edge cut':>8} "
          f"{'x metis':>7} {'node imb':>8} {'train imb':>9} {'edge imb':>8}  steps (s)")
    for m in METHODS:
        r, c = rows[m], checks[m]
        cpu = r.get("cpu_s", float("nan")) / ref.get("cpu_s", float("nan"))
        print(f"{m:<8} {r['seconds']:>8.1f} {r['seconds'] / ref['seconds']:>7.2f} {r.get('cpu_s', float('nan')):>7.1f} "
              f"{cpu:>7.2f} {r['peak_mib']:>9.0f} "
              f"{r['peak_mib'] / ref['peak_mib']:>7.2f} {r.get('sum_peak_mib', float('nan')):>8.0f} {c['edge_cut']:>8.3f} {c['edge_cut'] / rc['edge_cut']:>7.2f} "
              f"{c['imbalance']['nodes']:>8.3f} {c['imbalance']['train']:>9.3f} {c['imbalance']['edges']:>8.3f}  "
              f"{r['steps']}")
    failures = [f"{n}: {what}" for n, c in checks.items() for what, bad in
                (("round trip", not c["round_trip"]), ("a node not owned exactly once", not c["assigned_once"]),
                 ("balance", max(c["imbalance"].values()) > 1.05 + 1e-9)) if bad]
    print(f"correctness (gated): {'all sets round-trip, every node once, balance <= 1.05' if not failures else 'FAILED: ' + '; '.join(failures)}")
    print(f"total {total:.0f} s")
    write_json({"graph": base, "rows": rows, "checks": checks, "total_s": total}, out_path("kahypar"))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

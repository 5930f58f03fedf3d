"""Scaling with the worker count: 1, 2 and 4 Ray workers measured, 8-64 simulated.

    python -m bench.workers                          # synthetic-small, the issue-17 workload
    python -m bench.workers --yaml synthetic-1m.yaml --epochs 2
    python -m bench.workers --smoke                  # 3k nodes, 1 and 2 workers, k = 4 simulated

Measured rows (``bench.distdgl``'s workload: 10% training nodes, 3-layer GraphSAGE hidden
256, fanouts [15, 10, 5], batch 1024 per worker, Adam 0.01, METIS into k parts, fp32): for
k = 1, 2, 4 workers on one Ray instance, the mean epoch time over the epochs after the
first, the bytes that crossed a partition boundary per epoch (the runtime's counters, by
category), the peak RSS (``VmHWM``) of every worker process, and the 1-minute load average
before and after. The machine's cores are shared by every worker: past the core count the
workers oversubscribe them, so epoch times at k = 4 on 2 cores measure contention, not
scaling. Simulated rows: :func:`gnntrain.simulate.simulate_k` for ``--simulate`` worker
counts (default 8, 16, 32, 64) on the same graph and settings: every worker's real sampler,
cache and feature reader over one epoch, bytes counted by the runtime's counters, nothing
trained. JSON: bench/out/workers.json (``workers-smoke.json``).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from bench.distdgl import SMOKE, WORKLOAD
from bench.harness.cli import bench_parser
from bench.harness.memory import GIB, peak_rss
from bench.harness.paths import bench_config, out_path, write_json
from bench.harness.runs import quiet, read_metrics, timed
from bench.harness.system import loadavg
from gnntrain.config import RunConfig
from gnntrain.data import load_dataset
from gnntrain.simulate import simulate_k
from partition.graph import Graph


def measured(cfg: RunConfig, graph: Graph, k: int) -> dict[str, Any]:
    from gnntrain.runtime.coordinator import run_training

    c = cfg.with_overrides([f"cluster.workers={k}", f"partition.parts={k}"])
    load0 = loadavg()
    with peak_rss() as seen:
        s = run_training(c, single_process=False, graph=graph, progress=False, console=quiet())
    eps = read_metrics(s)
    tm = timed(eps)
    cats = tm[0]["comm"]["by_category"].keys()
    return {"k": k, "epoch_s": float(np.mean([e["epoch_s"] for e in tm])),
            "epoch_s_all": [e["epoch_s"] for e in eps], "steps": eps[-1]["steps"],
            "bytes_per_epoch": float(np.mean([e["comm"]["total_bytes"] for e in tm])),
            "bytes_by_category": {c_: float(np.mean([e["comm"]["by_category"][c_] for e in tm]))
                                  for c_ in cats},
            "peak_rss_gib": sorted((b / GIB for role, b in seen.by_pid.values()
                                    if role == "gnntrain:worker"), reverse=True),
            "test_acc": eps[-1].get("test_acc"), "loadavg_before": load0,
            "loadavg_after": loadavg()}


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="a small, fast version")
    ap.add_argument("--yaml", default="synthetic-small.yaml", help="dataset config under datasets/")
    ap.add_argument("--epochs", type=int, default=None, help="epochs per row (default 3, smoke 2)")
    ap.add_argument("--workers", default=None, help="measured worker counts (default 1,2,4; smoke 1,2)")
    ap.add_argument("--simulate", default=None, help="simulated worker counts (default 8,16,32,64; smoke 4)")
    args = ap.parse_args(argv)
    epochs = args.epochs or (2 if args.smoke else 3)
    try:
        ks = [int(v) for v in (args.workers or ("1,2" if args.smoke else "1,2,4")).split(",") if v.strip()]
        sim = [int(v) for v in (args.simulate or ("4" if args.smoke else "8,16,32,64")).split(",")
               if v.strip()]
    except ValueError:
        ks, sim = [], []
    if epochs < 2 or not ks or min(ks + sim + [1]) < 1:
        ap.error(f"--epochs={epochs} (>= 2), --workers={args.workers!r} and --simulate="
                 f"{args.simulate!r} (comma-separated integers >= 1)")
    tag = "workers-smoke" if args.smoke else "workers"
    cfg = bench_config(args.yaml, [*WORKLOAD, *(SMOKE if args.smoke else []), f"train.epochs={epochs}",
                                   f"train.eval_every={epochs}"], tag)
    graph = load_dataset(cfg.dataset)
    print(f"{graph.name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
          f"{graph.train_idx.size:,} training nodes; {os.cpu_count()} CPUs; load "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    from gnntrain.runtime.cluster import ray_session

    rows = []
    with ray_session(cfg.cluster, max(ks)):
        for k in ks:
            r = measured(cfg, graph, k)
            rows.append(r)
            print(f"  k={k}: {r['epoch_s']:.2f} s/epoch, {r['bytes_per_epoch'] / 2**20:.1f} MiB/epoch, "
                  f"peak RSS per worker {'/'.join(f'{g:.2f}' for g in r['peak_rss_gib'])} GiB "
                  f"(load {r['loadavg_before']}-{r['loadavg_after']})", flush=True)
    sims = []
    for k in sim:
        s = simulate_k(cfg, graph, k)
        sims.append(s)
        print(f"  simulated k={k}: {s['bytes_total'] / 2**20:.1f} MiB/epoch "
              f"({s['bytes_per_worker_mean'] / 2**20:.2f} MiB per worker), remote input share "
              f"{s['remote_input_share']:.2f}, steps {s['steps']}", flush=True)
    out = {"graph": {"name": graph.name, "nodes": graph.num_nodes, "edges": graph.num_edges,
                     "train": int(graph.train_idx.size)}, "epochs": epochs, "measured": rows,
           "simulated": sims, "cpus": os.cpu_count(), "config": cfg.model_dump(mode="json")}
    write_json(out, out_path(tag))
    ok = all(r["epoch_s"] > 0 and r["peak_rss_gib"] for r in rows)
    if not ok:
        print("FAILED: a measured row has no epoch time or no worker RSS")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

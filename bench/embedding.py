"""Learnable node embeddings (``model.node_embedding``): accuracy, bytes and memory.

    python -m bench.embedding            # all three sections
    python -m bench.embedding --smoke    # small sizes (seconds)
    python -m bench.embedding --only memory

``accuracy`` -- ``datasets/email-eu-core.yaml`` (1,005 nodes, 42 departments, no node
features): the model trained on ``dataset.feature_fallback`` rows (``degree``,
``random_projection``) against the same model on a learnable 64-wide table alone
(``combine: only``), in one process and on 2 Ray workers (the table split by METIS parts).
Test accuracy at the end and at the best validation epoch. Smoke: 8 epochs on
``datasets/synthetic-tiny.yaml`` with its features replaced by the table.

``bytes`` -- ``gnntrain.simulate.simulate_k`` (the runtime's own counters over one epoch,
tested equal to a real run's) on ``datasets/synthetic-small.yaml`` with a 64-wide table
next to the 100 features (``combine: concat``), k = 2 and 4: embedding-row reads and
gradient pushes per epoch beside the feature bytes of the same epoch. Rows of a trainable
table are never cached, so the feature cache does not reduce them.

``memory`` -- the partitioned table at scale: 4 processes (one per worker), each
building its part of a 10M x 64 float32 table with sparse Adam (the table and two moment
arrays: 3 x 640 MB per worker, 7.7 GB over 4; the whole table with its moments would be
7.7 GB in one process) and applying 20 sparse steps of 50k rows. Peak RSS per process
above its RSS before the table, against its share; the target is <= 1.3 x the share.
Run in anonymous memory (the default) and with the shard in memory-mapped scratch files
(``mmap_above_mb: 0``). Smoke: 200k x 16.

Exit status 1 when a correctness check fails (``bench.harness.verdict``): every run lowers its
loss, the 2-worker runs move embedding bytes both ways with one gradient message per
row-read message, and every memory process finishes. The accuracy and memory ratios are
targets, reported. JSON goes to bench/out/embedding.json (``embedding-smoke.json``).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import time
from typing import Any

import numpy as np

from bench.harness.cli import bench_parser, csv_list
from bench.harness.memory import own_peak
from bench.harness.paths import OUT, bench_config, out_path
from bench.harness.runs import quiet, read_metrics
from bench.harness.system import machine
from bench.harness.verdict import Check, check, finish
from gnntrain.report import fmt_bytes

SECTIONS = ("accuracy", "bytes", "memory")
TABLE = ["model.node_embedding={dim: 64, combine: only, optimizer: sparse_adam, lr: 0.05}"]


def accuracy_section(smoke: bool, tag: str) -> tuple[list[dict[str, Any]], list[Check]]:
    from gnntrain.data import load_dataset
    from gnntrain.runtime.cluster import ray_session
    from gnntrain.runtime.coordinator import run_training

    if smoke:
        name, base = "synthetic-tiny.yaml", ["train.epochs=8", "cluster.workers=1", "partition.parts=1"]
    else:
        name, base = "email-eu-core.yaml", []
    variants: list[tuple[str, list[str], int]] = [
        ("fallback degree", ["model.node_embedding=null", "dataset.feature_fallback=degree"], 1),
        ("fallback random_projection", ["model.node_embedding=null",
                                        "dataset.feature_fallback=random_projection"], 1),
        ("node embedding (1 process)", TABLE, 1),
        ("node embedding (2 Ray workers)", TABLE, 2),
    ]
    if smoke:  # synthetic-tiny has features: the fallback rows do not apply
        variants = [("features", ["model.node_embedding=null"], 1), ("node embedding", TABLE, 1),
                    ("node embedding (2 Ray workers)", TABLE, 2)]
    rows: list[dict[str, Any]] = []
    checks: list[Check] = []
    with ray_session(bench_config(name, base, tag).cluster, 2):
        for label, extra, workers in variants:
            cfg = bench_config(name, [*base, *extra, f"cluster.workers={workers}",
                                      f"partition.parts={workers}"], tag)
            graph = load_dataset(cfg.dataset)
            s = run_training(cfg, single_process=workers == 1, graph=graph, progress=False,
                             console=quiet())
            eps = read_metrics(s)
            evals = [e for e in eps if "val_acc" in e]
            best = max(evals, key=lambda e: e["val_acc"])
            comm = s["bytes_per_epoch_by_category"]
            msgs = eps[-1]["comm"]["messages_by_category"]
            row = {"variant": label, "workers": workers, "epochs": len(eps),
                   "test_acc": eps[-1]["test_acc"], "best_val_acc": best["val_acc"],
                   "test_at_best_val": best["test_acc"], "best_epoch": best["epoch"],
                   "loss_first": eps[0]["loss"], "loss_last": eps[-1]["loss"],
                   "embedding_bytes_per_epoch": comm["embedding"],
                   "embedding_grad_bytes_per_epoch": comm["embedding_grad"],
                   "feature_bytes_per_epoch": comm["feature"]}
            rows.append(row)
            print(f"{label:<34} test {100 * row['test_acc']:5.1f}%  best val {100 * best['val_acc']:5.1f}% "
                  f"(test {100 * best['test_acc']:5.1f}%, epoch {best['epoch']})  "
                  f"embedding {fmt_bytes(comm['embedding'])} + grad {fmt_bytes(comm['embedding_grad'])}"
                  "/epoch", flush=True)
            checks.append(check(f"{label}: the loss goes down", row["loss_last"] < row["loss_first"],
                                f"{row['loss_first']:.3f} -> {row['loss_last']:.3f}"))
            if workers > 1 and "embedding" in label:
                checks.append(check(f"{label}: embedding rows and gradients cross both ways, one "
                                    "gradient message per read message",
                                    comm["embedding"] > 0 and comm["embedding_grad"] > 0
                                    and msgs["embedding"] == msgs["embedding_grad"] > 0,
                                    f"{comm['embedding']} B / {comm['embedding_grad']} B, messages "
                                    f"{msgs['embedding']} / {msgs['embedding_grad']}"))
    return rows, checks


def bytes_section(smoke: bool, tag: str) -> list[dict[str, Any]]:
    from gnntrain.data import load_dataset
    from gnntrain.simulate import simulate_k

    extra = ["model.node_embedding={dim: 64, combine: concat}"]
    if smoke:
        extra += ["dataset.synthetic.nodes=3000", "dataset.synthetic.features=16"]
    cfg = bench_config("synthetic-small.yaml", extra, tag)
    graph = load_dataset(cfg.dataset)
    rows = []
    for k in (2, 4):
        r = simulate_k(cfg, graph, k)
        b = r["bytes_by_category"]
        rows.append({"k": k, **{c: b[c] for c in ("sample", "feature", "gradient", "embedding",
                                                 "embedding_grad")}, "total": r["bytes_total"]})
        print(f"k={k}: feature {fmt_bytes(b['feature'])}, embedding reads {fmt_bytes(b['embedding'])}, "
              f"embedding gradients {fmt_bytes(b['embedding_grad'])}, all {fmt_bytes(r['bytes_total'])} "
              "per epoch", flush=True)
    return rows


def _memory_worker(rows: int, dim: int, part: int, parts: int, mmap_mb: float | None, q: Any) -> None:
    """One worker's part of the table: build it, take sparse steps, report RSS."""
    import torch

    import gnntrain.engine  # noqa: F401 - imported before the baseline (the table's init uses it)
    from gnntrain.config import NodeEmbeddingConfig
    from gnntrain.embedding import EmbeddingShard
    from partition.steps import current_rss

    torch.set_num_threads(1)
    share_rows = rows // parts
    orig = np.arange(part * share_rows, (part + 1) * share_rows, dtype=np.int64)
    cfg = NodeEmbeddingConfig(dim=dim, optimizer="sparse_adam", mmap_above_mb=mmap_mb)
    before = current_rss()
    t0 = time.perf_counter()
    shard = EmbeddingShard(cfg, orig, seed=0)
    init_s = time.perf_counter() - t0
    rng = np.random.default_rng(part)
    t1 = time.perf_counter()
    for step in range(20):
        touched = rng.choice(share_rows, min(50_000, share_rows), replace=False)
        shard.add_grads(step, part, touched, rng.standard_normal((touched.size, dim)).astype(np.float32))
        shard.apply(count=1024.0)
    step_s = (time.perf_counter() - t1) / 20
    peak = own_peak()
    q.put({"part": part, "share_bytes": shard.nbytes, "rss_before": before, "peak_rss": peak,
           "peak_above_before": peak - before, "mmap": shard.scratch is not None,
           "init_s": init_s, "step_s": step_s})


def memory_section(smoke: bool) -> list[dict[str, Any]]:
    rows, dim, parts = (200_000, 16, 4) if smoke else (10_000_000, 64, 4)
    out = []
    for mode, mmap_mb in (("anonymous memory (default)", None), ("memory-mapped scratch (mmap_above_mb=0)", 0.0)):
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=_memory_worker, args=(rows, dim, p, parts, mmap_mb, q))
                 for p in range(parts)]
        for p in procs:
            p.start()
        res = [q.get(timeout=1800) for _ in procs]
        for p in procs:
            p.join(timeout=60)
        res.sort(key=lambda r: r["part"])
        worst = max(r["peak_above_before"] / r["share_bytes"] for r in res)
        out.append({"mode": mode, "rows": rows, "dim": dim, "parts": parts, "workers": res,
                    "worst_peak_over_share": worst,
                    "whole_table_with_state_bytes": sum(r["share_bytes"] for r in res),
                    "exit_codes": [p.exitcode for p in procs]})
        print(f"{rows:,} x {dim} over {parts} processes, {mode}: share {fmt_bytes(res[0]['share_bytes'])} "
              f"per worker; peak RSS above start {', '.join(fmt_bytes(r['peak_above_before']) for r in res)} "
              f"(worst {worst:.2f} x share; target <= 1.3); init {res[0]['init_s']:.1f} s, "
              f"sparse step {1000 * res[0]['step_s']:.0f} ms", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="small sizes (seconds)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    args = ap.parse_args(argv)
    only = csv_list(args.only)
    if [s for s in only if s not in SECTIONS]:
        ap.error(f"--only={args.only!r}: allowed {','.join(SECTIONS)}")
    tag = "embedding-smoke" if args.smoke else "embedding"
    OUT.mkdir(parents=True, exist_ok=True)
    path = out_path(tag)
    out: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    out.update({"machine": machine(), "argv": sys.argv[1:]})
    checks: list[Check] = []
    if "accuracy" in only:
        out["accuracy"], acc_checks = accuracy_section(args.smoke, tag)
        checks += acc_checks
    if "bytes" in only:
        out["bytes"] = bytes_section(args.smoke, tag)
        checks.append(check("the table moves bytes at k = 2 and 4",
                            all(r["embedding"] > 0 and r["embedding_grad"] > 0 for r in out["bytes"])))
    if "memory" in only:
        out["memory"] = memory_section(args.smoke)
        checks.append(check("every memory process finished",
                            all(c == 0 for m in out["memory"] for c in m["exit_codes"]),
                            str([m["exit_codes"] for m in out["memory"]])))
    out["loadavg_after"] = os.getloadavg()[0]
    return finish("bench.embedding", checks, out, path)


if __name__ == "__main__":
    sys.exit(main())

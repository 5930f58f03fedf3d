"""Epoch time of our trainer against DGL 2.1 and PyG full-batch, plus the runtime's overhead.

    python -m bench.epoch                 # synthetic-small (100k nodes), ~20 min on 2 cores
    python -m bench.epoch --smoke         # a 3k-node graph, tiny model (seconds)
    python -m bench.epoch --only ours,dgl --threads 1
    python -m bench.epoch --only ours,dgl --threads 1 --precision fp32,bf16

Workload (the issue fixes it): ``datasets/synthetic-small.yaml`` with fanouts [15, 10, 5],
batch 1024, 3-layer GraphSAGE (mean), hidden 256, dropout 0.5, Adam lr 0.003, every
other setting from the YAML. Sections:

* ``ours``: the single-process reference trainer (``run_training(single_process=True)``)
  with torch set to each ``--threads`` count first (its batch-prefetch thread comes on
  top). Since commit 56ebaa3 the trainer itself sets cores - 1 threads when it prefetches;
  the row shows the count it used and "(asked N)" when that differs. With ``--precision
  fp32,bf16`` it runs once per precision (``train.precision``) at each thread count; DGL
  always runs in float32 (its loop has no autocast), so a bf16 row's ratio is against
  DGL's float32 loop.
* ``dgl``: DGL's single-process GraphSAGE loop (``bench/_dgl_epoch.py``: DGL's
  ``NeighborSampler`` + ``DataLoader(num_workers=0)`` + ``dgl.nn.SAGEConv``) on the same
  graph, written to an .npz in bench/out and run by ``$GNNTRAIN_DGL_PYTHON``, at the
  same thread counts, right after ours. The DGL model starts from **our** initial
  parameters (PyG ``lin_l``/``lin_r`` map to DGL ``fc_neigh``/``fc_self``), so both
  train the same function from the same point.
* ``pyg``: PyG full-batch training of the same model (``BlockGNN`` layers over the
  whole graph as one sparse CSR adjacency, one optimiser step per epoch).
* ``overhead``: 1 and 2 Ray workers (each uses 1 torch thread: ``ray_group`` sets
  it), against the single-process trainer at 1 thread.
* ``steps``: the training step alone (forward, backward, Adam) on the same 6 sampled
  batches, 1 torch thread, with each of the model's two speed-ups switched off in turn:
  message passing over the block's CSR (``torch.sparse.mm``) vs PyG's per-edge
  ``edge_index`` path, and the fused numba ReLU + dropout vs ``F.relu`` + ``F.dropout``.

Every run trains ``--epochs`` epochs and the epochs after the first are timed (the numba
kernels are cached on disk, so the first is close, but it is not counted). Accuracy is
the final test accuracy of full-neighbour inference. Ratios are against DGL at the same
thread count when it ran, else against our single process. The 1-minute load average
before and after each run is recorded: other processes share this machine. Nothing here
asserts a time; the exit status is 1 when a correctness check fails (``bench.harness.verdict``):
each of our runs (single process, Ray) lowers its loss from the first epoch to the last and
ends above the test set's majority-class share, and 1 Ray worker trains what the
single-process trainer trains (same per-epoch loss; exactly when both used 1 thread). The
smoke workload uses hidden 64 and lr 0.01, so that two epochs on its 3k-node graph learn.
JSON goes to bench/out/epoch.json (``epoch-smoke.json``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bench.harness import peer
from bench.harness.cli import bench_parser, csv_list
from bench.harness.paths import OUT, bench_config, out_path
from bench.harness.peer import dgl_state, run_peer
from bench.harness.runs import drop_run, quiet, read_metrics, steady_means, timed
from bench.harness.system import loadavg, machine
from bench.harness.verdict import Check, check, finish, majority_share
from gnntrain.config import RunConfig
from gnntrain.data import load_dataset
from gnntrain.engine import make_optimizer
from gnntrain.models import build_model
from gnntrain.models.protocol import LayerwiseModel
from partition.graph import Graph
from samplers import Block

SECTIONS = ("ours", "dgl", "pyg", "overhead", "steps")
WORKLOAD = ["sampler.fanouts=[15,10,5]", "sampler.batch_size=1024", "model.arch=sage",
            "model.hidden=256", "model.layers=3", "model.dropout=0.5", "train.lr=0.003",
            "train.optimizer=adam", "train.eval=full"]
SMOKE = ["dataset.synthetic.nodes=3000", "dataset.synthetic.features=16",
         "dataset.synthetic.classes=8", "sampler.batch_size=256", "model.hidden=64", "train.lr=0.01"]


# -- sections ---------------------------------------------------------------------------
def run_ours(cfg: RunConfig, graph: Graph, *, label: str, single_process: bool = True,
             threads: int | None = None, keep: bool = False) -> dict[str, Any]:
    """One run of our trainer; per-epoch figures from its metrics.jsonl."""
    from gnntrain.runtime.coordinator import run_training

    before = torch.get_num_threads()
    load_before = loadavg()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        t0 = time.perf_counter()
        s = run_training(cfg, single_process=single_process, graph=graph, progress=False,
                         console=quiet())
        wall = time.perf_counter() - t0
        used = torch.get_num_threads()  # the single-process trainer may choose its own
    finally:
        torch.set_num_threads(before)
    eps = read_metrics(s)
    drop_run(s, keep)
    tm = timed(eps)
    epoch_s, split = steady_means(eps)
    return {"label": label, "epochs": len(eps), "timed_epochs": len(tm), "epoch_s": epoch_s,
            "epoch_s_all": [e["epoch_s"] for e in eps], "time_split": split,
            "wait_share": split["wait_s"] / epoch_s if epoch_s else float("nan"),
            "test_acc": eps[-1].get("test_acc"), "val_acc": eps[-1].get("val_acc"),
            "loss": [e["loss"] for e in eps], "steps": eps[-1]["steps"], "wall_s": wall,
            "threads": used if single_process else 1, "threads_requested": threads or before,
            "workers": cfg.cluster.workers if not single_process else 1,
            "bytes_per_epoch": float(np.mean([e["comm"]["total_bytes"] for e in tm])),
            "loadavg_before": load_before, "loadavg_after": loadavg()}


def run_dgl(python: str, cfg: RunConfig, graph: Graph, epochs: int, tag: str,
            threads: int) -> dict[str, Any]:
    """DGL's loop in a subprocess on the same graph; raises RuntimeError when it fails."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"epoch-graph-{tag}.npz"
    arrays: dict[str, Any] = {"indptr": graph.indptr, "indices": graph.indices, "x": graph.x,
                              "y": graph.y, "train_idx": graph.train_idx, "val_idx": graph.val_idx,
                              "test_idx": graph.test_idx}
    arrays.update({f"init__{k}": v for k, v in dgl_state(cfg, graph).items()})
    np.savez(path, **arrays)
    settings = {"epochs": epochs, "fanouts": list(cfg.sampler.fanouts),
                "batch_size": cfg.sampler.batch_size, "hidden": cfg.model.hidden,
                "layers": cfg.model.layers, "dropout": cfg.model.dropout, "lr": cfg.train.lr,
                "seed": cfg.train.seed, "threads": threads}
    load_before = loadavg()
    t0 = time.perf_counter()
    res = run_peer(python, "_dgl_epoch.py", path, settings)
    wall = time.perf_counter() - t0
    tm = timed(res["epochs"])
    epoch_s = float(np.mean([e["epoch_s"] for e in tm]))
    return {"label": f"DGL {res['dgl']}, {threads} thread(s)", "epochs": len(res["epochs"]),
            "timed_epochs": len(tm), "epoch_s": epoch_s,
            "epoch_s_all": [e["epoch_s"] for e in res["epochs"]],
            "time_split": {"data_s": float(np.mean([e["data_s"] for e in tm])),
                           "compute_s": float(np.mean([e["compute_s"] for e in tm]))},
            "wait_share": None, "test_acc": res["test_acc"], "val_acc": res["val_acc"],
            "loss": [e["loss"] for e in res["epochs"]], "wall_s": wall, "threads": res["threads"],
            "torch": res["torch"], "loadavg_before": load_before,
            "loadavg_after": loadavg()}


def run_pyg_full(cfg: RunConfig, graph: Graph, epochs: int) -> dict[str, Any]:
    """PyG full-batch training of the same model: every layer over the whole graph."""
    n = graph.num_nodes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
        adj = torch.sparse_csr_tensor(torch.from_numpy(graph.indptr), torch.from_numpy(graph.indices),
                                      torch.ones(graph.num_edges), size=(n, n))
    model = build_model(cfg.model.arch, cfg.model, graph.num_features, graph.num_classes, cfg.train.seed)
    assert isinstance(model, LayerwiseModel), "the built-in models are layer-wise"
    opt = make_optimizer(model, cfg.train.optimizer, cfg.train.lr, cfg.train.weight_decay)
    x, y = torch.from_numpy(graph.x), torch.from_numpy(graph.y)
    tr = torch.from_numpy(graph.train_idx)

    def forward() -> torch.Tensor:
        h = x
        for i in range(model.num_layers):
            h = model.layer(i, Block(adj, n, n), h)  # adj rows = destinations: PyG's adj_t
        return h

    torch.manual_seed(cfg.train.seed)
    load_before = loadavg()
    times, losses = [], []
    for _ in range(epochs):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(forward()[tr], y[tr])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
    model.eval()
    with torch.no_grad():
        pred = forward().argmax(1)
    acc = {f"{s}_acc": float((pred[idx] == y[idx]).float().mean())
           for s, idx in (("val", torch.from_numpy(graph.val_idx)),
                          ("test", torch.from_numpy(graph.test_idx)))}
    tm = times[1:] if len(times) > 1 else times
    return {"label": f"PyG full batch ({epochs} steps)", "epochs": epochs, "timed_epochs": len(tm),
            "epoch_s": float(np.mean(tm)), "epoch_s_all": times, "wait_share": None,
            "loss": losses, "threads": torch.get_num_threads(), **acc,
            "loadavg_before": load_before, "loadavg_after": loadavg()}


def run_steps(cfg: RunConfig, graph: Graph, batches: int = 6, repeats: int = 2,
              clock: Callable[[], float] = time.perf_counter) -> dict[str, Any]:
    """Seconds per training step for the four combinations of the two speed-ups, by
    ``clock`` (wall time; ``bench.regress`` passes CPU time)."""
    import gnntrain.models.builtin as models
    from samplers import Block, CSRSource, NeighborSampler
    from samplers.config import resolve_fanouts

    sampler = NeighborSampler(CSRSource.from_graph(graph),
                              resolve_fanouts(cfg.sampler.fanouts, graph.edge_type_names))
    rng = np.random.default_rng(cfg.train.seed)
    data = []
    for i in range(batches):
        seeds = np.sort(rng.choice(graph.train_idx, cfg.sampler.batch_size, replace=False))
        b = sampler.sample(seeds, key=i)
        data.append((torch.from_numpy(graph.x[b.input_nodes]), torch.from_numpy(graph.y[b.seeds]),
                     b.blocks, [Block(bl.edge_index, bl.num_src, bl.num_dst) for bl in b.blocks]))
    fused = models.relu_dropout

    def unfused(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
        return F.dropout(F.relu(x), p=p, training=training)

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    out: dict[str, Any] = {"batches": batches, "repeats": repeats,
                           "edges": [bl.num_edges for bl in data[0][2]],
                           "nodes": [bl.num_src for bl in data[0][2]] + [data[0][2][-1].num_dst]}
    try:
        for csr in (True, False):
            for fuse in (True, False):
                models.relu_dropout = fused if fuse else unfused  # type: ignore[assignment]
                model = build_model(cfg.model.arch, cfg.model, graph.num_features, graph.num_classes, cfg.train.seed)
                opt = make_optimizer(model, cfg.train.optimizer, cfg.train.lr, cfg.train.weight_decay)
                model.train()
                times = []
                for r in range(repeats + 1):  # the first pass warms up and is not timed
                    t0 = clock()
                    for x, y, with_csr, without in data:
                        opt.zero_grad()
                        F.cross_entropy(model(with_csr if csr else without, x), y).backward()
                        opt.step()
                    if r:
                        times.append((clock() - t0) / batches)
                key = f"{'csr' if csr else 'edge_index'}+{'fused' if fuse else 'F.dropout'}"
                out[key] = float(np.median(times))
    finally:
        models.relu_dropout = fused  # type: ignore[assignment]
        torch.set_num_threads(before)
    out["loadavg_after"] = loadavg()
    return out


def print_steps(st: dict[str, Any]) -> None:
    base = st["edge_index+F.dropout"]
    print(f"\ntraining step, 1 thread, {st['batches']} batches x {st['repeats']} (nodes per layer "
          f"{st['nodes']}, edges {st['edges']})")
    print(f"{'message passing + activation':<34} {'s/step':>8} {'speed-up':>9}")
    for key in ("edge_index+F.dropout", "edge_index+fused", "csr+F.dropout", "csr+fused"):
        print(f"{key:<34} {st[key]:>8.3f} {base / st[key]:>8.2f}x")


# -- report -----------------------------------------------------------------------------
def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def baseline_of(key: str, results: dict[str, dict[str, Any]]) -> str:
    """DGL at the thread count asked for when it ran, else our single process at it (or at
    any thread count)."""
    t = results[key].get("threads_requested", results[key]["threads"])
    for cand in (f"dgl{t}", f"ours{t}", *[k for k in results if k.startswith("ours")]):
        if cand in results:
            return cand
    return key


def print_main(results: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'run':<32} {'thr':>3} {'timed':>5} {'epoch s':>9} {'ratio':>7} {'baseline':<22} "
          f"{'test acc':>8} {'wait':>6} {'load':>9}")
    for key, r in results.items():
        b = baseline_of(key, results)
        r["baseline"] = results[b]["label"]
        r["ratio"] = r["epoch_s"] / results[b]["epoch_s"]
        load = f"{r.get('loadavg_before', 0):.1f}-{r.get('loadavg_after', 0):.1f}"
        print(f"{r['label']:<32} {r['threads']:>3} {r['timed_epochs']:>5} {r['epoch_s']:>9.2f} "
              f"{r['ratio']:>6.2f}x {r['baseline']:<22} {_pct(r['test_acc']):>8} "
              f"{_pct(r['wait_share']):>6} {load:>9}")
    print("wait = share of the epoch the trainer waited for a sampled batch; load = 1-min load "
          "average before-after the run (other processes on this machine)")


def print_overhead(results: dict[str, dict[str, Any]]) -> dict[str, float]:
    pairs = [("ray1", "ours1", "Ray 1 worker / single process, 1 thread", 1.15),
             ("ray1", "ours2", "Ray 1 worker / single process, 2 threads", None),
             ("ray2", "ray1", "Ray 2 workers / Ray 1 worker", None)]
    ratios: dict[str, float] = {}
    print(f"\n{'runtime overhead (a Ray worker uses 1 torch thread)':<52} {'epoch s':>8} "
          f"{'base s':>8} {'ratio':>7}  target")
    for a, b, text, target in pairs:
        if a in results and b in results:
            ratio = results[a]["epoch_s"] / results[b]["epoch_s"]
            ratios[f"{a}/{b}"] = ratio
            tgt = f"<= {target:.2f} ({'met' if ratio <= target else 'missed'})" if target else "recorded"
            print(f"{text:<52} {results[a]['epoch_s']:>8.2f} {results[b]['epoch_s']:>8.2f} "
                  f"{ratio:>6.2f}x  {tgt}")
    return ratios


def print_targets(results: dict[str, dict[str, Any]], threads: list[int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in threads:
        if f"ours{t}" in results:
            w = results[f"ours{t}"]["wait_share"]
            out[f"wait_share_{t}"] = w
            print(f"ours, {t} thread(s): share of the epoch waiting on sampling = {100 * w:.2f}% "
                  f"(target < 10%: {'met' if w < 0.10 else 'missed'})")
        if f"ours{t}" in results and f"dgl{t}" in results:
            r = results[f"ours{t}"]["epoch_s"] / results[f"dgl{t}"]["epoch_s"]
            out[f"ours_over_dgl_{t}"] = r
            print(f"ours / DGL epoch time at {t} thread(s) = {r:.2f}x "
                  f"(target <= 1.0x: {'met' if r <= 1.0 else 'missed'})")
        if f"oursbf16{t}" in results and f"dgl{t}" in results:
            r = results[f"oursbf16{t}"]["epoch_s"] / results[f"dgl{t}"]["epoch_s"]
            out[f"ours_bf16_over_dgl_{t}"] = r
            target = 0.5 if t == 1 else None  # issue 17: single process, 1 thread
            print(f"ours in bf16 / DGL (float32) epoch time at {t} thread(s) = {r:.2f}x "
                  + (f"(target <= {target}x: {'met' if r <= target else 'missed'})" if target else "(recorded)"))
    return out


def checks(results: dict[str, dict[str, Any]], floor: float) -> list[Check]:
    """Correctness of our runs (``ours<t>``, ``ray<k>`` keys of ``results``); ``floor`` is
    :func:`majority_share` of the graph."""
    out: list[Check] = []
    for key, r in results.items():
        if not key.startswith(("ours", "ray")):
            continue
        if len(r["loss"]) > 1:
            out.append(check(f"{r['label']}: loss falls from the first epoch to the last",
                             r["loss"][-1] < r["loss"][0], f"losses {[round(v, 4) for v in r['loss']]}"))
        acc = r["test_acc"]
        out.append(check(f"{r['label']}: test accuracy above the majority-class share",
                         acc is not None and acc > floor, f"test acc {acc}, majority share {floor:.4f}"))
    if "ray1" in results and "ours1" in results:
        a, b = results["ray1"], results["ours1"]
        exact = a["threads"] == b["threads"] == 1
        same = len(a["loss"]) == len(b["loss"]) and all(
            x == y if exact else abs(x - y) <= 1e-3 * abs(y) for x, y in zip(a["loss"], b["loss"], strict=False))
        out.append(check("Ray 1 worker trains what the single process trains (per-epoch loss"
                         + (", exactly)" if exact else ", within 1e-3: thread counts differ)"), same,
                         f"Ray {a['loss']} vs single process {b['loss']}"))
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = bench_parser(__doc__, smoke="3k-node graph, tiny model (seconds)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per run; all but the first are timed")
    ap.add_argument("--threads", default=None,
                    help="torch thread counts for ours and DGL (comma-separated; default 1,2, "
                    "smoke 1)")
    ap.add_argument("--pyg-epochs", type=int, default=None,
                    help="full-batch epochs (= optimiser steps; default 20, smoke 3)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    ap.add_argument("--precision", default="fp32",
                    help="train.precision of our single-process rows (comma-separated: fp32,bf16)")
    ap.add_argument("--keep-runs", action="store_true", help="keep the run directories in bench/out/runs")
    args = ap.parse_args(argv)
    args.only = csv_list(args.only)
    args.precision = csv_list(args.precision)
    args.pyg_epochs = args.pyg_epochs or (3 if args.smoke else 20)
    try:
        given = args.threads or ("1" if args.smoke else "1,2")
        args.threads = sorted({int(t) for t in given.split(",") if t.strip()})
    except ValueError:
        args.threads = []
    if ([s for s in args.only if s not in SECTIONS] or args.epochs < 1 or args.pyg_epochs < 1
            or not args.threads or min(args.threads) < 1
            or not args.precision or [p for p in args.precision if p not in ("fp32", "bf16")]):
        ap.error(f"--only={','.join(args.only)!r} (allowed {','.join(SECTIONS)}), --epochs="
                 f"{args.epochs} and --pyg-epochs={args.pyg_epochs} (>= 1), --threads (integers >= 1), "
                 f"--precision={','.join(args.precision)!r} (fp32, bf16)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    only = args.only
    overrides = [*WORKLOAD, *(SMOKE if args.smoke else []), f"train.epochs={args.epochs}",
                 f"train.eval_every={args.epochs}"]
    tag = "epoch-smoke" if args.smoke else "epoch"
    cfg = bench_config("synthetic-small.yaml", overrides, tag)
    t_start = time.perf_counter()
    info = machine()
    graph = load_dataset(cfg.dataset)
    print(f"{graph.name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
          f"{graph.num_features} features, {graph.num_classes} classes, "
          f"{graph.train_idx.size:,} training nodes; fanouts {cfg.sampler.fanouts}, batch "
          f"{cfg.sampler.batch_size}, {cfg.model.layers}-layer SAGE hidden {cfg.model.hidden}; "
          f"{info['cpus']} CPUs, load {info['loadavg_1m']}")
    results: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    dgl_python = peer.dgl_python()
    if "dgl" in only and not dgl_python:
        notes.append("DGL not run: set GNNTRAIN_DGL_PYTHON to a Python with dgl")
    for t in args.threads:  # ours and DGL back to back at each thread count
        single = "ours" in only or ("overhead" in only and t == 1)
        for prec in args.precision if single else []:
            cfg_p = cfg if prec == "fp32" else cfg.with_overrides([f"train.precision={prec}"])
            r = run_ours(cfg_p, graph, label="ours, single process", threads=t, keep=args.keep_runs)
            r["label"] += f", {r['threads']} thr" + (f" (asked {t})" if r["threads"] != t else "")
            r["label"] += "" if prec == "fp32" else f", {prec}"
            if r["threads"] != t:
                notes.append(f"the single-process trainer chose {r['threads']} torch thread(s) "
                             f"when {t} were set (gnntrain.runtime.group.LocalGroup)")
            results[f"ours{t}" if prec == "fp32" else f"ours{prec}{t}"] = r
            print(f"  {r['label']}: {r['epoch_s']:.2f} s/epoch")
        if "dgl" in only and dgl_python:
            try:
                results[f"dgl{t}"] = run_dgl(dgl_python, cfg, graph, args.epochs, tag, t)
                print(f"  DGL, {t} thread(s): {results[f'dgl{t}']['epoch_s']:.2f} s/epoch")
            except (RuntimeError, subprocess.SubprocessError, OSError, ValueError) as e:
                notes.append(f"DGL ({t} threads) not run: {e}")
    if "pyg" in only:
        results["pyg"] = run_pyg_full(cfg, graph, args.pyg_epochs)
        print(f"  PyG full batch: {results['pyg']['epoch_s']:.2f} s/epoch")
    if "overhead" in only:
        from gnntrain.runtime.cluster import ray_session

        if "ours1" not in results:
            results["ours1"] = run_ours(cfg, graph, label="ours, single process", threads=1,
                                        keep=args.keep_runs)
            results["ours1"]["label"] += f", {results['ours1']['threads']} thr"
        with ray_session(cfg.cluster, 2):
            for k in (1, 2):
                cfg_k = cfg.with_overrides([f"cluster.workers={k}", f"partition.parts={k}"])
                results[f"ray{k}"] = run_ours(cfg_k, graph, label=f"ours, Ray, {k} worker(s)",
                                              single_process=False, threads=1, keep=args.keep_runs)
                print(f"  Ray, {k} worker(s): {results[f'ray{k}']['epoch_s']:.2f} s/epoch")
    steps: dict[str, Any] = {}
    if "steps" in only:
        steps = run_steps(cfg, graph)
        print_steps(steps)
    targets: dict[str, float] = {}
    ratios: dict[str, float] = {}
    if results:
        print_main(results)
        ratios = print_overhead(results)
        print()
        targets = print_targets(results, args.threads)
    for n in notes:
        print(f"note: {n}")
    total = time.perf_counter() - t_start
    print(f"total {total:.0f} s; load average now {os.getloadavg()[0]:.2f} (was {info['loadavg_1m']})")
    out: dict[str, Any] = {"machine": info, "config": cfg.model_dump(mode="json"),
                           "graph": {"nodes": graph.num_nodes, "edges": graph.num_edges,
                                     "train": int(graph.train_idx.size)},
                           "results": results, "steps": steps, "overhead_ratios": ratios, "targets": targets,
                           "notes": notes, "total_s": total, "argv": sys.argv[1:]}
    return finish("epoch", checks(results, majority_share(graph)), out, out_path(tag))


if __name__ == "__main__":
    raise SystemExit(main())

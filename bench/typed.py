"""Typed graphs: R-GCN and heterogeneous GraphSAGE test accuracy on HeCo ACM and DBLP
against a full-batch PyG R-GCN.

    python -m bench.typed                   # acm and dblp (datasets/acm.yaml, datasets/dblp.yaml)
    python -m bench.typed --smoke           # a small synthetic MAG-shaped graph, few epochs
    python -m bench.typed --no-reference    # skip the PyG reference (22 min on DBLP, 2 cores)
    python -m bench.typed --datasets acm --seeds 5   # the reference and the 1-process rows over 5 seeds
    python -m bench.typed --datasets dblp --seeds 5 --no-reference --workers 2,4   # and the worker rows

Per dataset, with its config's model size, epochs and split (HeCo's 20 labels per class):

* ``pyg full-batch`` -- the reference: one ``Linear`` per node type on its own feature
  columns to the hidden width, then PyG ``RGCNConv`` layers (basis decomposition,
  per-relation mean, relation = (source type, destination type)) over the whole graph,
  trained in this process with the same optimizer, learning rate and epochs;
* ``ours, R-GCN, 1 process`` / ``2 Ray workers`` / ``4 Ray workers`` -- ``model.arch: rgcn``
  with the config's sampled fanouts, relations read from each edge's relation id;
* ``ours, hsage, ...`` -- the same runs with ``model.arch: hsage`` (PyG
  ``HeteroConv(SAGEConv)`` semantics);
* ``ours, GraphSAGE (types ignored)`` -- the same graph with the built-in GraphSAGE, which
  cannot tell the relations apart.

First, per worker count: METIS with ``partition.balance_node_types`` off and on (edge cut,
each node type's imbalance; checked: every balanced type within ``partition.imbalance``)
and the feature bytes the parts hold, padded as stored against per-type tables (checked:
read back bit for bit).

With ``--seeds N``, instead: the reference and the two one-process runs (and, with
``--workers``, each model on those Ray worker counts), each trained with seeds
``train.seed`` .. ``+N-1``; per run the mean and spread of the test accuracy, each
one-process model's gap of the means to the reference and each worker run's gap to its
model's one-process run, with standard errors (one seed's difference is mostly the seed:
1 point is 6-10 test nodes here).

Evaluation time: per run, the median seconds of one evaluation of every node (our
layer-wise inference; the reference's no-grad full-batch forward pass), one process against
the reference (target: at most 3x), Ray workers against the run's training seconds per
epoch.

Test accuracy at the epoch with the best validation accuracy (evaluated every 5 epochs),
with the published supervised HAN Micro-F1 beside it (ACM 85.11, DBLP 90.16; HeCo paper,
Table 3). Exit status 1 when a correctness check fails (``bench.harness.verdict``): every run
lowers its loss. The accuracy gaps are targets, reported. JSON: bench/out/typed.json.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from bench.harness.cli import bench_parser
from bench.harness.paths import bench_config, out_path
from bench.harness.runs import quiet, read_metrics
from bench.harness.stats import gap, spread
from bench.harness.system import machine
from bench.harness.verdict import Check, check, finish
from gnntrain.config import RunConfig
from gnntrain.models.hetero_sage import relation_dst
from partition.graph import Graph

PUBLISHED_HAN = {"acm": 85.11, "dblp": 90.16}
SMOKE = ["dataset.synthetic_hetero.papers=400", "dataset.synthetic_hetero.authors=400",
         "dataset.synthetic_hetero.institutions=10", "dataset.synthetic_hetero.fields=30",
         "train.epochs=10"]


def pyg_reference(cfg: RunConfig, graph: Graph) -> dict[str, Any]:
    """Full-batch PyG R-GCN with the config's width, depth, dropout, optimizer and epochs,
    after one ``Linear`` per node type to the hidden width (unless the config's
    ``model.options.input_projection`` is false)."""
    from torch_geometric.nn import RGCNConv

    torch.manual_seed(cfg.train.seed)
    types = torch.from_numpy(graph.node_types())  # type: ignore[arg-type]
    t = len(graph.node_type_names)
    n = graph.num_nodes
    src = torch.from_numpy(graph.indices)
    dst = torch.from_numpy(np.repeat(np.arange(n), np.diff(graph.indptr)))
    ei, et = torch.stack([src, dst]), types[src] * t + types[dst]
    project = bool(cfg.model.options.get("input_projection", True))
    widths = graph.node_type_features or (graph.num_features,) * t
    # one Linear per node type on the type's own columns (PyG's HeteroDictLinear), as our
    # model's input_projection; without it, RGCNConv on the zero-padded rows
    lins = torch.nn.ModuleList(torch.nn.Linear(max(1, w), cfg.model.hidden) for w in widths) if project else None
    first = cfg.model.hidden if project else graph.num_features
    dims = [first] + [cfg.model.hidden] * (cfg.model.layers - 1) + [graph.num_classes]
    bases = int(cfg.model.options.get("bases", 2))
    convs = torch.nn.ModuleList(RGCNConv(dims[i], dims[i + 1], t * t, num_bases=bases, aggr="mean")
                                for i in range(cfg.model.layers))
    params = [*convs.parameters(), *(lins.parameters() if lins is not None else [])]
    opt = torch.optim.Adam(params, lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    x, y = torch.from_numpy(graph.x), torch.from_numpy(graph.y)
    split = {s: torch.from_numpy(graph.split_idx(s)) for s in ("train", "val", "test")}

    def project_rows() -> torch.Tensor:
        assert lins is not None
        out = x.new_empty((n, cfg.model.hidden))
        for i, lin in enumerate(lins):
            mine = types == i
            out[mine] = lin(x[mine][:, :max(1, widths[i])])
        return F.relu(out)

    def forward(train: bool) -> torch.Tensor:
        h = project_rows() if lins is not None else x
        for i, conv in enumerate(convs):
            h = conv(h, ei, et)
            if i < len(convs) - 1:
                h = F.dropout(F.relu(h), cfg.model.dropout, train)
        return h

    best: tuple[float, float, int] = (-1.0, 0.0, 0)
    every = cfg.with_eval_every_for(n).train.eval_interval()  # as our run evaluates
    losses, forward_s = [], []
    t0 = time.perf_counter()
    for epoch in range(cfg.train.epochs):
        convs.train()
        if lins is not None:
            lins.train()
        opt.zero_grad()
        loss = F.cross_entropy(forward(True)[split["train"]], y[split["train"]])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if (epoch + 1) % every == 0 or epoch == cfg.train.epochs - 1:
            convs.eval()
            t1 = time.perf_counter()
            with torch.no_grad():
                pred = forward(False).argmax(1)
            forward_s.append(time.perf_counter() - t1)
            acc = {s: float((pred[i] == y[i]).float().mean()) for s, i in split.items()}
            if acc["val"] > best[0]:
                best = (acc["val"], acc["test"], epoch)
    return {"best_val_acc": best[0], "test_at_best_val": best[1], "best_epoch": best[2],
            "loss_first": losses[0], "loss_last": losses[-1], "seconds": time.perf_counter() - t0,
            "eval_s": float(np.median(forward_s))}


def ours(cfg: RunConfig, graph: Graph, workers: int) -> dict[str, Any]:
    from gnntrain.runtime.coordinator import run_training

    t0 = time.perf_counter()
    s = run_training(cfg, single_process=workers == 1, graph=graph, progress=False, console=quiet())
    eps = read_metrics(s)
    best = max((e for e in eps if "val_acc" in e), key=lambda e: e["val_acc"])
    return {"best_val_acc": best["val_acc"], "test_at_best_val": best["test_acc"],
            "best_epoch": best["epoch"], "loss_first": eps[0]["loss"], "loss_last": eps[-1]["loss"],
            "seconds": time.perf_counter() - t0,
            "eval_s": float(np.median([e["eval_s"] for e in eps if "eval_s" in e])),
            "train_epoch_s": float(np.median([e["epoch_s"] for e in eps])),
            "bytes_per_epoch": s["bytes_per_epoch_by_category"]}


def evaluation_lines(name: str, rows: list[dict[str, Any]]) -> None:
    """Per run, the median seconds of one evaluation of every node: in one process against
    the reference's full-batch forward pass (target: at most 3x), with Ray workers against
    the run's own training seconds per epoch."""
    ref = next((r for r in rows if r["run"] == "pyg full-batch R-GCN"), None)
    for r in rows:
        if r["run"] == "pyg full-batch R-GCN" or "eval_s" not in r:
            continue
        if "Ray workers" in r["run"]:
            what = f"training {r['train_epoch_s']:.2f} s an epoch"
        elif ref is not None:
            what = f"{r['eval_s'] / ref['eval_s']:.1f}x the PyG full-batch forward ({ref['eval_s']:.2f} s; target <= 3x)"
        else:
            what = "no reference run"
        print(f"{name:<18} {r['run']:<34} evaluation {r['eval_s']:.2f} s: {what}", flush=True)


def partition_rows(name: str, cfg: RunConfig, graph: Graph,
                   workers: tuple[int, ...]) -> tuple[list[dict[str, Any]], list[Check]]:
    """Per k: METIS with ``partition.balance_node_types`` off and on (edge cut, each node
    type's imbalance), and the feature bytes a worker holds per part of the set training
    uses (the typed set), padded to the widest type against its per-type tables
    (``partition.feature_rows.TypedRows``), whose rows must equal the graph's padded rows."""
    import tempfile

    from partition import build_training_set
    from partition.balance import allowed_loads, vertex_weights
    from partition.feature_rows import TypedRows
    from partition.methods import assign_parts
    from partition.report import quality_report

    rows: list[dict[str, Any]] = []
    checks: list[Check] = []
    for k in workers:
        for on in (False, True):
            pc = cfg.partition.model_copy(update={"parts": k, "balance_node_types": on})
            parts = assign_parts(graph, pc)
            r = quality_report(graph, parts, num_parts=k)
            types = {m: v for m, v in r.imbalance.items() if m.startswith("nodes:")}
            rows.append({"dataset": name, "run": f"partition k={k} per-type {'on' if on else 'off'}",
                         "edge_cut_fraction": r.edge_cut_fraction, "imbalance": r.imbalance})
            print(f"{name:<18} METIS k={k}, per-type balance {'on ' if on else 'off'}: cut "
                  f"{100 * r.edge_cut_fraction:.1f}%, " + ", ".join(f"{m[6:]} {v:.3f}" for m, v in types.items()),
                  flush=True)
            if on:
                w, names = vertex_weights(graph, pc)
                load = np.stack([np.bincount(parts, weights=w[:, c], minlength=k) for c in range(w.shape[1])], 1)
                over = [n for n, a, m in zip(names, allowed_loads(w, k, pc.imbalance), load.max(0), strict=True)
                        if m > a]
                checks.append(check(f"{name} k={k}: every balanced type within partition.imbalance", not over,
                                    f"constraints {names}; over: {over or 'none'}"))
        with tempfile.TemporaryDirectory() as d:
            pset = build_training_set(graph, cfg.partition.model_copy(update={"parts": k, "root": d}))
            padded = per_type = 0
            same = True
            for p in range(k):
                loaded = pset.load_part(p)
                part, want = loaded.x, graph.x[loaded.orig_ids]
                assert isinstance(part, TypedRows)
                padded, per_type = padded + want.nbytes, per_type + part.nbytes
                same &= bool(np.array_equal(np.asarray(part).view(np.uint32), want.view(np.uint32)))
        rows.append({"dataset": name, "run": f"feature tables k={k}", "padded_bytes": padded,
                     "per_type_bytes": per_type})
        print(f"{name:<18} k={k} feature tables: {padded / k / 2**20:.1f} MiB a part padded, "
              f"{per_type / k / 2**20:.1f} MiB per type ({per_type / padded:.2f}x)", flush=True)
        checks.append(check(f"{name} k={k}: per-type rows read back bit for bit", same, "every part"))
    return rows, checks


def reported(name: str, label: str, res: dict[str, Any]) -> Check:
    """Print one run's line (test accuracy at the best validation epoch) and return its
    correctness check: the loss goes down."""
    print(f"{name:<18} {label:<34} test {100 * res['test_at_best_val']:5.1f}% at best val "
          f"{100 * res['best_val_acc']:5.1f}% (epoch {res['best_epoch']}), {res['seconds']:.1f} s", flush=True)
    return check(f"{name} {label}: the loss goes down", res["loss_last"] < res["loss_first"],
                 f"{res['loss_first']:.3f} -> {res['loss_last']:.3f}")


def arch_overrides(graph: Graph) -> dict[str, list[str]]:
    """Config overrides of our two typed models on ``graph``."""
    types, rels = len(graph.node_type_names), len(graph.edge_type_names)
    return {"R-GCN": [f"model.options={{node_types: {types}, relations: {rels}, bases: 2}}"],
            "hsage": ["model.arch=hsage", f"model.options={{node_types: {types}, relation_dst: "
                      f"{relation_dst(graph.node_type_names, graph.edge_type_names)}}}"]}


def seeds_rows(name: str, smoke: bool, tag: str, seeds: int, reference: bool = True,
               workers: tuple[int, ...] = ()) -> tuple[dict[str, Any], list[Check]]:
    """The reference and our two models in one process (and on each of ``workers`` Ray
    worker counts), each trained with ``seeds`` seeds: per-seed test accuracy at the best
    validation epoch, its mean and spread per run, each one-process model's gap of the
    means to the reference and each worker run's gap to its model's one-process run, with
    standard errors."""
    from gnntrain.data import load_dataset
    from gnntrain.runtime.cluster import ray_session
    from gnntrain.runtime.worker_pool import reuse_workers

    base = ["train.eval_every=5", "cluster.workers=1", "partition.parts=1", *(SMOKE if smoke else [])]
    cfg0 = bench_config(f"{name}.yaml", base, tag)
    graph = load_dataset(cfg0.dataset)
    runs: dict[str, list[dict[str, Any]]] = {}
    checks: list[Check] = []
    for i in range(seeds):
        sd = cfg0.train.seed + i
        got = {"pyg full-batch R-GCN": pyg_reference(cfg0.with_overrides([f"train.seed={sd}"]), graph)} \
            if reference else {}
        for arch, opts in arch_overrides(graph).items():
            got[f"ours, {arch}, 1 process"] = ours(bench_config(f"{name}.yaml", [
                *base, *opts, f"train.seed={sd}"], tag), graph, 1)
        for label, r in got.items():
            runs.setdefault(label, []).append({"seed": sd, **r})
            checks.append(reported(name, f"seed {sd} {label}", r))
    for k in workers:
        with ray_session(cfg0.cluster, k), reuse_workers():  # one group of k across seeds and models
            for i in range(seeds):
                sd = cfg0.train.seed + i
                for arch, opts in arch_overrides(graph).items():
                    label = f"ours, {arch}, {k} Ray workers"
                    r = ours(bench_config(f"{name}.yaml", [*base, *opts, f"train.seed={sd}", f"cluster.workers={k}",
                                                           f"partition.parts={k}"], tag), graph, k)
                    runs.setdefault(label, []).append({"seed": sd, **r})
                    checks.append(reported(name, f"seed {sd} {label}", r))
    acc = {label: spread([100 * r["test_at_best_val"] for r in rows]) for label, rows in runs.items()}
    summary: dict[str, Any] = {label: a.to_dict() for label, a in acc.items()}
    for label, a in acc.items():
        print(f"{name:<18} {label:<28} over {a.n} seeds: test {a.mean:5.1f}% (std {a.std:.1f}, "
              f"min {a.min:.1f}, max {a.max:.1f})")
    ref = acc.get("pyg full-batch R-GCN")
    for label, a in acc.items():
        if label.endswith("Ray workers"):
            base_label = label.rsplit(",", 1)[0] + ", 1 process"
            diff, se = gap(a, acc[base_label])
            summary[label]["gap_to_one_process_points"], summary[label]["gap_standard_error_points"] = diff, se
            print(f"{name:<18} {label:<28} mean gap to one process {diff:+.1f} points (standard error {se:.1f})")
        elif ref is not None and a is not ref:
            diff, se = gap(a, ref)
            summary[label]["gap_to_reference_points"], summary[label]["gap_standard_error_points"] = diff, se
            print(f"{name:<18} {label:<28} mean gap to the reference {diff:+.1f} points (standard error {se:.1f})")
    return {"dataset": name, "runs": runs, "summary": summary}, checks


def run_dataset(name: str, smoke: bool, tag: str, reference: bool = True,
                workers: tuple[int, ...] = (2, 4)) -> tuple[list[dict[str, Any]], list[Check]]:
    from gnntrain.data import load_dataset
    from gnntrain.runtime.cluster import ray_session
    from gnntrain.runtime.worker_pool import reuse_workers

    base = ["train.eval_every=5"]
    if smoke:
        base += [*SMOKE, "model.options={node_types: 4, bases: 2}"]
    cfg1 = bench_config(f"{name}.yaml", [*base, "cluster.workers=1", "partition.parts=1"], tag)
    graph = load_dataset(cfg1.dataset)
    rows, checks = partition_rows(name, cfg1, graph, workers)

    def add(label: str, res: dict[str, Any]) -> None:
        rows.append({"dataset": name, "run": label, **res})
        checks.append(reported(name, label, res))

    archs = arch_overrides(graph)
    if reference:
        add("pyg full-batch R-GCN", pyg_reference(cfg1, graph))
    for arch, opts in archs.items():
        add(f"ours, {arch}, 1 process", ours(bench_config(f"{name}.yaml", [
            *base, *opts, "cluster.workers=1", "partition.parts=1"], tag), graph, 1))
    for k in workers:
        with ray_session(cfg1.cluster, k), reuse_workers():
            for arch, opts in archs.items():
                cfg_k = bench_config(f"{name}.yaml", [*base, *opts, f"cluster.workers={k}",
                                                      f"partition.parts={k}"], tag)
                add(f"ours, {arch}, {k} Ray workers", ours(cfg_k, graph, k))
    sage = bench_config(f"{name}.yaml", [*base, "cluster.workers=1", "partition.parts=1",
                                         "model.arch=sage", "model.options={}"], tag)
    add("ours, GraphSAGE (types ignored)", ours(sage, graph, 1))
    evaluation_lines(name, [r for r in rows if "run" in r])
    return rows, checks


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="a small synthetic typed graph (seconds)", seeds=0,
                      seeds_help="instead of the usual rows: the reference and the one-process runs (and the "
                         "--workers runs) over N seeds (>= 2)")
    ap.add_argument("--datasets", default="acm,dblp", help="comma-separated typed configs")
    ap.add_argument("--no-reference", action="store_true", help="skip the PyG full-batch reference")
    ap.add_argument("--workers", default=None,
                    help="comma-separated Ray worker counts (default 2,4; with --seeds, none unless given)")
    args = ap.parse_args(argv)
    if args.seeds == 1 or args.seeds < 0:
        ap.error(f"--seeds={args.seeds}: give at least 2 (or leave it out)")
    names = ["synthetic-hetero"] if args.smoke else [d.strip() for d in args.datasets.split(",") if d.strip()]
    tag = "typed-smoke" if args.smoke else "typed-" + "-".join(names)
    out: dict[str, Any] = {"machine": machine(), "argv": sys.argv[1:], "rows": [],
                           "published_han_micro_f1": PUBLISHED_HAN}
    checks: list[Check] = []
    workers = tuple(int(k) for k in (args.workers or ("" if args.seeds else "2,4")).split(",") if k.strip())
    if args.seeds:
        tag += f"-seeds{args.seeds}" + ("-ours" if args.no_reference else "") + \
            "".join(f"-w{k}" for k in workers)
        out["seeds"] = []
    for name in names:
        if args.seeds:
            res, c = seeds_rows(name, args.smoke, tag, args.seeds, reference=not args.no_reference,
                                workers=workers)
            out["seeds"].append(res)
            checks += c
            continue
        rows, c = run_dataset(name, args.smoke, tag, reference=not args.no_reference, workers=workers)
        out["rows"] += rows
        checks += c
    out["loadavg_after"] = os.getloadavg()[0]
    return finish("typed", checks, out, out_path(tag))


if __name__ == "__main__":
    sys.exit(main())

"""Link prediction: accuracy against a full-batch PyG GAE, sampler throughput against DGL,
bytes of a 2-worker run, and the bias of in-batch negatives.

    python -m bench.link                  # ca-HepPh 85/5/10 (datasets/ca-HepPh-link.yaml)
    python -m bench.link --smoke          # 1,500-node synthetic graph, one process, no Ray (< 1 min)
    python -m bench.link --only throughput,negatives

Sections, all in one run on the same split (the config's seeded random split):

* ``accuracy`` -- test AUC and Hits@50 after the config's epochs of
  ``pyg GAE full-batch``: PyG ``SAGEConv`` layers (the config's width, depth, dropout) over
  the whole training graph, dot-product decoder, binary cross-entropy with one uniform
  negative per positive, Adam at the config's learning rate, the same epochs and the same
  batches of positive edges per epoch (the encoder runs over the whole graph every step,
  as in OGB's link examples) -- against ours in one process and on 2 Ray workers, with the
  sampled evaluation and with the config's exact layer-wise evaluation, and one process with
  twice the batch (``sampler.batch_size`` is per worker, so 2 workers take half the steps of
  twice the size). The reference's Hits@50 is bootstrapped over the test negatives (and
  with ``--reference-seeds N`` repeated over seeds): that spread is the noise any single
  figure carries.
* ``seeds`` -- the reference and ours computing the same thing (every neighbour in
  training, target edges left in message passing, exact layer-wise evaluation), each
  trained with ``--seeds`` seeds (default 3; 2 with ``--smoke``): per-seed test Hits@50 and
  AUC, their means and standard deviations over seeds, and the gap of the means with its
  standard error. A single seed's Hits@50 moves by several points from seed to seed.
  ``--first-seed K --pool-with bench/out/link.json`` adds seeds to an earlier run's and
  summarises them all.
* ``throughput`` -- training edges per second of our link batches (the task's batches of
  positives plus uniform negatives, sampled 3 hops with their target edges excluded)
  against DGL 2.1's ``as_edge_prediction_sampler`` + ``negative_sampler.Uniform``
  (``bench/_dgl_link.py`` under ``$GNNTRAIN_DGL_PYTHON``), at the same fanouts, batch,
  negatives and one thread, alternately ``--rounds`` times (best round of each kept, all
  printed). Without ``GNNTRAIN_DGL_PYTHON`` the DGL row is absent.
* ``comm`` -- the 2-worker run's bytes by category and worker (training epochs and
  evaluation), and one simulated epoch (the runtime's own counters, peers in-process) with
  uniform and with in-batch negatives: in-batch negatives add no node to a batch, so the
  difference is what the uniform negatives' endpoints cost in sampling and feature bytes.
  The remote share of negatives: drawn negative endpoints owned by another worker over
  all negative endpoints, from the same epoch's batches.
* ``negatives`` -- the bias of ``negatives: in_batch`` (and ``degree``) against
  ``uniform``: the mean training degree of the drawn negative destinations over that of
  uniform draws, and test AUC / Hits@50 of the same model trained the same epochs with
  uniform and with in-batch negatives.

Exit status 1 when a correctness check fails (``bench.harness.verdict``): every training lowers
its loss, the 2-worker run moves sample and feature bytes, the uniform negatives add
bytes. The accuracy gap (target: within 1 point of the reference) and the throughput
ratio (target >= 1.5x DGL) are reported. JSON: bench/out/link.json (``link-smoke.json``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import torch
import torch.nn.functional as F

from bench.harness.cli import bench_parser, csv_list
from bench.harness.paths import OUT, bench_config, out_path
from bench.harness.peer import dgl_python, run_peer
from bench.harness.runs import quiet, read_metrics
from bench.harness.stats import gap, spread
from bench.harness.system import machine
from bench.harness.verdict import Check, check, finish
from gnntrain.config import RunConfig
from gnntrain.runtime.driver import advance
from gnntrain.tasks import LinkPrediction, build_task, ranking
from partition.graph import Graph

SECTIONS = ("accuracy", "seeds", "throughput", "comm", "negatives")
CONFIG = "ca-HepPh-link.yaml"
SMOKE = ["dataset={name: link-smoke, source: synthetic, synthetic: {nodes: 1500, avg_degree: 10, "
         "features: 16, classes: 4, seed: 0}}", "train.epochs=2", "train.eval_every=1",
         "sampler.batch_size=1024", "model.hidden=32"]
class Throughput(TypedDict):
    """The throughput workload, as also handed to the DGL peer."""

    fanouts: list[int]
    batch_size: int
    negatives: int
    threads: int


THROUGHPUT: Throughput = {"fanouts": [15, 10, 5], "batch_size": 1024, "negatives": 1, "threads": 1}


def loaded_task(cfg: RunConfig) -> tuple[LinkPrediction, Graph]:
    """The config's task with its split loaded, and the message-passing graph (what
    ``run_training`` builds for the same config: the split is seeded)."""
    task = build_task(cfg.task.kind, dict(cfg.task.options))
    assert isinstance(task, LinkPrediction)
    return task, task.load_graph(cfg.dataset)


def _metrics(task: LinkPrediction, pos: np.ndarray, neg: np.ndarray) -> dict[str, float]:
    return {"hits": ranking.hits_at_k(pos, neg, task.hits_k), "auc": ranking.auc(pos, neg),
            "mrr": ranking.mrr(pos, neg)}


# -- (a) accuracy -------------------------------------------------------------------------
def pyg_reference(cfg: RunConfig, task: LinkPrediction, g: Graph, seed: int,
                  per_epoch: bool = False) -> dict[str, Any]:
    """Full-batch GAE: PyG SAGEConv encoder over the training graph, dot decoder, BCE with
    one uniform negative per positive, the config's batches of positive edges per epoch.
    The test figures are the last epoch's; with ``per_epoch`` every epoch is evaluated,
    training stops as ``train.patience`` says (as ours does) and ``best`` holds the figures
    of the best validation epoch."""
    from torch_geometric.nn import SAGEConv

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    split = task.split
    assert split is not None
    n = g.num_nodes
    ei = torch.from_numpy(g.edge_index())
    x = torch.from_numpy(g.x)
    dims = [g.num_features] + [cfg.model.hidden] * cfg.model.layers
    convs = torch.nn.ModuleList(SAGEConv(dims[i], dims[i + 1], aggr="mean")
                                for i in range(cfg.model.layers))
    opt = torch.optim.Adam(convs.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)

    def encode(train: bool) -> torch.Tensor:
        h = x
        for i, conv in enumerate(convs):
            h = conv(h, ei)
            if i < len(convs) - 1:
                h = F.dropout(F.relu(h), cfg.model.dropout, train)
        return h

    def evaluate() -> tuple[dict[str, Any], dict[str, tuple[np.ndarray, np.ndarray]]]:
        convs.eval()
        with torch.no_grad():
            h = encode(False).double()
        got: dict[str, Any] = {}
        scores = {}
        for s in ("val", "test"):
            pos, neg = (torch.from_numpy(a) for a in (split.pos(s), split.neg(s)))
            sp = (h[pos[:, 0]] * h[pos[:, 1]]).sum(-1).numpy()
            sn = (h[neg[:, 0]] * h[neg[:, 1]]).sum(-1).numpy()
            scores[s] = (sp, sn)
            got.update({f"{s}_{k}": v for k, v in _metrics(task, sp, sn).items()})
        return got, scores

    losses = []
    t0 = time.perf_counter()
    num_pos = ei.shape[1]
    bs = cfg.sampler.batch_size
    best: dict[str, Any] | None = None  # the best validation epoch's figures
    best_val: float | None = None
    since_best = 0
    for epoch in range(cfg.train.epochs):
        convs.train()
        total = 0.0
        for b in torch.randperm(num_pos, generator=gen).split(bs):
            src, dst = ei[0, b], ei[1, b]
            neg = torch.randint(0, n, (b.numel() * task.num_negatives,), generator=gen)
            h = encode(True)
            s_pos = (h[src] * h[dst]).sum(-1)
            s_neg = (h[src.repeat_interleave(task.num_negatives)] * h[neg]).sum(-1)
            loss = (F.binary_cross_entropy_with_logits(s_pos, torch.ones_like(s_pos), reduction="sum")
                    + F.binary_cross_entropy_with_logits(s_neg, torch.zeros_like(s_neg), reduction="sum")
                    ) / (s_pos.numel() + s_neg.numel())
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * b.numel()
        losses.append(total / num_pos)
        if per_epoch:  # ours' early-stopping rule (gnntrain.runtime.driver.advance)
            got, _ = evaluate()
            best_val, since_best, improved = advance(best_val, since_best, got, "val_hits")
            if improved:
                best = {**got, "epoch": epoch}
            if cfg.train.patience is not None and since_best >= cfg.train.patience:
                break
    got, scores = evaluate()
    res: dict[str, Any] = {"seconds": time.perf_counter() - t0, "loss_first": losses[0],
                           "loss_last": losses[-1], "steps": -(-num_pos // bs), "epochs": len(losses), **got}
    if best is not None:
        res["best"] = best
    res["_scores"] = scores["test"]
    return res


def bootstrap_hits(task: LinkPrediction, pos: np.ndarray, neg: np.ndarray, reps: int = 200) -> float:
    """Standard deviation of Hits@K over bootstrap resamples of the negatives."""
    rng = np.random.default_rng(0)
    return float(np.std([ranking.hits_at_k(pos, neg[rng.integers(0, neg.size, neg.size)], task.hits_k)
                         for _ in range(reps)]))


def ours(cfg: RunConfig, workers: int) -> dict[str, Any]:
    from gnntrain.runtime.coordinator import run_training

    t0 = time.perf_counter()
    s = run_training(cfg, single_process=workers == 1, progress=False, console=quiet())
    eps = read_metrics(s)
    last = [e for e in eps if "test_hits" in e][-1]
    comm = json.loads((Path(s["run_dir"]) / "comm.json").read_text())
    return {"test_hits": last["test_hits"], "test_auc": last["test_auc"], "test_mrr": last["test_mrr"],
            "val_hits": last["val_hits"], "val_auc": last["val_auc"], "steps": eps[-1]["steps"],
            "loss_first": eps[0]["loss"], "loss_last": eps[-1]["loss"], "epochs": len(eps),
            "seconds": time.perf_counter() - t0, "eval_mode": last.get("eval_mode"), "comm": comm}


def accuracy_section(cfg0: RunConfig, base: list[str], smoke: bool, tag: str, ref_seeds: int
                     ) -> tuple[list[dict[str, Any]], list[Check], dict[str, Any]]:
    from gnntrain.runtime.cluster import ray_session

    task, g = loaded_task(cfg0)
    rows: list[dict[str, Any]] = []
    checks: list[Check] = []
    bs = cfg0.sampler.batch_size

    def add(label: str, res: dict[str, Any]) -> dict[str, Any]:
        row = {"run": label, **{k: v for k, v in res.items() if not k.startswith("_")}}
        rows.append(row)
        print(f"{label:<52} test Hits@{task.hits_k} {res['test_hits']:.3f}  AUC {res['test_auc']:.4f}  "
              f"(val Hits {res['val_hits']:.3f}, {res['steps']} steps/epoch, {res['seconds']:.0f} s)",
              flush=True)
        checks.append(check(f"{label}: the loss goes down", res["loss_last"] < res["loss_first"],
                            f"{res['loss_first']:.4f} -> {res['loss_last']:.4f}"))
        return row

    seeds = [cfg0.train.seed + i for i in range(ref_seeds)]
    refs = []
    for sd in seeds:
        r = pyg_reference(cfg0, task, g, sd)
        refs.append(add(f"pyg GAE full-batch (seed {sd})", r))
        if sd == seeds[0]:
            boot = bootstrap_hits(task, *r["_scores"])
    variants: list[tuple[str, list[str], int]] = [
        ("ours, 1 process, sampled eval", ["train.eval=sampled"], 1),
        ("ours, 1 process, layer-wise eval (the config)", ["train.eval=full"], 1),
        (f"ours, 1 process, batch {2 * bs}, layer-wise eval", ["train.eval=full",
                                                               f"sampler.batch_size={2 * bs}"], 1),
        ("ours, 2 Ray workers, sampled eval", ["train.eval=sampled"], 2),
        ("ours, 2 Ray workers, layer-wise eval", ["train.eval=full"], 2),
    ]
    if smoke:  # one process only: starting Ray workers takes most of a minute here
        variants = variants[:2]
    two_worker: dict[str, Any] = {}
    with contextlib.nullcontext() if smoke else ray_session(cfg0.cluster, 2):
        for label, extra, workers in variants:
            cfg = bench_config(CONFIG, [*base, *extra, f"cluster.workers={workers}",
                                        f"partition.parts={workers}"], tag)
            res = ours(cfg, workers)
            comm = res.pop("comm")
            add(label, res)
            if workers == 2 and extra == ["train.eval=full"]:
                two_worker = comm
    hits = np.array([r["test_hits"] for r in refs])
    auc = np.array([r["test_auc"] for r in refs])
    summary = {"reference_test_hits_mean": float(hits.mean()), "reference_test_hits_seed_std": float(hits.std()),
               "reference_test_auc_mean": float(auc.mean()), "reference_hits_bootstrap_std": boot}
    print(f"reference over {len(refs)} seed(s): test Hits@{task.hits_k} {hits.mean():.3f} "
          f"(seed std {hits.std():.3f}, bootstrap std over the test negatives {boot:.3f}), "
          f"AUC {auc.mean():.4f}", flush=True)
    for r in rows[len(refs):]:
        r["hits_gap_points"] = 100 * (r["test_hits"] - hits.mean())
        r["auc_gap_points"] = 100 * (r["test_auc"] - auc.mean())
        print(f"  {r['run']:<52} Hits {r['hits_gap_points']:+6.1f} points, AUC "
              f"{r['auc_gap_points']:+5.2f} points against the reference mean", flush=True)
    return rows, checks, {"summary": summary, "two_worker_comm": two_worker}


# -- seeds: the matched computation over several seeds -----------------------------------
MATCHED = ["sampler.fanouts=[-1,-1]", "train.eval=full", "task.options.exclude_targets=false"]
"""Ours computing what the reference computes: every neighbour in training, target edges
left in message passing, exact layer-wise evaluation (only the random streams differ)."""


def earlier_seed_runs(path: Path | None) -> dict[str, list[dict[str, Any]]]:
    """The per-seed rows of an earlier run's ``seeds`` section (its JSON), to pool with."""
    if path is None:
        return {"reference": [], "ours": []}
    earlier = json.loads(path.read_text()).get("seeds")
    if not isinstance(earlier, dict) or earlier.get("overrides") != MATCHED:
        raise SystemExit(f"--pool-with {path}: no seeds section run with the overrides {MATCHED}")
    return {name: list(earlier["runs"][name]) for name in ("reference", "ours")}


def seeds_section(cfg0: RunConfig, seeds: int, first: int = 0,
                  pool_with: Path | None = None) -> tuple[dict[str, Any], list[Check]]:
    """The reference and ours (:data:`MATCHED`) trained with ``seeds`` seeds each (the
    config's seed + ``first`` onwards): per-seed test Hits@K and AUC, their means and
    spreads, and the gap of the means, over these seeds and those of ``pool_with``."""
    task, g = loaded_task(cfg0.with_overrides(MATCHED))
    runs = earlier_seed_runs(pool_with)
    checks: list[Check] = []
    new = [cfg0.train.seed + first + i for i in range(seeds)]
    if clash := sorted({r["seed"] for r in runs["ours"]} & set(new)):
        raise SystemExit(f"--pool-with {pool_with}: seeds {clash} ran there already; pass --first-seed")
    for sd in new:
        ref = pyg_reference(cfg0, task, g, sd)
        res = ours(cfg0.with_overrides([*MATCHED, f"train.seed={sd}",
                                        f"train.eval_every={cfg0.train.epochs}"]), 1)
        res.pop("comm")
        for name, r in (("reference", ref), ("ours", res)):
            runs[name].append({"seed": sd, **{k: r[k] for k in ("test_hits", "test_auc", "val_hits",
                                                                 "loss_first", "loss_last", "seconds")}})
            checks.append(check(f"seeds: {name} seed {sd} lowers its loss", r["loss_last"] < r["loss_first"],
                                f"{r['loss_first']:.4f} -> {r['loss_last']:.4f}"))
            print(f"  seed {sd} {name:<9} test Hits@{task.hits_k} {r['test_hits']:.3f}  AUC "
                  f"{r['test_auc']:.4f}  val Hits {r['val_hits']:.3f}  loss {r['loss_last']:.4f} "
                  f"({r['seconds']:.0f} s)", flush=True)
    summary: dict[str, Any] = {}
    for name, rows in runs.items():
        h, a = (spread([r[k] for r in rows]) for k in ("test_hits", "test_auc"))
        summary[name] = {"hits_mean": h.mean, "hits_std": h.std, "auc_mean": a.mean}
        print(f"{name:<9} over {h.n} seeds: test Hits@{task.hits_k} {h.mean:.3f} (std "
              f"{h.std:.3f}, min {h.min:.3f}, max {h.max:.3f}), AUC {a.mean:.4f}")
    diff, se = gap(*(spread([r["test_hits"] for r in runs[n]]) for n in ("ours", "reference")))
    summary["hits_gap_points"], summary["hits_gap_standard_error_points"] = 100 * diff, 100 * se
    print(f"mean test Hits@{task.hits_k} gap {100 * diff:+.1f} points (standard error {100 * se:.1f}); AUC gap "
          f"{100 * (summary['ours']['auc_mean'] - summary['reference']['auc_mean']):+.2f} points")
    return {"overrides": MATCHED, "runs": runs, "summary": summary}, checks


# -- (b) throughput -----------------------------------------------------------------------
def ours_throughput(task: LinkPrediction, g: Graph, batches: int, warmup: int) -> dict[str, Any]:
    """Our link batches (positives + uniform negatives, targets excluded), sampled on one thread."""
    from partition import Part
    from samplers import CSRSource, NeighborSampler

    torch.set_num_threads(THROUGHPUT["threads"])
    part = Part.whole_graph(g)
    sampler = NeighborSampler(CSRSource(g.indptr, g.indices), list(THROUGHPUT["fanouts"]))
    steps = -(-g.num_edges // THROUGHPUT["batch_size"])
    done = edges = inputs = 0
    sec = 0.0
    epoch = 0
    while done < batches:
        t0 = time.perf_counter()
        seeds = task.epoch_batches(part, steps, seed=0, epoch=epoch, rank=0, shuffle=True)
        per_batch = (time.perf_counter() - t0) / steps  # building the batches: negatives, unique ids
        for i, sb in enumerate(seeds):
            if epoch == 0 and i < warmup:
                continue
            t1 = time.perf_counter()
            b = sampler.sample(sb.nodes, i, sb.exclude)
            sec += time.perf_counter() - t1 + per_batch
            edges += int((sb.payload["label"] == 1).sum())
            inputs += int(b.input_nodes.size)
            done += 1
            if done == batches:
                break
        epoch += 1
    return {"label": "ours: LinkPrediction batches + NeighborSampler", "batches": done, "edges": edges,
            "seconds": sec, "edges_per_s": edges / sec, "input_nodes_per_batch": inputs / done}


def dgl_throughput(python: str, g: Graph, batches: int, warmup: int, tag: str) -> dict[str, Any]:
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"link-graph-{tag}.npz"
    np.savez(path, indptr=g.indptr, indices=g.indices)
    settings = {**THROUGHPUT, "batches": batches, "warmup": warmup, "seed": 0}
    res = run_peer(python, "_dgl_link.py", path, settings,
                   env={"OMP_NUM_THREADS": str(THROUGHPUT["threads"])})
    res["label"] = f"DGL {res['dgl']}: as_edge_prediction_sampler + Uniform"
    return res


def throughput_section(cfg0: RunConfig, smoke: bool, tag: str, notes: list[str],
                       rounds: int) -> list[dict[str, Any]]:
    """Ours and DGL alternately ``rounds`` times (other processes share the machine: the
    best round of each is the one least slowed by them); every round is kept."""
    cfg = bench_config(CONFIG, [*(SMOKE if smoke else []), "task.options.negatives=uniform",
                                f"task.options.num_negatives={THROUGHPUT['negatives']}",
                                "task.options.exclude_targets=true"], tag)  # as DGL's reverse_id
    task, g = loaded_task(cfg)
    batches, warmup = (8, 2) if smoke else (60, 3)
    python = dgl_python()
    if not python:
        notes.append("DGL throughput row absent: set GNNTRAIN_DGL_PYTHON to a Python with dgl 2.1")
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "dgl": []}
    for _ in range(rounds):
        runs["ours"].append(ours_throughput(task, g, batches, warmup))
        if python and len(runs["dgl"]) == len(runs["ours"]) - 1:
            try:
                runs["dgl"].append(dgl_throughput(python, g, batches, warmup, tag))
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
                notes.append(f"DGL throughput row absent: {e}")
    rows = []
    for name in ("ours", "dgl"):
        if runs[name]:
            best = max(runs[name], key=lambda r: r["edges_per_s"])
            rows.append({**best, "rounds_edges_per_s": [r["edges_per_s"] for r in runs[name]]})
    base = rows[-1]["edges_per_s"] if len(rows) > 1 else rows[0]["edges_per_s"]
    print(f"fanouts {THROUGHPUT['fanouts']}, batch {THROUGHPUT['batch_size']} positives + "
          f"{THROUGHPUT['negatives']} uniform negative each, {THROUGHPUT['threads']} thread, {batches} "
          f"batches, best of {rounds} alternating round(s):")
    for r in rows:
        r["ratio_to_dgl"] = r["edges_per_s"] / base if len(rows) > 1 else None
        ratio = f"{r['ratio_to_dgl']:.2f}x DGL" if r["ratio_to_dgl"] is not None else "(no DGL row)"
        every = ", ".join(f"{v:,.0f}" for v in r["rounds_edges_per_s"])
        print(f"  {r['label']:<52} {r['edges_per_s']:>10,.0f} edges/s  {ratio}  "
              f"({r['input_nodes_per_batch']:,.0f} input nodes/batch; rounds {every})", flush=True)
    return rows


# -- (c) communication --------------------------------------------------------------------
def negative_share(cfg: RunConfig, task: LinkPrediction, g: Graph, k: int) -> dict[str, int]:
    """Negative endpoints of one epoch's batches on ``k`` parts (the partition set training
    uses), and those a part other than the batch's owns; positive sources beside them."""
    from gnntrain.engine import steps_per_epoch
    from partition import build_partition_set

    pset = build_partition_set(g, cfg.partition)
    placed = task.placed(pset.new_id_map())
    parts = [pset.load_part(p) for p in range(k)]
    steps = steps_per_epoch([placed.num_train_examples(p) for p in parts], cfg.sampler.batch_size)
    out = dict.fromkeys(("neg_endpoints", "neg_remote", "neg_dst", "neg_dst_remote", "pos",
                         "pos_src_remote"), 0)

    def remote(ids: np.ndarray, part: Any) -> int:
        return int(((ids < part.start) | (ids >= part.stop)).sum())

    for part in parts:
        for sb in placed.epoch_batches(part, steps, seed=cfg.train.seed, epoch=0, rank=part.part_id,
                                       shuffle=True):
            if sb.empty:
                continue
            p = sb.payload
            neg = p["label"] == 0
            ends = sb.nodes[np.concatenate([p["src"][neg], p["dst"][neg]])]
            dst, src_pos = sb.nodes[p["dst"][neg]], sb.nodes[p["src"][~neg]]
            out["neg_endpoints"] += int(ends.size)
            out["neg_remote"] += remote(ends, part)
            out["neg_dst"] += int(dst.size)
            out["neg_dst_remote"] += remote(dst, part)
            out["pos"] += int(src_pos.size)
            out["pos_src_remote"] += remote(src_pos, part)
    return out


def simulate_link(cfg: RunConfig, k: int) -> dict[str, Any]:
    """One epoch on ``k`` in-process workers with the runtime's counters (no training), and
    the remote share of that epoch's negatives."""
    from gnntrain.simulate import simulate_k

    task, g = loaded_task(cfg)
    return {**simulate_k(cfg, g, k, task=task), **negative_share(cfg, task, g, k)}


def _by_category_worker(snap: dict[str, Any]) -> dict[str, list[int]]:
    return {c: [int(v) for v in np.asarray(m).sum(axis=1)] for c, m in snap["matrix_by_category"].items()}


def comm_section(cfg0: RunConfig, base: list[str], tag: str, two_worker: dict[str, Any]) -> dict[str, Any]:
    from gnntrain.report import fmt_bytes

    out: dict[str, Any] = {}
    if two_worker:
        epochs = two_worker["per_epoch"]
        train = {c: np.sum([_by_category_worker(e)[c] for e in epochs], axis=0).tolist()
                 for c in epochs[0]["matrix_by_category"]}
        evals = [e["evaluation"] for e in epochs if "evaluation" in e]
        ev = ({c: np.sum([_by_category_worker(e)[c] for e in evals], axis=0).tolist()
               for c in evals[0]["matrix_by_category"]} if evals else {})
        out["run_2_workers"] = {"epochs": len(epochs), "train_by_category_worker": train,
                                "eval_by_category_worker": ev}
        print(f"2 Ray workers, {len(epochs)} epochs, bytes sent by category x worker (training; evaluation):")
        for c, v in train.items():
            e = ev.get(c, [0, 0])
            if sum(v) or sum(e):
                print(f"  {c:<15} " + "  ".join(f"w{i} {fmt_bytes(b):>9}" for i, b in enumerate(v))
                      + "   eval " + "  ".join(f"w{i} {fmt_bytes(b):>9}" for i, b in enumerate(e)), flush=True)
    sims = {}
    for neg in ("uniform", "in_batch"):
        cfg = bench_config(CONFIG, [*base, f"task.options.negatives={neg}", "cluster.workers=2",
                                    "partition.parts=2"], tag)
        r = simulate_link(cfg, 2)
        sims[neg] = {k: r[k] for k in ("bytes_by_category", "bytes_total", "steps", "input_nodes",
                                       "neg_endpoints", "neg_remote", "neg_dst", "neg_dst_remote", "pos",
                                       "pos_src_remote")}
    u, ib = sims["uniform"], sims["in_batch"]
    extra = {c: u["bytes_by_category"][c] - ib["bytes_by_category"][c] for c in ("sample", "feature")}
    out.update({"simulated_epoch": sims, "uniform_negative_bytes": extra,
                "remote_share_negative_endpoints": u["neg_remote"] / max(1, u["neg_endpoints"]),
                "remote_share_negative_destinations": u["neg_dst_remote"] / max(1, u["neg_dst"]),
                "remote_share_positive_sources": u["pos_src_remote"] / max(1, u["pos"])})
    print(f"one simulated epoch on 2 workers: uniform negatives {fmt_bytes(u['bytes_total'])}, in-batch "
          f"{fmt_bytes(ib['bytes_total'])}; the uniform negatives' endpoints cost "
          f"{fmt_bytes(extra['sample'])} sample + {fmt_bytes(extra['feature'])} feature bytes "
          f"({u['input_nodes']:,} vs {ib['input_nodes']:,} input nodes)", flush=True)
    print(f"remote share of negatives (uniform): endpoints {out['remote_share_negative_endpoints']:.3f}, drawn "
          f"destinations {out['remote_share_negative_destinations']:.3f} (positive sources: "
          f"{out['remote_share_positive_sources']:.3f})", flush=True)
    return out


# -- (d) bias of in-batch negatives -------------------------------------------------------
def negatives_section(cfg0: RunConfig, base: list[str], tag: str,
                      uniform_run: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[Check]]:
    from partition import Part

    rows: list[dict[str, Any]] = []
    checks: list[Check] = []
    task0, g = loaded_task(cfg0)
    deg = g.in_degrees().astype(np.float64)
    uniform_mean = float(deg.mean())
    for neg in ("uniform", "degree", "in_batch"):
        cfg = bench_config(CONFIG, [*base, f"task.options.negatives={neg}", "train.eval=full",
                                    "cluster.workers=1", "partition.parts=1"], tag)
        task, gg = loaded_task(cfg)
        part = Part.whole_graph(gg)
        steps = -(-gg.num_edges // cfg.sampler.batch_size)
        drawn = np.concatenate([sb.nodes[sb.payload["dst"][sb.payload["label"] == 0]]
                                for sb in task.epoch_batches(part, steps, seed=cfg.train.seed, epoch=0,
                                                             rank=0, shuffle=True)])
        ratio = float(deg[drawn].mean()) / uniform_mean
        if neg == "degree":  # its bias is measured; training with it is left out (time)
            rows.append({"negatives": neg, "mean_degree_ratio": ratio,
                         "share_of_negatives_on_top1pct_degree": float(
                             (deg[drawn] >= np.quantile(deg, 0.99)).mean())})
            print(f"negatives {neg:<9} mean degree of drawn negatives / uniform = {ratio:5.2f}", flush=True)
            continue
        if neg == "uniform" and uniform_run is not None:
            res = uniform_run
        else:
            res = ours(cfg, 1)
            res.pop("comm")
        row = {"negatives": neg, "mean_degree_ratio": ratio,
               "share_of_negatives_on_top1pct_degree": float(
                   (deg[drawn] >= np.quantile(deg, 0.99)).mean()),
               **{k: res[k] for k in ("test_hits", "test_auc", "val_hits", "loss_first", "loss_last")}}
        rows.append(row)
        print(f"negatives {neg:<9} mean degree of drawn negatives / uniform = {ratio:5.2f}  "
              f"(top-1% degree nodes: {100 * row['share_of_negatives_on_top1pct_degree']:.1f}% of "
              f"draws)  test Hits@{task0.hits_k} {res['test_hits']:.3f}  AUC {res['test_auc']:.4f}", flush=True)
        checks.append(check(f"negatives {neg}: the loss goes down", res["loss_last"] < res["loss_first"]))
    return rows, checks


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="a small synthetic graph (well under a minute)", seeds=3,
                      seeds_help="seeds of the reference and of ours in the seeds section (>= 2)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    ap.add_argument("--reference-seeds", type=int, default=1,
                    help="seeds of the PyG reference (its spread over seeds is printed)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating throughput rounds (best kept)")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="the seeds section's first seed, as an offset from the config's")
    ap.add_argument("--pool-with", type=Path, default=None, metavar="JSON",
                    help="an earlier bench/out/link.json whose seeds-section runs join this one's summary")
    args = ap.parse_args(argv)
    only = csv_list(args.only)
    if [s for s in only if s not in SECTIONS] or args.seeds < 2:
        ap.error(f"--only={args.only!r} (allowed {','.join(SECTIONS)}) and --seeds={args.seeds} (>= 2)")
    tag = "link-smoke" if args.smoke else "link"
    base = list(SMOKE) if args.smoke else []
    cfg0 = bench_config(CONFIG, [*base, "cluster.workers=1", "partition.parts=1"], tag)
    out: dict[str, Any] = {"machine": machine(), "argv": sys.argv[1:], "config": CONFIG, "notes": []}
    checks: list[Check] = []
    uniform_run: dict[str, Any] | None = None
    two_worker: dict[str, Any] = {}
    if "accuracy" in only:
        rows, c, extra = accuracy_section(cfg0, base, args.smoke, tag, args.reference_seeds)
        out["accuracy"], out["accuracy_summary"] = rows, extra["summary"]
        two_worker = extra["two_worker_comm"]
        checks += c
        uniform_run = next(r for r in rows if r["run"] == "ours, 1 process, layer-wise eval (the config)")
    if "seeds" in only:
        out["seeds"], c = seeds_section(cfg0, 2 if args.smoke else args.seeds, args.first_seed, args.pool_with)
        checks += c
    if "throughput" in only:
        out["throughput"] = tp = throughput_section(cfg0, args.smoke, tag, out["notes"],
                                                    1 if args.smoke else args.rounds)
        if len(tp) > 1:  # the same work: as many input nodes per batch (3 hops, same fanouts)
            a, b = tp[0]["input_nodes_per_batch"], tp[1]["input_nodes_per_batch"]
            checks.append(check("throughput: ours and DGL sample batches of the same size",
                                abs(a - b) <= 0.05 * b, f"{a:,.0f} vs {b:,.0f} input nodes per batch"))
    if "comm" in only:
        out["comm"] = comm_section(cfg0, base, tag, two_worker)
        if two_worker:
            tr = out["comm"]["run_2_workers"]["train_by_category_worker"]
            checks.append(check("2 workers: both send sample and feature bytes",
                                all(b > 0 for c in ("sample", "feature") for b in tr[c]), str(tr)))
        checks.append(check("uniform negatives add sample and feature bytes over in-batch ones",
                            all(v > 0 for v in out["comm"]["uniform_negative_bytes"].values()),
                            str(out["comm"]["uniform_negative_bytes"])))
    if "negatives" in only:
        out["negatives"], c = negatives_section(cfg0, base, tag, uniform_run)
        checks += c
    for n in out["notes"]:
        print(f"note: {n}")
    out["loadavg_after"] = os.getloadavg()[0]
    return finish("link", checks, out, out_path(tag))


if __name__ == "__main__":
    sys.exit(main())

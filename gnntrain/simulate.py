"""``python -m gnntrain.simulate``: what an epoch would move at k = 4, 8, ... 64 workers.

For each k it partitions the graph (or reuses the stored set), then runs every worker's
real sampler, cache and feature reader over one epoch of its seeds — the same code and
the same random streams as training, with peers called in-process instead of over Ray
— and counts every byte with the runtime's own counters. Nothing is trained; gradient
bytes come from the ring all-reduce formula for the configured model, as in a real run.

Example::

    python -m gnntrain.simulate --config datasets/synthetic-1m.yaml --parts 4,8,16,32,64
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console
from rich.table import Table

from gnntrain.config import ConfigError, RunConfig, load_config
from gnntrain.engine import EpochStats, steps_per_epoch
from gnntrain.models import block_needs
from gnntrain.report import fmt_bytes
from gnntrain.runtime.driver import epoch_record
from gnntrain.runtime.loopback import LoopbackGroup
from gnntrain.runtime.worker import Worker
from gnntrain.tasks import Task, build_task
from partition.graph import Graph

if TYPE_CHECKING:
    from partition import TrainingSet


def dry_epoch(worker: Worker, epoch: int, steps: int) -> dict[str, Any]:
    """Sample and fetch exactly as training's epoch ``epoch`` does, without training.

    Gradient traffic is added per step as training counts it (the all-reduce buffer:
    every gradient, the float buffers, the example count, loss and worker count), so the
    bytes equal a real epoch's. With a node embedding every step reads its input rows
    and sends zero gradients of the same shape to the owners (the table is in ``dry``
    mode: reads do not wait for updates and owners keep nothing), so the ``embedding``
    and ``embedding_grad`` bytes are a real epoch's too.
    """
    a = worker.access
    emb = a.embedding
    add_io = a.io_counters()
    batches, keys = worker.trainer.epoch_plan(epoch, steps)
    pipe = a.pipeline(worker.task, batches, keys, needs=block_needs(worker.model), prefetch=0)
    stats = EpochStats(epoch=epoch)
    model = worker.model
    grad_bytes = 4 * (sum(p.numel() for p in model.parameters())
                      + sum(b.numel() for b in model.buffers() if b.is_floating_point()) + 3)
    for item in pipe:
        stats.steps += 1
        stats.examples += int(item.batch.y.shape[0]) if item.batch is not None else 0
        stats.sample_s += item.sample_s
        stats.fetch_s += item.fetch_s
        stats.input_nodes += item.num_input
        stats.sampled_edges += item.num_edges
        a.comm.add_gradient(grad_bytes)
        if emb is not None:
            if item.batch is not None:
                assert item.input_nodes is not None
                rows = emb.read(item.input_nodes)
                emb.push(item.input_nodes, np.zeros_like(rows))
            emb.apply(0.0)  # the version moves on as in training (it travels in every read)
    add_io(stats)
    # no comm snapshot here: peers simulated after this one still ask it for rows
    return {"stats": stats.to_dict()}


def simulate_k(cfg: RunConfig, graph: Graph, k: int, *, epoch: int = 0,
               task: Task | None = None, one_cache_at_a_time: bool = False) -> dict[str, Any]:
    """One simulated epoch on ``k`` workers: bytes, shares, cache and balance figures.
    ``task`` (one whose ``load_graph`` made ``graph``, e.g. a link task holding its split)
    replaces ``task.kind``; it is placed on the partitioned ids. The graph is partitioned
    (or its stored set reused), then :func:`simulate_set` runs the epoch."""
    from partition import build_training_set

    cfg_k = cfg.with_overrides([f"partition.parts={k}", f"cluster.workers={k}"])
    t0 = time.perf_counter()
    pset = build_training_set(graph, cfg_k.partition)
    t_part = time.perf_counter() - t0
    out = simulate_set(cfg_k, pset, epoch=epoch, task=task, one_cache_at_a_time=one_cache_at_a_time)
    return {**out, "partition_s": t_part}


def simulate_set(cfg_k: RunConfig, pset: TrainingSet, *, epoch: int = 0, task: Task | None = None,
                 one_cache_at_a_time: bool = False) -> dict[str, Any]:
    """One simulated epoch on the ``k`` workers of a partition set (``cfg_k`` has
    ``partition.parts`` and ``cluster.workers`` equal to ``k``); the figures of
    :func:`simulate_k`, with ``partition_s`` 0.

    By default every worker fills its cache first (k threads, as a run does), then the
    epochs run: all k caches are alive at once. With ``one_cache_at_a_time`` each worker
    fills its cache, runs its epoch and drops the cache before the next worker starts
    (at k = 64 and 10M nodes the k caches together take ~18 GB). The counts are the same
    either way: a worker's cache depends on its own reads only, and peers serve from their
    own rows. The fill's bytes are never part of the epoch's.
    """
    k = pset.num_parts
    parts = [pset.load_part(p) for p in range(k)]  # typed rows per type, as workers hold them
    task = (task.placed(pset.new_id_map()) if task is not None
            else build_task(cfg_k.task.kind, dict(cfg_k.task.options)))
    group = LoopbackGroup(cfg_k, parts, np.asarray(pset.global_degrees()), int(pset.num_classes),
                          cfg_k.model.arch, task, node_types=pset.node_types())
    for w in group.workers:
        if w.access.embedding is not None:
            w.access.embedding.shard.dry = True
    try:
        t1 = time.perf_counter()
        steps = steps_per_epoch(group.train_counts, cfg_k.sampler.batch_size)
        if one_cache_at_a_time:
            caches, setup_bytes, results = _epochs_one_cache_at_a_time(group, epoch, steps)
        else:
            caches = group.call("setup_cache", phase="cache setup")
            setup = group.call("comm_snapshot", phase="accounting")
            setup_bytes = int(sum(np.asarray(s["bytes"]).sum() for s in setup))
            results = [dry_epoch(w, epoch, steps) for w in group.workers]
            for r, snap in zip(results, group.call("comm_snapshot", phase="accounting"), strict=True):
                r["comm"] = snap  # taken once every worker has run (peers serve each other)
        rec = epoch_record(epoch, results, k, time.perf_counter() - t1, task)
    finally:
        group.shutdown()
    train_counts = group.train_counts
    del group, parts
    gc.collect()  # the workers and their peers form cycles that hold the mapped parts
    return _figures(rec, results, k, steps, setup_bytes, caches, train_counts, int(pset.num_features))


def _epochs_one_cache_at_a_time(group: LoopbackGroup, epoch: int,
                                steps: int) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
    """(cache setups, fill bytes, per-worker epoch results): each worker fills its cache,
    runs its epoch and drops the cache; the fill's bytes and messages, counted on every
    worker (peers serve the fill's reads), are taken out of the epoch's snapshots."""
    cores = [w.access for w in group.workers]
    setup_b = np.zeros((len(cores), *cores[0].comm.bytes.shape), dtype=np.int64)
    setup_m = np.zeros_like(setup_b)
    caches, results = [], []
    for w, c in zip(group.workers, cores, strict=True):
        b0 = np.stack([x.comm.bytes for x in cores])
        m0 = np.stack([x.comm.messages for x in cores])
        caches.append(w.setup_cache())
        setup_b += np.stack([x.comm.bytes for x in cores]) - b0
        setup_m += np.stack([x.comm.messages for x in cores]) - m0
        results.append(dry_epoch(w, epoch, steps))
        c.reader.cache = None  # the next worker's cache takes its place
    snaps = group.call("comm_snapshot", phase="accounting")
    for r, snap, sb, sm in zip(results, snaps, setup_b, setup_m, strict=True):
        snap["bytes"] = (np.asarray(snap["bytes"]) - sb).tolist()
        snap["messages"] = (np.asarray(snap["messages"]) - sm).tolist()
        r["comm"] = snap
    return caches, int(setup_b.sum()), results


def _figures(rec: dict[str, Any], results: list[dict[str, Any]], k: int, steps: int, setup_bytes: int,
             caches: list[dict[str, Any]], train_counts: list[int], num_features: int) -> dict[str, Any]:
    """The figures of one simulated epoch from its record."""
    sent = np.asarray(rec["comm"]["by_worker_sent"], dtype=float)
    inputs = np.array([r["stats"]["input_nodes"] for r in results], dtype=float)
    feat = np.asarray(rec["comm"]["matrix_by_category"]["feature"], dtype=float).sum(axis=1)
    return {
        "k": k,
        "steps": steps,
        "partition_s": 0.0,
        "simulate_s": rec["epoch_s"],
        "bytes_by_category": rec["comm"]["by_category"],
        "messages_by_category": rec["comm"]["messages_by_category"],
        "bytes_total": rec["comm"]["total_bytes"],
        "bytes_per_worker_mean": float(sent.mean()),
        "bytes_per_worker_max": float(sent.max()),
        "feature_bytes_per_worker": feat.tolist(),
        "remote_input_share": rec["remote_input_share"],
        "remote_frontier_share": rec["remote_frontier_share"],
        "cache_hit_rate": rec["cache_hit_rate"],
        "cache_setup_bytes": setup_bytes,
        "cache_capacity": int(sum(c["capacity"] for c in caches)),
        "cache_bytes": int(sum(c.get("bytes", 0) for c in caches)),
        "bytes_by_node_type": rec["comm"].get("by_node_type", {}),
        "imbalance_bytes": float(sent.max() / sent.mean()) if sent.mean() else 1.0,
        "imbalance_input_nodes": float(inputs.max() / inputs.mean()) if inputs.mean() else 1.0,
        "input_nodes": int(inputs.sum()),
        "sampled_edges": int(rec["sampled_edges"]),
        "train_nodes": int(sum(train_counts)),
        "num_features": num_features,
    }


def print_table(rows: list[dict[str, Any]], console: Console) -> None:
    t = Table(title="simulated epoch per worker count (bytes sent, all workers)")
    for col in ("k", "sample", "feature", "gradient", "embedding", "total", "per worker (max)",
                "remote inputs", "cache hit", "imbalance"):
        t.add_column(col, justify="right")
    for r in rows:
        b = r["bytes_by_category"]
        t.add_row(str(r["k"]), fmt_bytes(b["sample"]), fmt_bytes(b["feature"]), fmt_bytes(b["gradient"]),
                  fmt_bytes(b["embedding"] + b["embedding_grad"]),
                  fmt_bytes(r["bytes_total"]), fmt_bytes(r["bytes_per_worker_max"]),
                  f"{100 * r['remote_input_share']:.1f}%",
                  "-" if r["cache_hit_rate"] is None else f"{100 * r['cache_hit_rate']:.1f}%",
                  f"{r['imbalance_bytes']:.2f}")
    console.print(t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gnntrain.simulate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, required=True)
    ap.add_argument("--parts", default="4,8,16", help="comma-separated worker counts, e.g. 4,8,16,32,64")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args(argv)
    console = Console()
    try:
        ks = [int(v) for v in args.parts.split(",") if v.strip()]
        if not ks or min(ks) < 1:
            raise ConfigError(f"--parts={args.parts!r}: expected comma-separated integers >= 1")
        cfg = load_config(args.config, args.overrides)
    except (ConfigError, ValueError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    from gnntrain.data import load_dataset

    graph = load_dataset(cfg.dataset)
    rows = []
    for k in ks:
        rows.append(simulate_k(cfg, graph, k))
        console.print(f"k={k}: {fmt_bytes(rows[-1]['bytes_total'])} per epoch "
                      f"({rows[-1]['simulate_s']:.1f} s to simulate)")
    print_table(rows, console)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"config": str(args.config), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

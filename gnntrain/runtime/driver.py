"""The coordinator's epoch loop, the same for one in-process worker or k Ray workers.

Per epoch: every worker trains ``steps`` synchronous steps; the coordinator sums their
statistics and communication counts, evaluates (exact correct/total counts from each
worker's own nodes), appends one line to ``metrics.jsonl``, and checkpoints when due.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from gnntrain.checkpoint import save_checkpoint
from gnntrain.config import RunConfig
from gnntrain.engine import steps_per_epoch
from gnntrain.rundir import RunDir
from gnntrain.runtime.comm import CATEGORIES, summarise
from gnntrain.runtime.group import WorkerGroup
from gnntrain.tblog import TensorBoardLog


@dataclass
class FitResult:
    """What a run reached; ``epochs`` holds every metrics.jsonl record."""

    epochs: list[dict[str, Any]] = field(default_factory=list)
    comm_total: dict[str, Any] = field(default_factory=dict)
    cache: list[dict[str, Any]] = field(default_factory=list)
    setup_comm: dict[str, Any] = field(default_factory=dict)

    @property
    def final(self) -> dict[str, Any]:
        return self.epochs[-1] if self.epochs else {}


def _acc(results: list[dict[str, Any]], split: str) -> float:
    correct = sum(r[split][0] for r in results if split in r)
    total = sum(r[split][1] for r in results if split in r)
    return correct / total if total else float("nan")


def epoch_record(epoch: int, results: list[dict[str, Any]], world: int, wall_s: float) -> dict[str, Any]:
    """Sum the workers' epoch statistics into one metrics line."""
    stats = [r["stats"] for r in results]
    comm = summarise([r["comm"] for r in results], world)
    examples = sum(s["examples"] for s in stats)
    extra = [s["extra"] for s in stats]

    def tot(key: str) -> int:
        return int(sum(e.get(key, 0) for e in extra))

    remote_frontier, local_frontier = tot("sample_remote_frontier"), tot("sample_local_frontier")
    remote_rows, hits = tot("feat_remote"), tot("feat_cache_hits")
    rec: dict[str, Any] = {
        "epoch": epoch,
        "steps": stats[0]["steps"],
        "loss": sum(s["loss_sum"] for s in stats) / max(1, examples),
        "train_acc_batches": sum(s["correct"] for s in stats) / max(1, examples),
        "epoch_s": wall_s,
        # per-worker means of the time split; the slowest worker sets the epoch time
        "time": {k: float(np.mean([s[k] for s in stats]))
                 for k in ("sample_s", "fetch_s", "compute_s", "sync_s", "wait_s", "total_s")},
        "input_nodes": sum(s["input_nodes"] for s in stats),
        "sampled_edges": sum(s["sampled_edges"] for s in stats),
        "remote_frontier_share": remote_frontier / max(1, remote_frontier + local_frontier),
        "remote_input_share": remote_rows / max(1, tot("feat_rows")),
        "cache_hit_rate": hits / remote_rows if remote_rows and tot("feat_cached") else None,
        "feature_bytes_saved_by_cache": tot("feat_bytes_saved"),
        "comm": comm,
    }
    rec["feature_bytes_without_cache"] = comm["by_category"]["feature"] + rec["feature_bytes_saved_by_cache"]
    return rec


def add_control(comm: dict[str, Any], nbytes: list[int], messages: list[int]) -> None:
    """Fold the coordinator's calls (arguments and replies) into ``control``."""
    comm["by_category"]["control"] += int(sum(nbytes))
    comm["messages_by_category"]["control"] += int(sum(messages))
    comm["total_bytes"] += int(sum(nbytes))
    comm["coordinator_control_bytes"] = [int(b) for b in nbytes]


def fit(cfg: RunConfig, group: WorkerGroup, run: RunDir | None, *, train_counts: list[int],
        start_epoch: int = 0, progress: bool = True) -> FitResult:
    """Train ``cfg.train.epochs`` epochs (from ``start_epoch``) and return every record."""
    res = FitResult()
    steps = steps_per_epoch(train_counts, cfg.sampler.batch_size)
    res.cache = group.setup_cache()
    res.setup_comm = summarise(group.comm_snapshots(), group.world)
    add_control(res.setup_comm, *group.take_control())
    totals = np.zeros(len(CATEGORIES), dtype=np.int64)
    bar = tqdm(range(start_epoch, cfg.train.epochs), desc="epochs", disable=not progress,
               unit="epoch", dynamic_ncols=True)
    for epoch in bar:
        t0 = time.perf_counter()
        results = group.train_epoch(epoch, steps)
        rec = epoch_record(epoch, results, group.world, time.perf_counter() - t0)
        add_control(rec["comm"], *group.take_control())
        last = epoch == cfg.train.epochs - 1
        if (epoch + 1) % cfg.train.eval_every == 0 or last:
            t1 = time.perf_counter()
            ev = group.evaluate(epoch, cfg.train.eval)
            rec.update({f"{s}_acc": _acc(ev, s) for s in ("train", "val", "test") if s in ev[0]})
            rec["eval_s"] = time.perf_counter() - t1
            # evaluation traffic (hidden rows in ``eval``; sampled evaluation's sample and
            # feature requests; the coordinator's calls) is reported apart from training's
            rec["eval_comm"] = summarise(group.comm_snapshots(), group.world)
            add_control(rec["eval_comm"], *group.take_control())
            rec["eval_comm_bytes"] = rec["eval_comm"]["total_bytes"]
        totals += np.array([rec["comm"]["by_category"][c] for c in CATEGORIES])
        if run is not None:
            run.append_metrics(rec)
            TensorBoardLog(run.path).log_epoch(rec)  # no-op unless tensorboard is installed
            every = cfg.train.checkpoint_every
            if last or (every and (epoch + 1) % every == 0):
                save_checkpoint(run, epoch + 1, {"config": cfg.model_dump(mode="json"), **group.state()},
                                cfg.train.keep_checkpoints)
        res.epochs.append(rec)
        bar.set_postfix(loss=f"{rec['loss']:.3f}", val=f"{rec.get('val_acc', float('nan')):.3f}",
                        s=f"{rec['epoch_s']:.1f}")
    res.comm_total = {c: int(totals[i]) for i, c in enumerate(CATEGORIES)}
    return res

"""The coordinator's epoch loop, the same for one in-process worker or k Ray workers.

Per epoch: every worker trains ``steps`` synchronous steps; the coordinator sums their
statistics and communication counts, evaluates (each worker returns the task's metric
state for its own nodes; the task merges them exactly), appends one line to
``metrics.jsonl``, and checkpoints when due. Layer-wise evaluation is orchestrated here,
once, for every kind of group.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from gnntrain.checkpoint import BEST, load_part_file, save_checkpoint
from gnntrain.config import RunConfig
from gnntrain.engine import steps_per_epoch
from gnntrain.rundir import RunDir
from gnntrain.runtime.comm import CATEGORIES, summarise
from gnntrain.runtime.group import Watch, WorkerGroup
from gnntrain.tasks import SPLITS, Task
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


def split_metrics(task: Task, results: list[dict[str, Any]]) -> dict[str, float]:
    """``{split}_{metric}`` from every worker's metric state per split, merged exactly."""
    out: dict[str, float] = {}
    for split in SPLITS:
        states = [task.from_json(r[split]) for r in results if split in r]
        if states:
            out.update({f"{split}_{k}": v for k, v in task.metrics(task.merge(states)).items()})
    return out


def restore(group: WorkerGroup, run: RunDir, ckpt: dict[str, Any], cfg: RunConfig) -> None:
    """Load a checkpoint into every worker: the replicated model and optimizer state, and
    each part's own state (node embedding rows) from its side file, one part at a time."""
    group.call("load_state", {"model": ckpt["model"], "opt": ckpt["opt"]}, phase="restore")
    files = list(ckpt.get("part_files", []))
    has_table = cfg.model.node_embedding is not None
    if (has_table or files) and len(files) != (group.world if has_table else 0):
        raise ValueError(f"the checkpoint after epoch {ckpt.get('epochs_done')} holds "
                         f"{len(files)} per-part embedding files but the run has {group.world} "
                         f"workers and model.node_embedding={cfg.model.node_embedding}: resume "
                         "with the run's own config and worker count")
    for r, name in enumerate(files):
        group.call_one(r, "load_part_state", load_part_file(run, name), phase="restore")


def phase_bar(desc: str, unit: str, total: int | None = None, show: bool = True) -> tqdm:
    """The progress bar of a phase inside an epoch (evaluation, prediction): below the
    epochs bar, gone when the phase ends."""
    return tqdm(total=total, desc=desc, unit=unit, disable=not show, leave=False, position=1,
                dynamic_ncols=True)


def batch_watch(bar: tqdm) -> Watch:
    """Feeds ``bar`` from the workers' progress answers (the ones the stall detection
    polls): batches done over batches to do, summed over the workers that have said."""
    seen: dict[int, tuple[int, int]] = {}

    def watch(prog: list[dict[str, Any]]) -> None:
        for p in prog:
            if "total" in p:
                seen[int(p["rank"])] = (int(p["done"]), int(p["total"]))
        if seen:
            bar.total = sum(t for _, t in seen.values())
            bar.n = sum(d for d, _ in seen.values())
            bar.refresh()

    return watch


def run_layers(group: WorkerGroup, layers: int, phase: str = "evaluation", progress: bool = False) -> None:
    """Layer-wise inference of layers ``0 .. layers-1`` on every worker: layer ``l`` runs
    everywhere before any worker starts ``l + 1`` (it reads layer ``l``'s rows of its halo
    from their owners). Afterwards each worker holds the rows after layer ``layers`` of
    every node it owns; evaluation and ``gnntrain.predict`` both run this loop. With
    ``progress`` a bar counts the layers done."""
    with phase_bar(phase, "layer", layers, progress) as bar:
        group.call("eval_begin", phase=phase)
        for layer in range(layers):
            group.call("eval_layer", layer, phase=f"{phase} layer {layer}")
            bar.update(1)


def evaluate(group: WorkerGroup, task: Task, epoch: int, mode: str,
             progress: bool = False) -> list[dict[str, Any]]:
    """Every worker's metric states: layer-wise over the full graph (``full``, models with
    ``layer()``), or with the training fanouts (``sampled``; with ``progress`` a bar
    counts the val and test batches every worker has evaluated)."""
    if mode == "sampled":
        with phase_bar(f"evaluation (epoch {epoch})", "batch", show=progress) as bar:
            return group.call("eval_sampled", epoch, phase=f"evaluation (epoch {epoch})",
                              watch=batch_watch(bar) if progress else None)
    run_layers(group, group.num_layers, progress=progress)
    return group.call("eval_results", phase="evaluation")


def epoch_record(epoch: int, results: list[dict[str, Any]], world: int, wall_s: float,
                 task: Task) -> dict[str, Any]:
    """Sum the workers' epoch statistics into one metrics line."""
    stats = [r["stats"] for r in results]
    comm = summarise([r["comm"] for r in results], world)
    examples = sum(s["examples"] for s in stats)
    extra = [s["extra"] for s in stats]

    def tot(key: str) -> int:
        return int(sum(e.get(key, 0) for e in extra))

    remote_frontier, local_frontier = tot("sample_remote_frontier"), tot("sample_local_frontier")
    remote_rows, hits, looked_up = tot("feat_remote"), tot("feat_cache_hits"), tot("feat_cached")
    rec: dict[str, Any] = {
        "epoch": epoch,
        "steps": stats[0]["steps"],
        "loss": sum(s["loss_sum"] for s in stats) / max(1, examples),
        **{f"train_{k}_batches": v for k, v in
           task.metrics(task.merge([task.from_json(s["state"]) for s in stats if s["state"]])).items()},
        "epoch_s": wall_s,
        # per-worker means of the time split; the slowest worker sets the epoch time
        "time": {k: float(np.mean([s[k] for s in stats]))
                 for k in ("sample_s", "fetch_s", "compute_s", "sync_s", "wait_s", "total_s")},
        "input_nodes": sum(s["input_nodes"] for s in stats),
        "sampled_edges": sum(s["sampled_edges"] for s in stats),
        "remote_frontier_share": remote_frontier / max(1, remote_frontier + local_frontier),
        "remote_input_share": remote_rows / max(1, tot("feat_rows")),
        # of the remote rows looked up (a featureless type's rows are never looked up)
        "cache_hit_rate": hits / looked_up if looked_up else None,
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


def eval_mode(cfg: RunConfig, group: WorkerGroup) -> str:
    """``train.eval``, except that a model without ``layer()`` is evaluated sampled."""
    return cfg.train.eval if group.layerwise else "sampled"


def checkpoint(group: WorkerGroup, run: RunDir, cfg: RunConfig, epochs_done: int,
               stems: list[str | None]) -> None:
    """Write the group's state after ``epochs_done`` epochs once per entry of ``stems``
    (:func:`save_checkpoint`: None the rotating ``ckpt-<epoch>.pt``, :data:`BEST`
    ``best.pt``): rank 0's model and optimizer and a digest of every rank's own (all equal
    unless a replica drifted), fetched once, and each part's embedding rows, fetched one
    part at a time for each file."""
    state = group.call_one(0, "state", phase="checkpoint")
    digests = group.call("state_digest", phase="checkpoint")
    for stem in stems:
        parts = () if cfg.model.node_embedding is None else (
            group.call_one(r, "part_state", phase="checkpoint") for r in range(group.world))
        save_checkpoint(run, epochs_done, {"config": cfg.public_dump(), **state, "rank_digests": digests},
                        cfg.train.keep_checkpoints, parts=parts, stem=stem)


def advance(best: float | None, since: int, rec: dict[str, Any], key: str) -> tuple[float | None, int, bool]:
    """Early stopping's count after one metrics record: the best ``key`` so far, the
    evaluations since its first occurrence, and whether ``rec`` set a new best (a record
    without ``key``, an epoch not evaluated, changes nothing)."""
    if key not in rec:
        return best, since, False
    if best is None or rec[key] > best:
        return float(rec[key]), 0, True
    return best, since + 1, False


def best_so_far(records: list[dict[str, Any]], key: str) -> tuple[float | None, int]:
    """:func:`advance` over ``records`` (a run's metrics): the best ``key`` and the
    evaluations since it."""
    best: float | None = None
    since = 0
    for r in records:
        best, since, _ = advance(best, since, r, key)
    return best, since


def fit(cfg: RunConfig, group: WorkerGroup, run: RunDir | None, task: Task, *,
        start_epoch: int = 0, progress: bool = True,
        on_epoch: Callable[[dict[str, Any]], None] | None = None) -> FitResult:
    """Train ``cfg.train.epochs`` epochs (from ``start_epoch``) and return every record;
    ``on_epoch`` gets each record after it is written and checkpointed (a Tune report)."""
    res = FitResult()
    steps = steps_per_epoch(group.train_counts, cfg.sampler.batch_size)
    mode = eval_mode(cfg, group)
    res.cache = group.call("setup_cache", phase="cache setup")
    res.setup_comm = summarise(group.call("comm_snapshot", phase="accounting"), group.world)
    add_control(res.setup_comm, *group.take_control())
    totals = np.zeros(len(CATEGORIES), dtype=np.int64)
    best_key = f"val_{task.metric}"
    best, since_best = best_so_far(run.metrics() if run is not None else [], best_key)  # on resume
    patience = cfg.train.patience
    eval_every = cfg.with_eval_every_for(group.num_nodes).train.eval_interval()
    if patience is not None and since_best >= patience:  # resumed after stopping early
        return res
    bar = tqdm(range(start_epoch, cfg.train.epochs), desc="epochs", disable=not progress,
               unit="epoch", dynamic_ncols=True)
    shown: dict[str, str] = {}
    for epoch in bar:
        t0 = time.perf_counter()
        results = group.call("train_epoch", epoch, steps, phase=f"epoch {epoch}",
                             timeout=cfg.cluster.epoch_timeout_s)
        rec = epoch_record(epoch, results, group.world, time.perf_counter() - t0, task)
        add_control(rec["comm"], *group.take_control())
        last = epoch == cfg.train.epochs - 1
        if (epoch + 1) % eval_every == 0 or last:
            t1 = time.perf_counter()
            rec.update(split_metrics(task, evaluate(group, task, epoch, mode, progress)))
            rec["eval_mode"] = mode
            rec["eval_s"] = time.perf_counter() - t1
            # evaluation traffic (hidden rows in ``eval``; sampled evaluation's sample and
            # feature requests; the coordinator's calls) is reported apart from training's
            rec["eval_comm"] = summarise(group.call("comm_snapshot", phase="accounting"), group.world)
            add_control(rec["eval_comm"], *group.take_control())
            rec["eval_comm_bytes"] = rec["eval_comm"]["total_bytes"]
        totals += np.array([rec["comm"]["by_category"][c] for c in CATEGORIES])
        best, since_best, improved = advance(best, since_best, rec, best_key)
        stop = patience is not None and since_best >= patience and not last
        if stop:
            rec["stopped_early"] = {"patience": patience, "best": best}
        if run is not None:
            run.append_metrics(rec)
            TensorBoardLog(run.path).log_epoch(rec)  # no-op unless tensorboard is installed
            every = cfg.train.checkpoint_every
            stems: list[str | None] = [None] if last or stop or (every and (epoch + 1) % every == 0) else []
            if cfg.train.keep_best and improved:
                stems.append(BEST)
            if stems:
                checkpoint(group, run, cfg, epoch + 1, stems)
            run.sync()  # a run on object storage: the epoch's metrics (and plots, tb) to the store
        res.epochs.append(rec)
        if on_epoch is not None:
            on_epoch(rec)
        shown.update(loss=f"{rec['loss']:.3f}", s=f"{rec['epoch_s']:.1f}")
        shown.update({k: f"{v:.3f}" for k, v in rec.items() if k.startswith("val_")})
        bar.set_postfix(shown)  # the last evaluation stays shown on epochs without one
        if stop:
            break
    res.comm_total = {c: int(totals[i]) for i, c in enumerate(CATEGORIES)}
    return res

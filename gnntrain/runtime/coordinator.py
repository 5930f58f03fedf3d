"""The coordinator: the whole data path of a run, in order.

load the graph -> partition it (or reuse the stored set) -> start Ray and one worker
per part -> train epoch by epoch -> write the run report. ``--single-process`` replaces
the middle with the in-process reference worker over the whole graph.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console

from gnntrain.checkpoint import load_latest
from gnntrain.config import RunConfig
from gnntrain.data import load_dataset
from gnntrain.models import ModelSpec, build_model, has_layerwise
from gnntrain.report import build_summary, print_summary, write_plots
from gnntrain.rundir import RunDir
from gnntrain.runtime.driver import FitResult, fit
from gnntrain.runtime.group import LocalGroup, WorkerGroup
from gnntrain.tasks import Task, build_task
from partition.graph import Graph


def run_training(cfg: RunConfig, *, single_process: bool = False, resume: RunDir | None = None,
                 run_dir: Path | None = None, progress: bool = True,
                 console: Console | None = None, graph: Graph | None = None,
                 model: ModelSpec | None = None, task: Task | None = None) -> dict[str, Any]:
    """Train as ``cfg`` says and write the run directory; returns the summary.

    ``graph`` replaces loading ``cfg.dataset`` (an in-memory graph, e.g. in tests);
    ``model`` (a factory or module) replaces ``model.arch`` and ``task`` replaces
    ``task.kind``: both travel to the workers as Python objects.
    """
    console = console or Console(stderr=True)
    task = task if task is not None else build_task(cfg.task.kind, dict(cfg.task.options))
    spec: ModelSpec = model if model is not None else cfg.model.arch
    if not single_process:
        from gnntrain.runtime.cluster import check_address

        check_address(cfg.cluster)  # an unreachable cluster fails now, before any work
    graph = graph if graph is not None else load_dataset(cfg.dataset)
    console.print(f"loaded {graph.name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
                  f"{graph.num_features} features, {graph.num_classes} classes")
    # the model is built once here, so a factory that fails does so before Ray starts
    out_dim = task.out_dim(graph.num_classes, cfg.model.hidden)
    probe = build_model(spec, cfg.model, graph.num_features, out_dim, cfg.train.seed)
    if not has_layerwise(probe) and cfg.train.eval == "full":
        console.print(f"model {type(probe).__name__} has no layer(i, block, h): evaluating with "
                      "sampled neighbourhoods (train.eval=sampled) instead of layer-wise inference")
    # what rebuilding the model from the run directory needs (gnntrain.load)
    model_info = {"in_dim": graph.num_features, "out_dim": out_dim,
                  "arch": spec if isinstance(spec, str) else None,
                  "class": f"{type(probe).__module__}.{type(probe).__qualname__}",
                  "layerwise": has_layerwise(probe)}
    del probe
    run = resume or (RunDir(run_dir) if run_dir else RunDir.create(cfg.train.run_root, cfg.dataset.name))
    run.path.mkdir(parents=True, exist_ok=True)
    run.write_config(cfg)
    run.write_json("model.json", model_info)

    ckpt = load_latest(run) if resume else None
    start_epoch = int(ckpt["epochs_done"]) if ckpt else 0
    if resume is not None:
        run.truncate_metrics(start_epoch)
        console.print(f"resuming {run.path} after epoch {start_epoch}")

    partition_report: dict[str, Any] | None = None
    failures: list[dict[str, Any]] = []
    if single_process:
        workers = 1
        res = _fit(cfg, LocalGroup(cfg, graph, spec, task), run, task, ckpt, start_epoch, progress)
    else:
        from gnntrain.runtime.cluster import ray_session
        from partition import build_partition_set, quality_report, write_report

        workers = cfg.cluster.workers
        pset = build_partition_set(graph, cfg.partition)
        report = quality_report(graph, pset.assignment(), fanouts=list(cfg.sampler.fanouts),
                                method=cfg.partition.method, steps=list(pset.meta.steps),
                                num_parts=pset.num_parts, partition_path=pset.path)
        write_report(report, run.path)
        partition_report = report.model_dump(mode="json")
        del graph  # workers read their own parts from disk
        with ray_session(cfg.cluster, workers):
            res, failures = _fit_with_recovery(cfg, run, str(pset.path), workers, spec, task, ckpt,
                                               start_epoch, progress, console)

    epochs = run.metrics()
    run.write_json("comm.json", {
        "per_epoch": [{"epoch": e["epoch"], **e["comm"]} for e in epochs],
        "total_by_category": res.comm_total,
        "setup": res.setup_comm,
    })
    if failures:
        run.write_json("failures.json", failures)
    summary = build_summary(cfg.model_dump(mode="json"), epochs, workers=workers,
                            partition=partition_report, cache=res.cache, failures=failures)
    summary["run_dir"] = str(run.path)
    run.write_json("summary.json", summary)
    write_plots(run.path, epochs)
    print_summary(summary, Console(stderr=True) if console.stderr else console)
    return summary


def _fit(cfg: RunConfig, group: WorkerGroup, run: RunDir, task: Task, ckpt: dict[str, Any] | None,
         start_epoch: int, progress: bool) -> FitResult:
    if ckpt is not None:
        group.call("load_state", {"model": ckpt["model"], "opt": ckpt["opt"]}, phase="restore")
    return fit(cfg, group, run, task, start_epoch=start_epoch, progress=progress)


def _fit_with_recovery(cfg: RunConfig, run: RunDir, part_path: str, workers: int, model: ModelSpec,
                       task: Task, ckpt: dict[str, Any] | None, start_epoch: int, progress: bool,
                       console: Console) -> tuple[FitResult, list[dict[str, Any]]]:
    """Train on Ray; when a worker fails, tear the group down, start a new one from the
    last checkpoint and go on, up to ``train.max_failures`` times."""
    from gnntrain.runtime.ray_group import RayGroup, WorkerFailure

    failures: list[dict[str, Any]] = []
    while True:
        t_start = time.monotonic()
        group = None
        try:
            group = RayGroup(cfg, part_path, workers, model, task, attempt=len(failures))
            if failures:
                failures[-1]["recovery_s"] = time.monotonic() - failures[-1]["_t_fail"]
                del failures[-1]["_t_fail"]
            return _fit(cfg, group, run, task, ckpt, start_epoch, progress), failures
        except WorkerFailure as e:
            if len(failures) >= cfg.train.max_failures:
                raise
            failed_at = len(run.metrics())
            ckpt = load_latest(run)
            start_epoch = int(ckpt["epochs_done"]) if ckpt else 0
            run.truncate_metrics(start_epoch)
            failures.append({"worker": e.rank, "phase": e.phase, "cause": _headline(e.cause),
                             "detail": e.cause[-4000:],
                             "after_s": time.monotonic() - t_start, "epochs_done_at_failure": failed_at,
                             "restart_from_epoch": start_epoch,
                             "epochs_redone": failed_at - start_epoch, "_t_fail": time.monotonic()})
            console.print(f"[yellow]worker {e.rank} failed during {e.phase}; restarting from epoch "
                          f"{start_epoch} ({len(failures)}/{cfg.train.max_failures})[/yellow]")
        finally:
            if group is not None:
                group.shutdown()


def _headline(cause: str) -> str:
    """The line of a worker's error that says what happened (the exception's message)."""
    lines = [ln.strip() for ln in cause.split("\nworkers at failure:")[0].splitlines() if ln.strip()]
    return (lines[-1] if lines else cause)[:500]

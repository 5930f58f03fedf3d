"""The coordinator: the whole data path of a run, in order.

load the graph -> partition it (or reuse the stored set) -> start Ray and one worker
per part -> train epoch by epoch -> write the run report. ``--single-process`` replaces
the middle with the in-process reference worker over the whole graph.

A stored partition set is verified (sizes, then SHA-256 of every file against
``meta.json``) before Ray starts, so a damaged file is reported by name, not by a worker
dying at start-up. Any error that ends a run after its directory exists leaves the full
traceback in ``error.log`` there (and, for a run on object storage, in the store); a
worker that stops on a user error (a ``ValueError`` of ours: data, partition, config) ends
the run with :class:`WorkerUserError`, whose message is the worker's own one-line reason.

A ``train.run_root`` on object storage is written to a local staging directory and
mirrored to the store (:mod:`gnntrain.rundir_store`): the run's files at its start, at every
epoch end (:func:`~gnntrain.runtime.driver.fit`) and at its end, each checkpoint as it is
written.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from gnntrain.checkpoint import load_latest
from gnntrain.config import ChunksDataset, ConfigError, RunConfig
from gnntrain.data.load import open_chunk_dataset
from gnntrain.models import ModelSpec, build_model, has_layerwise
from gnntrain.report import build_summary, print_summary, write_plots
from gnntrain.rundir import RunDir
from gnntrain.runtime.codec import type_dtypes
from gnntrain.runtime.driver import FitResult, fit, restore
from gnntrain.runtime.group import LocalGroup, WorkerGroup
from gnntrain.runtime.worker_errors import user_error
from gnntrain.tasks import Task, build_task
from partition.chunked import ChunkedGraph
from partition.graph import Graph
from partition.labels import classes_without
from partition.storage import StorageError
from samplers.config import hop_fanouts, resolve_fanouts, resolve_type_sizes

if TYPE_CHECKING:
    from gnntrain.runtime.placement import Move
    from gnntrain.runtime.ray_group import GivenPlacement
    from partition.report import PartitionReport
    from partition.training_set import TrainingSet


class WorkerUserError(ValueError):
    """A worker stopped on a user error (bad data, partition set or config): retrying
    cannot help, and the message is the worker's own reason."""


def run_training(cfg: RunConfig, *, single_process: bool = False, resume: RunDir | None = None,
                 run_dir: Path | RunDir | None = None, progress: bool = True,
                 console: Console | None = None, graph: Graph | None = None,
                 model: ModelSpec | None = None, task: Task | None = None,
                 placement: GivenPlacement | None = None,
                 on_epoch: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Train as ``cfg`` says and write the run directory; returns the summary.

    ``graph`` replaces loading ``cfg.dataset`` (an in-memory graph, e.g. in tests);
    ``model`` (a factory or module) replaces ``model.arch`` and ``task`` replaces
    ``task.kind``: both travel to the workers as Python objects. ``placement`` puts the
    Ray workers in the bundles of a placement group the caller holds (a Tune trial's);
    ``on_epoch`` is called with each epoch's metrics record once it is written (and its
    checkpoint, when one is due). ``run_dir`` (a path, or a :class:`RunDir` such as
    :meth:`RunDir.at` gives for a store) is the run directory to write instead of a new one
    under ``train.run_root``.
    """
    console = console or Console(stderr=True)
    task = task if task is not None else build_task(cfg.task.kind, dict(cfg.task.options))
    spec: ModelSpec = model if model is not None else cfg.model.arch
    if not single_process:
        from gnntrain.runtime.cluster import check_address

        check_address(cfg.cluster)  # an unreachable cluster fails now, before any work
    # a chunked dataset is only opened (manifest): the Ray pipeline partitions it
    data = _open_dataset(cfg, single_process, task, graph)
    graph = data if isinstance(data, Graph) else None
    console.print(f"{'loaded' if graph is not None else 'opened chunks of'} {data.name}: "
                  f"{data.num_nodes:,} nodes, {data.num_edges:,} edges, "
                  f"{data.num_features} features, {data.num_classes} classes")
    if graph is not None and graph.num_classes > 1 and graph.train_idx.size:
        empty = classes_without(graph.y, graph.train_idx, graph.num_classes)
        if empty:
            console.print(f"warning: {len(empty)} of {graph.num_classes} classes have no training "
                          f"node ({empty[:10]}): the model is trained for them but never sees one")
    # the model is built once here, so a factory that fails does so before Ray starts
    out_dim = task.out_dim(data.num_classes, cfg.model.hidden)
    in_dim = cfg.model.input_dim(data.num_features)
    probe = build_model(spec, cfg.model, in_dim, out_dim, cfg.train.seed)
    if graph is not None:  # a chunked graph is untyped
        check_typed(probe, graph)
        resolve_fanouts(cfg.sampler.fanouts, graph.edge_type_names)  # names checked before work
    type_names = graph.node_type_names if graph is not None else ()
    type_dtypes(cfg.train.feature_dtype, type_names)  # a mapping's node types checked before work
    resolve_type_sizes(cfg.sampler.cache.size, type_names)
    layerwise_eval = has_layerwise(probe) and cfg.train.eval == "full"
    task.check_setup(probe, layerwise_eval=layerwise_eval)
    if not layerwise_eval:
        task = _sample_large_splits(cfg, data, task, console)
    if not has_layerwise(probe) and cfg.train.eval == "full":
        console.print(f"model {type(probe).__name__} has no layer(i, block, h): evaluating with "
                      "sampled neighbourhoods (train.eval=sampled) instead of layer-wise inference")
    # what rebuilding the model from the run directory needs (gnntrain.load)
    model_info = {"in_dim": in_dim, "out_dim": out_dim,
                  "arch": spec if isinstance(spec, str) else None,
                  "class": f"{type(probe).__module__}.{type(probe).__qualname__}",
                  "layerwise": has_layerwise(probe)}
    del probe
    if isinstance(run_dir, Path):
        run_dir = RunDir(run_dir)
    run = resume or run_dir or RunDir.create(
        cfg.train.run_root, cfg.dataset.name, storage_options=cfg.train.storage_options,
        scratch=cfg.cluster.scratch_dir, max_bytes=cfg.cluster.scratch_max_bytes)
    run.path.mkdir(parents=True, exist_ok=True)
    with _error_log(run):
        run.write_config(cfg)
        run.write_json("model.json", model_info)
        run.sync()

        ckpt = load_latest(run) if resume else None
        start_epoch = int(ckpt["epochs_done"]) if ckpt else 0
        if resume is not None:
            run.truncate_metrics(start_epoch)
            console.print(f"resuming {run.path} after epoch {start_epoch}")

        partition_report: dict[str, Any] | None = None
        failures: list[dict[str, Any]] = []
        staging: list[dict[str, Any]] = []
        coordinator_staged = None
        if single_process:
            assert graph is not None  # _open_dataset refused chunks
            workers = 1
            res = _fit(cfg, LocalGroup(cfg, graph, spec, task), run, task, ckpt, start_epoch, progress,
                       on_epoch)
        else:
            from gnntrain.runtime.cluster import ray_session
            from partition import write_report

            workers = cfg.cluster.workers
            # an in-memory graph is partitioned before Ray starts (a bad request fails before
            # any worker does); the chunk pipeline runs on Ray
            chunks = data if isinstance(data, ChunkedGraph) else None
            built = _partition(cfg, data, progress) if chunks is None else None
            del graph, data  # workers read their own parts from disk
            with ray_session(cfg.cluster, workers):
                pset, report = built if built is not None else _partition(cfg, chunks, progress)
                task = task.placed(pset.new_id_map())  # a node task keeps nothing of it
                coordinator_staged = getattr(pset, "staged", None)  # a chunked set: never staged
                write_report(report, run.path, plot=cfg.train.plots)
                partition_report = report.model_dump(mode="json")
                # absolute (or a URI): the workers of a cluster the run joined start elsewhere
                res, failures, staging = _fit_with_recovery(cfg, run, pset.location, workers, spec, task,
                                                            ckpt, start_epoch, progress, console, placement,
                                                            on_epoch)

        epochs = run.metrics()
        run.write_json("comm.json", {
            "per_epoch": [{"epoch": e["epoch"], **e["comm"],
                           **({"evaluation": e["eval_comm"]} if "eval_comm" in e else {})} for e in epochs],
            "total_by_category": res.comm_total,
            "setup": res.setup_comm,
        })
        if failures:
            run.write_json("failures.json", failures)
        summary = build_summary(cfg.public_dump(), epochs, workers=workers,
                                partition=partition_report, cache=res.cache, failures=failures,
                                metric=task.metric)
        summary["run_dir"] = run.location
        if staging:
            summary["staging"] = staging
        if coordinator_staged is not None:  # the set-level files the coordinator read from the store
            summary["staging_coordinator"] = coordinator_staged.to_dict()
        run.write_json("summary.json", summary)
        if cfg.train.plots:
            write_plots(run.path, epochs)
        run.sync()
        print_summary(summary, Console(stderr=True) if console.stderr else console)
    return summary


def prepare_partition(cfg: RunConfig, task: Task | None = None) -> Path | None:
    """Build (or find) the partition set ``cfg`` trains on, without Ray, and return its
    directory, so that later runs of the same settings only reuse it (a sweep's trials);
    None for a chunked dataset, which a run partitions on Ray."""
    if isinstance(cfg.dataset, ChunksDataset):
        return None
    task = task if task is not None else build_task(cfg.task.kind, dict(cfg.task.options))
    pset, _ = _partition(cfg, task.load_graph(cfg.dataset), progress=False)
    return pset.path


def check_typed(model: Any, graph: Graph) -> None:
    """A model that reads node types needs a typed graph with no more types than it has
    weights for (refused here, before any work)."""
    if not getattr(model, "needs_node_types", False):
        return
    types = len(graph.node_type_names)
    if types == 0:
        raise ValueError(f"model {type(model).__name__} reads node types but dataset {graph.name!r} "
                         "is untyped; train it on a typed dataset (dataset.source: hetero_dir, "
                         "ogb_mag or synthetic_hetero)")
    have = getattr(model, "num_node_types", types)
    if have < types:
        raise ValueError(f"model.options.node_types={have} but dataset {graph.name!r} has {types} "
                         f"node types {list(graph.node_type_names)}; set model.options.node_types={types}")
    rels = getattr(model, "num_relations", 0)
    if rels and rels < len(graph.edge_type_names):
        raise ValueError(f"model.options.relations={rels} but dataset {graph.name!r} has "
                         f"{len(graph.edge_type_names)} relations {list(graph.edge_type_names)}; set "
                         f"model.options.relations={len(graph.edge_type_names)}")


def _sample_large_splits(cfg: RunConfig, data: Graph | ChunkedGraph, task: Task,
                         console: Console) -> Task:
    """``task`` evaluating a seeded sample of each split larger than
    ``train.eval_max_nodes`` (sampled evaluation; node-seeded tasks)."""
    cap = cfg.train.eval_max_nodes
    if cap is None:
        return task
    if isinstance(data, Graph):
        sizes = {s: int(data.split_idx(s).shape[0]) for s in ("val", "test")}
    else:
        sizes = {"val": data.manifest.num_val, "test": data.manifest.num_test}
    rates = {s: cap / n for s, n in sizes.items() if n > cap}
    if not rates:
        return task
    for s, r in rates.items():
        console.print(f"evaluating a seeded sample of about {cap:,} of the {sizes[s]:,} {s} nodes "
                      f"({r:.1%}; train.eval_max_nodes, null for all)")
    return task.with_eval_sample(rates, cfg.train.seed)


def _open_dataset(cfg: RunConfig, single_process: bool, task: Task,
                  graph: Graph | None) -> Graph | ChunkedGraph:
    """The graph the task trains on (``graph``, else loaded by the task), or for
    ``dataset.source='chunks'`` the opened chunk directory."""
    if graph is not None or not isinstance(cfg.dataset, ChunksDataset):
        return task.load_graph(cfg.dataset, graph)
    if single_process:
        edges = cfg.dataset.edges  # the config has a chunk directory or Parquet tables
        where = f"dataset.path={cfg.dataset.path!r}" if edges is None else f"dataset.edges.path={edges.path!r}"
        raise ConfigError(f"dataset.source='chunks' ({where}) trains on Ray "
                          "workers only, each loading its own part; drop --single-process")
    from partition.parallel import CHUNKED_METHODS

    if cfg.partition.method not in CHUNKED_METHODS:
        raise ConfigError(f"partition.method={cfg.partition.method!r} needs the whole graph in one process; "
                          f"dataset.source='chunks' is partitioned with one of {', '.join(CHUNKED_METHODS)}")
    return open_chunk_dataset(cfg.dataset)


def _partition(cfg: RunConfig, data: Graph | ChunkedGraph | None,
               progress: bool) -> tuple[TrainingSet, PartitionReport]:
    """The run's partition set (built or reused) and its quality report: from the loaded
    graph, or for chunks by the Ray pipeline (on the running Ray) and from the written parts alone."""
    from partition import build_training_set, quality_report, set_report

    assert data is not None
    if isinstance(data, ChunkedGraph):
        from gnntrain.runtime.worker_pool import POOL
        from partition.parallel import partition_chunks  # imports Ray: only where Ray runs

        POOL.release()  # the pipeline's Ray tasks need the CPUs that idle kept workers hold
        chunked = partition_chunks(data, cfg.partition, progress=progress)
        if chunked.reused:
            chunked.check_files(verify=True)
        return chunked, set_report(chunked)
    pset = build_training_set(data, cfg.partition)
    if pset.reused:  # a set written by this call was checksummed as it was written
        pset.check_files(verify=True)
    return pset, quality_report(data, pset.assignment(), fanouts=hop_fanouts(cfg.sampler.fanouts),
                                method=cfg.partition.method, steps=list(pset.meta.steps),
                                num_parts=pset.num_parts, partition_path=pset.location)


@contextmanager
def _error_log(run: RunDir) -> Iterator[None]:
    """On an error, write its full traceback to ``<run>/error.log`` and note the path on it
    (a log left by an earlier attempt of a resumed run is removed first)."""
    log = run.path / "error.log"
    log.unlink(missing_ok=True)
    try:
        yield
    except Exception as e:
        log.write_text("".join(traceback.format_exception(e)))
        e.add_note(f"full traceback: {log}")
        with suppress(StorageError):  # the store may be what failed: the local log stays
            run.sync()
        raise


def _fit(cfg: RunConfig, group: WorkerGroup, run: RunDir, task: Task, ckpt: dict[str, Any] | None,
         start_epoch: int, progress: bool,
         on_epoch: Callable[[dict[str, Any]], None] | None = None) -> FitResult:
    if ckpt is not None:
        restore(group, run, ckpt, cfg)
    return fit(cfg, group, run, task, start_epoch=start_epoch, progress=progress, on_epoch=on_epoch)


def _fit_with_recovery(cfg: RunConfig, run: RunDir, part_path: str, workers: int, model: ModelSpec,
                       task: Task, ckpt: dict[str, Any] | None, start_epoch: int, progress: bool,
                       console: Console, placement: GivenPlacement | None = None,
                       on_epoch: Callable[[dict[str, Any]], None] | None = None,
                       ) -> tuple[FitResult, list[dict[str, Any]], list[dict[str, Any]]]:
    """Train on Ray; when a worker fails, start a new group from the last checkpoint and go
    on, up to ``train.max_failures`` times. The new group keeps the failed one's other
    workers when their nodes are all still there (``cluster.keep_survivors``,
    :meth:`RayGroup.salvage`) and starts new actors for the rest; past the limit, inside
    :func:`~gnntrain.runtime.worker_pool.reuse_workers`, they go back to the pool
    (:meth:`Survivors.keep`). Every rank goes back to
    its node; the ranks of a node that left the cluster go to a new node or, with
    ``cluster.on_worker_loss=shrink``, to a surviving one (:func:`place`). With a given
    ``placement`` every group takes its bundles again. Returns the fit, the failures and,
    for a set on object storage, what each group's workers staged (``summary.json``'s
    ``staging``: per group started, each rank's node, files copied and files reused)."""
    from gnntrain.runtime.placement import alive_nodes, place
    from gnntrain.runtime.ray_group import PlacementError, RayGroup, Survivors, WorkerFailure
    from gnntrain.runtime.worker_pool import POOL

    failures: list[dict[str, Any]] = []
    staging: list[dict[str, Any]] = []
    nodes: list[str] | None = None  # the node of every rank, once a group has started
    survivors: Survivors | None = None  # the failed group's sound workers, for the next group
    gave_up = False  # failed beyond train.max_failures: the survivors go back to the pool
    try:
        while True:
            t_start = time.monotonic()
            group = None
            try:
                if failures and nodes is not None:
                    placed = place(nodes, cfg.cluster.on_worker_loss, cfg.cluster.replace_timeout_s)
                    if placed.moves:
                        _note_moves(failures[-1], nodes, placed.nodes, placed.moves, placed.waited_s, console)
                    nodes = placed.nodes
                if survivors is not None and nodes is not None and nodes != survivors.nodes:
                    survivors.discard()  # a rank moves: the next group gets a placement of its own
                    survivors = None
                try:
                    taken, survivors = survivors, None
                    group = RayGroup(cfg, part_path, workers, model, task, attempt=len(failures), nodes=nodes,
                                     placement=placement, survivors=taken)
                except PlacementError:
                    if nodes is None or set(nodes) <= set(alive_nodes()):
                        raise
                    continue  # a pinned node was marked dead meanwhile: place its ranks again
                nodes = group.nodes if placement is None else None
                staged = [{"rank": r, "node": n, **i.staging} for r, (n, i) in
                          enumerate(zip(group.nodes, group.infos, strict=True)) if i.staging is not None]
                if staged:
                    staging.append({"attempt": len(failures), "workers": staged})
                if failures:
                    failures[-1]["recovery_s"] = time.monotonic() - failures[-1]["_t_fail"]
                    failures[-1]["restarted_ranks"] = list(group.new_ranks)
                    del failures[-1]["_t_fail"]
                return _fit(cfg, group, run, task, ckpt, start_epoch, progress, on_epoch), failures, staging
            except WorkerFailure as e:
                reason = user_error(e.cause)
                if reason is not None:  # the same data fails the same way on every attempt
                    raise WorkerUserError(f"worker {e.rank} ({e.phase}): {reason}") from e
                gave_up = len(failures) >= cfg.train.max_failures
                if (group is not None and (POOL.active if gave_up else cfg.cluster.keep_survivors)
                        and 0 <= e.rank < len(group.actors) and set(group.nodes) <= set(alive_nodes())):
                    survivors = group.salvage(e.rank)
                if gave_up:
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
                console.print(f"[yellow]worker {e.rank} failed during {e.phase}; recovering from epoch "
                              f"{start_epoch} ({len(failures)}/{cfg.train.max_failures})[/yellow]")
            finally:
                if group is not None:
                    group.shutdown()
    finally:
        if survivors is not None and gave_up:
            survivors.keep()
        elif survivors is not None:  # the run ended (an error, an interrupt) before they were taken
            survivors.discard()


def _note_moves(failure: dict[str, Any], before: list[str], after: list[str], moves: list[Move],
                waited_s: float, console: Console) -> None:
    """Record in ``failure`` (a ``failures.json`` entry) which ranks left a lost node for
    which node, and say it on the console."""
    failure.update({"lost_nodes": sorted({m.from_node for m in moves}, key=before.index),
                    "moves": [m.to_dict() for m in moves], "replace_wait_s": waited_s,
                    "nodes_before": len(set(before)), "nodes_after": len(set(after))})
    for m in moves:
        where = ("a new node" if m.kind == "replaced" else
                 "surviving node " + m.to_node[:8] + " with worker(s) "
                 + ", ".join(str(r) for r, n in enumerate(after) if n == m.to_node and r != m.rank))
        console.print(f"[yellow]node {m.from_node[:8]} left the cluster: worker {m.rank} (part {m.rank}) "
                      f"moves to {where}[/yellow]")


def _headline(cause: str) -> str:
    """The line of a worker's error that says what happened (the exception's message)."""
    lines = [ln.strip() for ln in cause.split("\nworkers at failure:")[0].splitlines() if ln.strip()]
    return (lines[-1] if lines else cause)[:500]

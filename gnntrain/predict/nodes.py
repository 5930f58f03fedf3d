"""Every node's predictions or embeddings (:func:`predict`), written by the workers; the
layout, the manifest and the reader are in :mod:`gnntrain.predict.format`, documented in
:mod:`gnntrain.predict`."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnntrain.predict.format import (
    FORMAT_VERSION,
    SHARD_FORMATS,
    Manifest,
    PredictError,
    Shard,
    write_manifest_file,
)
from partition.storage import StorageError, is_remote, open_store

if TYPE_CHECKING:
    from gnntrain.config import RunConfig
    from gnntrain.models import ModelSpec
    from gnntrain.rundir import RunDir
    from gnntrain.runtime.group import WorkerGroup
    from gnntrain.tasks import Task
    from partition import TrainingSet
    from partition.graph import Graph

__all__ = ["WHATS", "open_run", "predict"]

WHATS = ("logits", "probs", "embeddings", "node_embedding")
"""The kinds the built-in task writes; a custom task may accept more through ``Task.predict``."""


def predict(run_dir: str | Path, what: str = "logits", layer: int | None = None,
            out: str | Path | None = None, *, force: bool = False, fmt: str = "npy",
            single_process: bool = False, model: ModelSpec | None = None,
            task: Task | None = None, graph: Graph | None = None, progress: bool = True,
            console: Any = None, checkpoint: str = "best",
            storage_options: Mapping[str, Any] | None = None) -> Path | str:
    """Write ``what`` for every node of the run in ``run_dir``; returns the output directory
    (its URI when ``out`` is one).

    ``run_dir`` may be a run's URI in an object store, read with ``storage_options``
    (:func:`open_run`; ``out`` is then required); the partition set the run recorded, when
    it is in a store, is opened there (its set-level files staged, never the graph loaded)
    with the run config's ``partition.storage_options`` and ``storage_options`` over them.
    ``out`` may be an object-store URI (``s3://bucket/predictions/logits``, reached with
    ``storage_options``): each worker uploads its own shard there and the manifest goes
    last, so the directory is complete exactly when ``manifest.json`` is there;
    ``read_predictions`` reads it back.

    ``checkpoint``: ``best`` (the epoch with the best validation metric, where the run
    kept one: ``train.keep_best``; else the newest) or ``last`` (the newest).

    ``model`` / ``task`` replace the run's ``model.arch`` / ``task.kind`` (for runs trained
    from Python with objects that cannot be named in a config); ``graph`` replaces loading
    ``dataset`` where the graph is needed (``single_process``, or a run whose partition
    set is gone). ``progress=False`` prints nothing. Every check runs before
    any worker starts; :class:`PredictError` names the bad value.
    """
    from rich.console import Console

    from gnntrain.checkpoint import CHECKPOINT_CHOICES, load_trained
    from gnntrain.tasks import build_task

    console = console or Console(stderr=True, quiet=not progress)
    if checkpoint not in CHECKPOINT_CHOICES:
        raise PredictError(f"--checkpoint {checkpoint!r}: expected one of {', '.join(CHECKPOINT_CHOICES)}")
    run, cfg = open_run(run_dir, storage_options, out)
    if fmt not in SHARD_FORMATS:
        raise PredictError(f"--format {fmt!r}: expected one of {', '.join(SHARD_FORMATS)}")
    if fmt == "parquet":
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise PredictError("--format parquet needs pyarrow (pip install pyarrow); "
                               "or use --format npy") from None
    task = task if task is not None else build_task(cfg.task.kind, dict(cfg.task.options))
    if what == "node_embedding" and cfg.model.node_embedding is None:
        raise PredictError("--what node_embedding: the run has no learnable node embedding "
                           "(model.node_embedding is not set); use --what embeddings")
    if what != "embeddings":
        if layer is not None:
            raise PredictError(f"--layer {layer}: only --what embeddings takes a layer "
                               f"(--what {what!r} is computed from the last layer)")
        if what != "node_embedding":
            _check_what(task, what)
    remote_out = out is not None and is_remote(out)
    if out is not None:
        _check_out(out, force, storage_options)
    ckpt = load_trained(run, checkpoint)
    if ckpt is None:
        raise PredictError(f"run_dir={str(run.path)!r}: no checkpoint in {run.path / 'checkpoints'} "
                           "(ckpt-<epoch>.pt); a run writes one at its end and every "
                           "train.checkpoint_every epochs")
    spec: ModelSpec = model if model is not None else cfg.model.arch

    pset: TrainingSet | None = None
    if single_process:
        graph = task.load_graph(cfg.dataset, graph)  # the graph the run trained on
        in_dim, num_classes = graph.num_features, graph.num_classes
    else:
        if storage_options:  # the run's config keeps no secret: the options given reach its set's store too
            cfg = cfg.model_copy(update={"partition": cfg.partition.model_copy(
                update={"storage_options": {**cfg.partition.storage_options, **storage_options}})})
        pset = _partition_set(run, cfg, graph, task)
        graph = None
        in_dim, num_classes = pset.num_features, pset.num_classes
    num_layers = _check_model(spec, cfg, task, cfg.model.input_dim(in_dim), num_classes, ckpt["model"])
    layer = _resolve_layer(what, layer, num_layers, cfg.model.node_embedding is not None)
    out_path = Path(out) if out is not None and not remote_out else run.path / "predictions" / (
        f"embeddings-layer{layer}" if what == "embeddings" else what)
    target = str(out) if remote_out else str(out_path)
    if not remote_out:
        _check_out(out_path, force)

    workers = 1 if single_process else cfg.cluster.workers
    console.print(f"predicting {what}" + (f" (rows after layer {layer})" if what == "embeddings" else "")
                  + f" with {workers} worker(s), layer-wise inference, checkpoint after epoch "
                  f"{int(ckpt['epochs_done'])}")
    if remote_out:  # the shards go straight to the store; a replaced directory loses its manifest first
        store = open_store(target, storage_options)
        for name in ["manifest.json", *sorted(set(store.names()) - {"manifest.json"})]:
            store.remove(name)
    else:
        out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{out_path.name}-", dir=None if remote_out else out_path.parent))
    shard_dir = target if remote_out else str(tmp.resolve())
    options = dict(storage_options or {}) if remote_out else None
    try:
        if graph is not None:
            from gnntrain.runtime.group import LocalGroup

            shards = _infer(LocalGroup(cfg, graph, spec, task), run, ckpt, what, layer, shard_dir, fmt, options,
                            progress)
        else:
            assert pset is not None
            from gnntrain.runtime.cluster import ray_session
            from gnntrain.runtime.ray_group import RayGroup

            with ray_session(cfg.cluster, workers):
                group = RayGroup(cfg, pset.location, workers, spec, task)  # absolute or a URI: workers start elsewhere
                try:
                    shards = _infer(group, run, ckpt, what, layer, shard_dir, fmt, options, progress)
                finally:
                    group.shutdown()
        manifest = Manifest(
            format_version=FORMAT_VERSION, what=what, layer=layer, format=fmt,  # type: ignore[arg-type]
            dtype=shards[0]["dtype"], width=int(shards[0]["shape"][1]),
            total_rows=sum(int(s["rows"]) for s in shards), shards=[Shard(**s) for s in shards],
            run_dir=run.location if run.mirror is not None else str(run.path.resolve()), checkpoint_epoch=int(ckpt["epochs_done"]), workers=workers)
        write_manifest_file(tmp, manifest)
        if remote_out:
            store.put("manifest.json", tmp / "manifest.json")  # last: the directory is complete
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            from partition.build import move_into_place

            move_into_place(tmp, out_path)  # the same atomic rename partition sets use
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    console.print(f"wrote {manifest.total_rows:,} rows x {manifest.width} ({what}) to {target}")
    return target if remote_out else out_path


def _infer(group: WorkerGroup, run: RunDir, ckpt: dict[str, Any], what: str, layer: int, shard_dir: str,
           fmt: str, storage_options: dict[str, Any] | None, progress: bool = False) -> list[dict[str, Any]]:
    """Load the checkpoint into every worker, run the layers needed, have each worker
    write its shard into ``shard_dir`` (a local directory or an object-store URI);
    returns the shards' manifest entries in part order."""
    from gnntrain.config import load_config
    from gnntrain.runtime.driver import restore, run_layers

    restore(group, run, ckpt, load_config(raw=run.read_config_raw()))
    if what != "node_embedding":
        run_layers(group, layer if what == "embeddings" else group.num_layers, phase="prediction",
                   progress=progress)
    shards: list[dict[str, Any]] = group.call("export", shard_dir, what, layer, fmt, storage_options,
                                              phase="prediction export")
    return sorted(shards, key=lambda s: int(s["part"]))


def open_run(run_dir: str | Path, storage_options: Mapping[str, Any] | None = None,
             out: str | Path | None = None) -> tuple[RunDir, RunConfig]:
    """The run to predict with, and its config. A run in an object store
    (``s3://.../runs/<name>-<stamp>``, reached with ``storage_options``) is fetched into a
    local cache (its config and newest and best checkpoints, checked against their
    manifests), within the run's own ``cluster.scratch_max_gb``; its predictions go to
    ``out``, a local path or an object-store URI, which it then requires."""
    from gnntrain.config import load_config
    from gnntrain.rundir import RunDir
    from partition.storage import is_remote

    if is_remote(run_dir):
        if out is None:
            raise PredictError(f"run_dir={str(run_dir)!r} is in an object store: give --out, a local path "
                               "or an object-store URI, for the predictions")
        try:
            run = RunDir.open(str(run_dir), storage_options=storage_options, kind="cache", what="run_dir")
        except FileNotFoundError as e:
            raise PredictError(str(e)) from None
    else:
        p = Path(run_dir)
        if not (p / "config.yaml").is_file():
            raise PredictError(f"run_dir={str(p)!r}: not a run directory (no config.yaml); pass the "
                               "directory a training run wrote, e.g. runs/<name>-<timestamp>")
        run = RunDir(p)
    cfg = load_config(raw=run.read_config_raw())
    run.bound_scratch(cfg.cluster.scratch_max_bytes)  # a fetched run: its own limit
    return run, cfg


def _check_what(task: Task, what: str) -> None:
    """Ask the task whether it writes ``what`` (on one dummy row, before any work)."""
    import torch

    try:
        task.predict(torch.zeros(1, 2), what)
    except ValueError as e:
        raise PredictError(str(e)) from None


def _check_out(out: str | Path, force: bool, storage_options: Mapping[str, Any] | None = None) -> None:
    if is_remote(out):
        store = open_store(str(out), storage_options)
        names = store.names()
        if names and not force:
            raise PredictError(f"--out {store.uri!r} exists; pass --force to replace it or choose "
                               "another URI")
        if names and not store.exists("manifest.json"):
            raise PredictError(f"--out {store.uri!r} exists and is not a prediction directory "
                               "(no manifest.json); --force only replaces earlier predictions")
        return
    out = Path(out)
    if not out.exists():
        return
    if not force:
        raise PredictError(f"--out {str(out)!r} exists; pass --force to replace it or choose "
                           "another path")
    if not (out.is_dir() and ((out / "manifest.json").is_file() or not any(out.iterdir()))):
        raise PredictError(f"--out {str(out)!r} exists and is not a prediction directory "
                           "(no manifest.json); --force only replaces earlier predictions")


def _partition_set(run: RunDir, cfg: RunConfig, graph: Graph | None, task: Task) -> TrainingSet:
    """The set the run trained on: the path or URI ``partition.json`` records (a URI reached
    with ``partition.storage_options``), else the stored set ``build_training_set`` finds
    again for the run's dataset and settings."""
    from partition import PartitionError, build_training_set, open_training_set

    pset = None
    report = run.path / "partition.json"
    if report.is_file():
        recorded = json.loads(report.read_text()).get("partition_path")
        if recorded and (is_remote(recorded) or Path(recorded).is_dir()):
            try:
                pset = open_training_set(recorded, cfg.partition.storage_options)
            except StorageError:
                raise  # the store is unreachable: say so, do not load the graph instead
            except PartitionError:
                pset = None
    if pset is None:
        pset = build_training_set(task.load_graph(cfg.dataset, graph), cfg.partition)
    if pset.num_parts != cfg.cluster.workers:
        raise PredictError(f"partition set {pset.path} has {pset.num_parts} parts but the run's "
                           f"cluster.workers={cfg.cluster.workers}; they must be equal")
    return pset


def _check_model(spec: ModelSpec, cfg: RunConfig, task: Task, in_dim: int, num_classes: int,
                 state: dict[str, Any]) -> int:
    """Build the model once here (a failing factory fails before Ray), check it takes the
    checkpoint and has ``layer()``; returns its number of layers."""
    from gnntrain.models import build_model, has_layerwise

    probe = build_model(spec, cfg.model, in_dim, task.out_dim(num_classes, cfg.model.hidden),
                        cfg.train.seed)
    try:
        probe.load_state_dict(state)
    except RuntimeError as e:
        first = str(e).strip().splitlines()
        raise PredictError(f"the checkpoint does not fit model {type(probe).__name__} "
                           f"(model.arch={cfg.model.arch!r}): {first[1].strip() if len(first) > 1 else first[0]}; "
                           "pass the model the run trained (predict(..., model=...))") from None
    if not has_layerwise(probe):
        raise PredictError(f"model {type(probe).__name__} has no layer(i, block, h) and num_layers: "
                           "gnntrain.predict needs exact layer-wise inference (see "
                           "gnntrain.models.protocol); add them to the model")
    return int(probe.num_layers)  # type: ignore[arg-type]


def _resolve_layer(what: str, layer: int | None, num_layers: int, has_table: bool = False) -> int:
    if what == "node_embedding":
        return 0
    if what != "embeddings":
        return num_layers
    if layer is None:
        return max(1, num_layers - 1)
    if layer == 0 and has_table:
        return 0
    if not 0 < layer <= num_layers:
        raise PredictError(f"--layer {layer}: out of range; the model has {num_layers} layers, "
                           f"allowed 1..{num_layers} (the rows after that layer; {num_layers} = "
                           "the model's outputs)")
    return layer

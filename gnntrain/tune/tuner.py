"""``gnntrain.sweep``: a Ray Tune sweep whose trials are k-worker gnntrain runs.

::

    import gnntrain
    from ray import tune

    result = gnntrain.sweep("datasets/cora.yaml", {"train.lr": tune.loguniform(1e-3, 1e-1)},
                          workers_per_trial=2, num_samples=8, scheduler="asha")
    result.best.run_dir, result.best.best, result.plot

Before any trial starts: the config and every key and value of the space are checked
(:func:`~gnntrain.tune.space.check_space`), the metric against what the task reports,
and each trial's CPUs against the cluster's; then each distinct partition set the trials
will train on is built once, in the driver (``partition.root`` is shared). Each trial is
one run in its own placement group (:mod:`gnntrain.tune.trial`); the summary
(:mod:`gnntrain.tune.summary`) is written into the sweep directory and printed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console

from gnntrain.api import ConfigLike, override_items, resolve_config
from gnntrain.config import ConfigError, RunConfig
from gnntrain.rundir_store import check_writable, staging_dir
from gnntrain.tune.space import check_space, parse_space, partition_settings, probe_values
from gnntrain.tune.summary import Sweep, print_sweep, summarise
from gnntrain.tune.trial import TrialShape, run_trial, trial_config, trial_resources
from partition.paths import check_component
from partition.staging import evict_scratch, hold
from partition.storage import FsspecStore, is_remote, local_path, open_store, secret_keys

if TYPE_CHECKING:
    from gnntrain.tasks.base import Task

__all__ = ["SCHEDULERS", "reported_metrics", "sweep"]

SCHEDULERS = ("asha", "median", "fifo")
"""The schedulers named by a string: ASHA, median stopping, none (every trial runs to its end)."""


def reported_metrics(task: Task) -> list[str]:
    """The metrics a trial of ``task`` reports to Tune: the loss, the epoch's seconds, every
    figure of the evaluated splits and of the training batches."""
    return ["loss", "epoch_s", *(f"{split}_{m}" for split in ("val", "test") for m in task.metric_names),
            *(f"train_{m}_batches" for m in task.batch_metric_names)]


def sweep(config: ConfigLike, param_space: Mapping[str, Any], *, workers_per_trial: int = 1,
         num_samples: int = 1, scheduler: str | Any = "asha", metric: str | None = None,
         mode: str = "max", storage: str | os.PathLike[str] | None = None, name: str | None = None,
         cpus_per_worker: float | None = None, coordinator_cpus: float = 0.5,
         gpus_per_worker: float | None = None, grace_period: int = 1,
         max_concurrent_trials: int | None = None, resume: bool = False, verbose: int = 0,
         console: Console | None = None, **overrides: Any) -> Sweep:
    """Sweep ``param_space`` (dotted config keys -> values or Ray Tune samplers;
    :mod:`gnntrain.tune.space`) over runs of ``config``, each on ``workers_per_trial``
    workers, and return the :class:`~gnntrain.tune.summary.Sweep`.

    ``num_samples``: trials (per grid point). ``scheduler``: ``asha``, ``median``,
    ``fifo`` or a Tune ``TrialScheduler``; it judges ``metric`` (default
    ``val_<task metric>``) in ``mode`` after at least ``grace_period`` evaluations.
    Each trial holds ``coordinator_cpus`` for its coordinator and ``cpus_per_worker``
    (default ``cluster.cpus_per_worker``, else 1) per worker: fractions are allowed.
    ``storage`` (default ``<train.run_root>/sweeps``) / ``name`` is the sweep directory: a
    local or shared directory, or an object-store URI (``s3://bucket/sweeps``, reached with
    ``train.storage_options``, credentials from the environment or a profile) that then holds
    Tune's state, every trial's run directory and the summary, so that a driver on another
    machine can resume the sweep; ``resume=True`` continues the sweep of that ``name``
    after its driver died: finished trials are kept, interrupted ones go on from their
    run's last checkpoint.
    ``**overrides`` are config keys as in :func:`gnntrain.fit`.
    """
    console = console or Console(stderr=True)
    cfg, _ = resolve_config(config, override_items(overrides))
    space = parse_space(param_space)
    if workers_per_trial < 1:
        raise ConfigError(f"workers_per_trial={workers_per_trial}: must be >= 1")
    if num_samples < 1:
        raise ConfigError(f"num_samples={num_samples}: must be >= 1")
    if mode not in ("max", "min"):
        raise ConfigError(f"mode={mode!r}: expected 'max' or 'min'")
    if isinstance(scheduler, str) and scheduler not in SCHEDULERS:
        raise ConfigError(f"scheduler={scheduler!r}: expected one of {', '.join(SCHEDULERS)} or a Tune TrialScheduler")
    shape = TrialShape(workers=workers_per_trial,
                       cpus_per_worker=float(cpus_per_worker or cfg.cluster.cpus_per_worker or 1.0),
                       coordinator_cpus=float(coordinator_cpus),
                       gpus_per_worker=float(gpus_per_worker or cfg.cluster.gpus_per_worker or 0.0))
    check_space(space, lambda spec: trial_config(cfg, spec, shape))
    from gnntrain.tasks import build_task

    task = build_task(cfg.task.kind, dict(cfg.task.options))
    metric = metric or f"val_{task.metric}"
    if metric not in reported_metrics(task):
        raise ConfigError(f"metric={metric!r}: task {cfg.task.kind!r} does not report it; it reports "
                          f"{', '.join(reported_metrics(task))}")
    if resume and name is None:
        raise ConfigError("resume=True: give the name of the sweep to resume (its directory under storage)")
    name = name or f"{cfg.dataset.name}-sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    check_component("sweep name", name)
    root = str(storage) if storage is not None else f"{str(cfg.train.run_root).rstrip('/')}/sweeps"
    options = dict(cfg.train.storage_options)
    if is_remote(root):
        secrets = secret_keys(options)
        if secrets:
            raise ConfigError(f"train.storage_options has {', '.join(secrets)}: a sweep on object storage "
                              f"({root}) keeps Ray Tune's state there, and Tune saves the file system it "
                              "writes with, options included; give the credentials through the environment "
                              "or a profile (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, "
                              "an instance role) and keep only endpoint_url and the like in storage_options")
        check_writable(root, options)  # a missing bucket or a wrong endpoint fails before any trial
        location = f"{root.rstrip('/')}/{name}"
        sweep_dir = staging_dir(location, cfg.cluster.scratch_dir, "sweeps")
        held = hold(sweep_dir)  # the driver's staging copy, held while the sweep runs  # noqa: F841
        if cfg.cluster.scratch_max_bytes is not None:  # other scratch entries make room
            evict_scratch(sweep_dir.parents[2], sweep_dir, cfg.cluster.scratch_max_bytes)
    else:
        sweep_dir = local_path(root).resolve() / name
        location = str(sweep_dir)
    local = {k: str(local_path(v).resolve()) for k, v in (("partition.root", cfg.partition.root),
                                                          ("train.run_root", cfg.train.run_root))
             if not is_remote(v)}
    cfg = cfg.with_overrides([f"{k}={v}" for k, v in local.items()])  # trials run elsewhere
    settings = partition_settings(space)

    from gnntrain.runtime.cluster import ray_session

    with ray_session(cfg.cluster, max(shape.workers_of(s) for s in settings)):
        _check_capacity(shape, settings)
        from gnntrain.runtime.coordinator import prepare_partition
        from gnntrain.runtime.worker_pool import POOL

        POOL.release()  # the trials' placement groups need the CPUs idle kept workers hold
        for s in settings:  # one partitioning per distinct setting, before any trial
            prepare_partition(trial_config(cfg, s, shape), task)
        results = _run(cfg, space, shape, location, metric, mode, scheduler, num_samples, grace_period,
                       max_concurrent_trials, resume, verbose)
    sweep = summarise(results, sweep_dir, location, options, metric, mode, _scheduler_name(scheduler))
    print_sweep(sweep, console)
    return sweep


def _check_capacity(shape: TrialShape, settings: list[dict[str, Any]]) -> None:
    """Refuse a trial that needs more CPUs than the Ray cluster has (Tune would wait for
    it forever), naming the key that sets its worker count."""
    import ray

    total = float(ray.cluster_resources().get("CPU", 0.0))
    for s in settings:
        workers = shape.workers_of(s)
        need = shape.cpus(workers)
        if need > total + 1e-9:
            key = f"space key 'cluster.workers'={workers}" if "cluster.workers" in s else \
                f"workers_per_trial={workers}"
            raise ConfigError(f"{key}: a trial needs {shape.coordinator_cpus:g} + {workers} x "
                              f"{shape.cpus_per_worker:g} = {need:g} CPUs but the Ray cluster has {total:g}; "
                              "use fewer workers or lower cpus_per_worker / coordinator_cpus")


def _scheduler_name(scheduler: str | Any) -> str:
    return {"asha": "ASHA", "median": "median stopping", "fifo": "FIFO"}.get(scheduler, type(scheduler).__name__) \
        if isinstance(scheduler, str) else type(scheduler).__name__


def _make_scheduler(scheduler: str | Any, max_t: int, grace_period: int) -> Any:
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, MedianStoppingRule

    if scheduler == "asha":
        return ASHAScheduler(time_attr="epoch", max_t=max_t, grace_period=grace_period, reduction_factor=2)
    if scheduler == "median":
        return MedianStoppingRule(time_attr="epoch", grace_period=grace_period, min_samples_required=2)
    if scheduler == "fifo":
        return FIFOScheduler()
    return scheduler


def _tune_storage(location: str, options: dict[str, Any]) -> tuple[str, Any]:
    """Where Tune keeps the sweep at ``location``: its path and, for an object store, the
    pyarrow file system over the store's fsspec one (what Tune's ``storage_filesystem`` takes)."""
    if not is_remote(location):
        return location, None
    import pyarrow.fs

    store = open_store(location, options)
    assert isinstance(store, FsspecStore)
    return store.path, pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(store.fs))


def _run(cfg: RunConfig, space: dict[str, Any], shape: TrialShape, location: str, metric: str, mode: str,
         scheduler: str | Any, num_samples: int, grace_period: int, max_concurrent: int | None,
         resume: bool, verbose: int) -> Any:
    """Run (or restore and go on with) the Tune experiment at ``location``; its ``ResultGrid``."""
    from ray import tune

    trainable = tune.with_resources(
        tune.with_parameters(run_trial, base=cfg.model_dump(mode="json"), shape=shape,
                             sweep_dir=location, metric=metric),
        resources=lambda spec: trial_resources(shape, spec))
    path, fs = _tune_storage(location, dict(cfg.train.storage_options))
    if resume and tune.Tuner.can_restore(path, storage_filesystem=fs):
        tuner = tune.Tuner.restore(path, trainable=trainable, resume_unfinished=True, resume_errored=True,
                                   storage_filesystem=fs)
    else:
        epochs = max([cfg.train.epochs, *_epochs_in(space)])
        parent, _, name = path.rstrip("/").rpartition("/")
        tuner = tune.Tuner(
            trainable, param_space=space,
            tune_config=tune.TuneConfig(metric=metric, mode=mode, num_samples=num_samples,
                                        scheduler=_make_scheduler(scheduler, epochs, grace_period),
                                        max_concurrent_trials=max_concurrent, reuse_actors=True),
            run_config=tune.RunConfig(name=name, storage_path=parent, storage_filesystem=fs, verbose=verbose))
    return tuner.fit()


def _epochs_in(space: dict[str, Any]) -> list[int]:
    """The largest ``train.epochs`` the space can set (ASHA's ``max_t``)."""
    return [int(v) for v in probe_values(space["train.epochs"])] if "train.epochs" in space else []

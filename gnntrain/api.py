"""The Python API: :func:`fit` runs exactly what ``python -m gnntrain.run`` runs (the CLI
is a thin shell over :func:`resolve_config` and :func:`train`, the same two functions);
:func:`load` reads a run back without Ray.

::

    import gnntrain

    run = gnntrain.fit("datasets/cora.yaml", workers=2, train__epochs=20)
    run.summary["final"]["test_acc"], run.run_dir, run.model      # the model on the CPU
    loaded = gnntrain.load(run.run_dir)                           # later, in another process

``config`` is a YAML path, a mapping of sections, or a :class:`~gnntrain.config.RunConfig`
(never modified). ``**overrides`` are config keys, written ``train__epochs=3`` or
``**{"train.epochs": 3}`` (the CLI's ``--set train.epochs=3``). ``model=`` replaces
``model.arch`` with a factory ``(in_dim, out_dim, model_config) -> nn.Module`` or a module
(:mod:`gnntrain.models.protocol`); ``task=`` replaces ``task.kind`` with a
:class:`~gnntrain.tasks.Task`. Both travel to the Ray workers as Python objects; one that
lives in a module is pickled by reference, so the workers import that module: on the
embedded Ray they get the driver's code directories
(:func:`gnntrain.runtime.cluster.worker_runtime_env`); on a cluster, ship the code with
``ray job submit --working-dir``.

This module is light to import (no torch, Ray or numba until a function runs).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnntrain.config import ConfigError, RunConfig, load_config
from gnntrain.rundir import RunDir

if TYPE_CHECKING:
    from rich.console import Console
    from torch import nn

    from gnntrain.models import ModelSpec
    from gnntrain.runtime.ray_group import GivenPlacement
    from gnntrain.tasks import Task
    from partition.graph import Graph

__all__ = ["ConfigLike", "Loaded", "Run", "fit", "load", "override_items", "resolve_config", "train"]

ConfigLike = str | os.PathLike[str] | Mapping[str, Any] | RunConfig
"""What names a run's config: a YAML path, a mapping of sections, or a RunConfig."""


@dataclass
class Run:
    """A finished run: its directory, ``summary.json``, the resolved config, and the
    trained model (from the final checkpoint, on the CPU, in eval mode). ``location`` is
    where the run lives: its URI for a ``train.run_root`` on object storage (``run_dir`` is
    then the local staging copy, which holds every file), else ``str(run_dir)``."""

    run_dir: Path
    summary: dict[str, Any]
    config: RunConfig
    model: nn.Module
    location: str


@dataclass
class Loaded:
    """A run read back by :func:`load`: its config and the model of the checkpoint asked
    for (on the CPU, in eval mode), trained ``epochs_done`` epochs. ``location`` is what
    was given to :func:`load`; for a run in a store, ``run_dir`` is the local copy of what
    was fetched."""

    run_dir: Path
    config: RunConfig
    model: nn.Module
    epochs_done: int
    location: str


def override_items(overrides: Mapping[str, Any]) -> list[str]:
    """Keyword overrides as ``KEY=VALUE`` items of the CLI's ``--set``:
    ``{"train.epochs": 3, "model__options__aggr": "mean"}`` ->
    ``["train.epochs=3", 'model.options.aggr="mean"']`` (values written as JSON, which
    the config reader parses back to the same value)."""
    items = []
    for key, value in overrides.items():
        path = key.replace("__", ".")
        if "." not in path:
            raise ConfigError(f"{key}={value!r}: neither an argument of fit() nor a config key; a "
                              "config key names its section: train__epochs=3 or **{'train.epochs': 3}")
        items.append(f"{path}={json.dumps(value, default=str)}")
    return items


def resolve_config(config: ConfigLike | None, overrides: Sequence[str] = (), *,
                   workers: int | None = None, address: str | None = None,
                   resume: str | os.PathLike[str] | None = None) -> tuple[RunConfig, RunDir | None]:
    """The config of a run, validated before any data is read or Ray starts.

    ``overrides`` are ``KEY=VALUE`` items; ``workers`` sets ``cluster.workers`` and
    ``partition.parts`` (one part per worker), ``address`` sets ``cluster.address``.
    With ``resume`` (a run directory) the run's own config is used and the run directory
    is returned too.
    """
    items = list(overrides)
    if workers is not None:
        if workers < 1:
            raise ConfigError(f"workers={workers}: must be >= 1")
        items += [f"cluster.workers={workers}", f"partition.parts={workers}"]
    if address:
        items.append(f"cluster.address={address}")
    if resume is not None:
        from gnntrain.checkpoint import list_checkpoints

        # a run in a store is read with the options the overrides give (config.yaml has no secrets)
        raw = RunDir.read_config_at(str(resume), _storage_overrides(items))
        cfg = load_config(raw=raw, overrides=items)
        run = RunDir.open(str(resume), storage_options=cfg.train.storage_options,
                          scratch=cfg.cluster.scratch_dir, max_bytes=cfg.cluster.scratch_max_bytes)
        if not list_checkpoints(run):
            raise ConfigError(f"--resume {resume}: the run has no checkpoint to continue "
                              f"from (nothing in {run.location}/checkpoints); start a new run instead")
        return cfg, run
    if config is None:
        raise ConfigError("config=None: give a YAML path, a mapping of sections or a RunConfig")
    if isinstance(config, RunConfig):
        return config.with_overrides(items), None
    if isinstance(config, Mapping):
        return load_config(raw=dict(config), overrides=items), None
    return load_config(config, items), None


def _storage_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``train.storage_options`` as the ``KEY=VALUE`` items alone set it ({} if they do not)."""
    from gnntrain.config.loading import apply_override

    raw: dict[str, Any] = {}
    for item in items:
        if item.partition("=")[0].strip().startswith("train.storage_options"):
            apply_override(raw, item, RunConfig)
    return dict(raw.get("train", {}).get("storage_options", {}))


def check_startable(cfg: RunConfig, *, single_process: bool) -> None:
    """What can be known about this machine before Ray starts: the run root is writable
    (a store's by writing and deleting one empty object); an embedded Ray has the CPUs and
    the CUDA device the config asks for."""
    from partition.storage import StorageError, is_remote

    if is_remote(cfg.train.run_root):
        from gnntrain.rundir_store import check_writable

        try:
            check_writable(cfg.train.run_root, cfg.train.storage_options)
        except StorageError as e:
            raise ConfigError(f"train.run_root={cfg.train.run_root!r}: cannot write run directories "
                              f"there: {e}") from None
    else:
        root = Path(cfg.train.run_root)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigError(f"train.run_root={str(root)!r}: cannot create run directories there "
                              f"({e.strerror or e}); choose a writable directory") from None
    embedded = single_process or not (cfg.cluster.address or os.environ.get("RAY_ADDRESS"))
    if not embedded:  # a cluster's CPUs and GPUs are checked when the workers are placed
        return
    if cfg.train.precision == "bf16" and cfg.train.device == "cpu":
        from gnntrain.precision import cpu_bf16_native  # torch only when bf16 is asked for

        if cpu_bf16_native() is False:
            warnings.warn("train.precision='bf16' on a CPU without bfloat16 instructions (no "
                          "avx512_bf16/amx_bf16/bf16 flag): its matrix products are emulated and "
                          "a step can take several times the float32 one; train.precision=fp32 "
                          "is faster here", RuntimeWarning, stacklevel=2)
    if cfg.train.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("train.device='cuda' but this machine has no usable CUDA device "
                              "(torch.cuda.is_available() is False); set train.device=cpu, or "
                              "join a cluster with GPUs (--address)")
    cc = cfg.cluster
    if cc.cpus_per_worker is not None and not single_process:
        total = max(1, round(cc.num_cpus)) if cc.num_cpus else (os.cpu_count() or 1)
        need = cc.cpus_per_worker * cc.workers
        if need > total + 1e-9:
            raise ConfigError(
                f"cluster.cpus_per_worker={cc.cpus_per_worker:g} x {cc.workers} workers needs "
                f"{need:g} CPUs but the embedded Ray has {total}; lower cluster.cpus_per_worker "
                "(or leave it unset to share the CPUs), or use fewer workers")


def _check_spec(model: ModelSpec | None, task: Task | None, cfg: RunConfig) -> None:
    """Fail before any data is read when the model or task cannot be what is asked for."""
    from torch import nn

    from gnntrain.models import resolve_factory
    from gnntrain.tasks import Task

    if model is None:
        resolve_factory(cfg.model.arch)  # imports a user module now: a typo fails here
    elif not (isinstance(model, nn.Module) or callable(model)):
        raise ConfigError(f"model={model!r}: expected a factory (in_dim, out_dim, model_config) -> "
                          "nn.Module or an nn.Module")
    if task is not None and not isinstance(task, Task):
        raise ConfigError(f"task={task!r}: expected a gnntrain Task (e.g. NodeClassification())")


def train(cfg: RunConfig, *, model: ModelSpec | None = None, task: Task | None = None,
          single_process: bool = False, resume: RunDir | None = None, run_dir: Path | RunDir | None = None,
          graph: Graph | None = None, progress: bool = True,
          console: Console | None = None, placement: GivenPlacement | None = None,
          on_epoch: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Train as ``cfg`` says and write the run directory; returns ``summary.json``'s dict
    (with ``run_dir``). The one path of the CLI, :func:`fit` and a Tune trial
    (``placement`` and ``on_epoch``: :func:`~gnntrain.runtime.coordinator.run_training`)."""
    from gnntrain.runtime.coordinator import run_training

    _check_spec(model, task, cfg)
    check_startable(cfg, single_process=single_process)
    if resume is not None and model is None:
        info = _model_info(resume)
        if info is not None and info.get("arch") is None:
            raise ConfigError(f"--resume {resume.path}: the run was trained with a Python model object "
                              f"({info.get('class')}), not an importable model.arch; resume it "
                              "from Python: gnntrain.fit(config=None, resume=run_dir, model=<the same>)")
    return run_training(cfg, single_process=single_process, resume=resume, run_dir=run_dir,
                        progress=progress, console=console, graph=graph, model=model, task=task,
                        placement=placement, on_epoch=on_epoch)


def fit(config: ConfigLike | None, *, model: ModelSpec | None = None, task: Task | None = None,
        workers: int | None = None, single_process: bool = False, graph: Graph | None = None,
        progress: bool = True, address: str | None = None,
        resume: str | os.PathLike[str] | None = None, console: Console | None = None,
        **overrides: Any) -> Run:
    """Run exactly what ``python -m gnntrain.run`` runs and return the :class:`Run`.

    ``workers``, ``single_process``, ``address`` and ``resume`` are the CLI's
    ``--workers``, ``--single-process``, ``--address`` and ``--resume`` (with ``resume``,
    ``config`` may be None: the run's own config is used); ``graph`` (an
    in-memory :class:`~partition.graph.Graph`) replaces loading ``dataset``; ``model`` and
    ``task`` replace ``model.arch`` and ``task.kind`` (see the module docstring).
    """
    cfg, resumed = resolve_config(config, override_items(overrides), workers=workers,
                                  address=address, resume=resume)
    summary = train(cfg, model=model, task=task, single_process=single_process, resume=resumed,
                    graph=graph, progress=progress, console=console)
    location = str(summary["run_dir"])
    from partition.storage import is_remote

    if is_remote(location):
        from gnntrain.rundir_store import staging_dir

        run = RunDir(staging_dir(location, cfg.cluster.scratch_dir))
    else:
        run = RunDir(Path(location))
    net, _ = _trained_model(run, cfg, model)
    return Run(run_dir=run.path, summary=summary, config=cfg, model=net, location=location)


def load(run_dir: str | os.PathLike[str], *, model: ModelSpec | None = None,
         checkpoint: str = "best", storage_options: Mapping[str, Any] | None = None) -> Loaded:
    """The config and trained model of ``run_dir`` (on the CPU), without Ray.

    ``checkpoint``: ``best`` (the epoch with the best validation metric, where the run
    kept one: ``train.keep_best``; else the newest) or ``last`` (the newest checkpoint).
    ``model`` is needed when the run was given a Python object (``fit(model=...)``) rather
    than an importable ``model.arch``: pass the same factory or module again.

    ``run_dir`` may be a run's URI in an object store (``s3://bucket/runs/<name>-<stamp>``,
    reached with ``storage_options``, e.g. ``endpoint_url``): its config and its newest and
    best complete checkpoints are fetched into a local cache (``gnntrain-scratch/cache`` under
    the temp directory), each object checked against the checkpoint's manifest.
    """
    location = str(run_dir)
    run = RunDir.open(location, storage_options=storage_options, kind="cache", what="load()")
    cfg = load_config(raw=run.read_config_raw())
    run.bound_scratch(cfg.cluster.scratch_max_bytes)  # the run's own limit, known once fetched
    net, epochs = _trained_model(run, cfg, model, checkpoint)
    return Loaded(run_dir=run.path, config=cfg, model=net, epochs_done=epochs, location=location)


def _model_info(run: RunDir) -> dict[str, Any] | None:
    """The run's ``model.json`` (widths, class, ``arch`` or None for a Python object)."""
    path = run.path / "model.json"
    if not path.is_file():
        return None
    info: dict[str, Any] = json.loads(path.read_text())
    return info


def _trained_model(run: RunDir, cfg: RunConfig, model: ModelSpec | None,
                   checkpoint: str = "last") -> tuple[nn.Module, int]:
    """The run's model, rebuilt from ``model.json`` and ``model`` (or the run's
    ``model.arch``), with the parameters of ``checkpoint`` (:func:`load_trained`); and its
    epoch count."""
    from gnntrain.checkpoint import load_trained
    from gnntrain.models import build_model

    info = _model_info(run)
    if info is None:
        raise FileNotFoundError(f"{run.path}: no model.json (written by every run since gnntrain "
                                "0.2); the model's widths are unknown")
    if model is None:
        if info.get("arch") is None:
            raise ValueError(
                f"{run.path} was trained with a Python model object ({info.get('class')}), not an "
                "importable model.arch: pass it again, gnntrain.load(run_dir, model=<the factory or "
                "module given to fit>)")
        model = info["arch"]
    ckpt = load_trained(run, checkpoint)
    if ckpt is None:
        raise FileNotFoundError(f"{run.path}: no readable checkpoint under checkpoints/ (a run "
                                "writes one at its end; train.checkpoint_every sets more)")
    net = build_model(model, cfg.model, int(info["in_dim"]), int(info["out_dim"]), cfg.train.seed)
    try:
        net.load_state_dict(ckpt["model"])
    except RuntimeError as e:
        raise ValueError(f"{run.path}: the checkpoint's parameters do not fit model "
                         f"{type(net).__name__} (the run trained {info.get('class')}): {e}") from None
    return net.cpu().eval(), int(ckpt["epochs_done"])

"""One trial of a sweep: an ordinary gnntrain run inside a Ray Tune trial.

The trial's placement group (:func:`trial_resources`) has bundle 0 for the trial actor,
which runs the coordinator, and bundles 1..k for the k worker actors
(:class:`~gnntrain.runtime.ray_group.GivenPlacement`), so Tune's scheduler accounts for
every CPU and GPU a trial uses. The run directory is ``<sweep>/runs/<trial id>``: a run
directory like any other (``gnntrain.load`` reads it), on local disk or, for a sweep on
object storage, in the store (:meth:`~gnntrain.rundir.RunDir.at`). Each evaluated epoch is
reported to Tune (:func:`tune_metrics`; the last one after the run has written its
summary), so a scheduler (ASHA, median stopping) can end the trial.
Tune reuses a trial's actor for the next trial of the same resources (``reuse_actors``):
the actor keeps its placement group and its idle worker actors, which the next trial's run
loads its own config and part into (:meth:`~gnntrain.runtime.worker_pool.WorkerPool.hold`);
otherwise Tune ends the actor and removes the placement group, and the workers end with
them. A trial restarted after the sweep's driver died continues its run directory from
the last checkpoint (``train.checkpoint_every``); one whose run had ended (Tune saves its
own state every few seconds, so a trial may end after the last save) reports its last
evaluated epoch again and trains nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gnntrain.config import RunConfig, load_config
from gnntrain.tune.space import spec_items
from partition.storage import Store, open_store

__all__ = ["TrialShape", "run_trial", "trial_config", "trial_resources", "tune_metrics"]


@dataclass(frozen=True)
class TrialShape:
    """The resources of one trial: its workers (unless the space sets ``cluster.workers``),
    the CPUs of each worker, the CPUs of the trial actor (the coordinator) and the GPUs of
    each worker."""

    workers: int
    cpus_per_worker: float
    coordinator_cpus: float
    gpus_per_worker: float = 0.0

    def workers_of(self, spec: dict[str, Any]) -> int:
        """The worker count of a trial whose sampled values are ``spec``."""
        return int(spec.get("cluster.workers", self.workers))

    def cpus(self, workers: int) -> float:
        """The CPUs a trial of ``workers`` workers holds."""
        return self.coordinator_cpus + self.cpus_per_worker * workers


def trial_resources(shape: TrialShape, spec: dict[str, Any]) -> Any:
    """The placement group of a trial: the coordinator's bundle, then one per worker."""
    from ray.tune import PlacementGroupFactory

    gpu = {"GPU": shape.gpus_per_worker} if shape.gpus_per_worker else {}
    return PlacementGroupFactory([{"CPU": shape.coordinator_cpus}]
                                 + [{"CPU": shape.cpus_per_worker, **gpu}] * shape.workers_of(spec))


def trial_config(base: RunConfig, spec: dict[str, Any], shape: TrialShape) -> RunConfig:
    """The run config of the trial ``spec`` (sampled values by dotted key): ``base`` with
    them, one part per worker and the workers' CPUs of the trial's bundles."""
    workers = shape.workers_of(spec)
    items = [f"cluster.workers={workers}", f"partition.parts={workers}",
             f"cluster.cpus_per_worker={shape.cpus_per_worker}"]
    if shape.gpus_per_worker:
        items.append(f"cluster.gpus_per_worker={shape.gpus_per_worker}")
    return base.with_overrides([*items, *spec_items(spec)])


def tune_metrics(rec: dict[str, Any]) -> dict[str, Any]:
    """What a trial reports to Tune of one epoch's metrics record: the epochs done, the
    loss, the epoch's seconds and every ``train_``/``val_``/``test_`` figure."""
    out: dict[str, Any] = {"epoch": int(rec["epoch"]) + 1, "loss": float(rec["loss"]),
                           "epoch_s": float(rec["epoch_s"])}
    out.update({k: float(v) for k, v in rec.items()
                if k.startswith(("train_", "val_", "test_")) and isinstance(v, int | float)})
    if "stopped_early" in rec:
        out["stopped_early"] = True
    return out


def run_trial(spec: dict[str, Any], *, base: dict[str, Any], shape: TrialShape, sweep_dir: str,
              metric: str) -> None:
    """The Tune trainable: train the trial's config in its placement group and report
    every epoch that has ``metric`` (the evaluated ones). ``sweep_dir`` is the sweep's
    directory or its URI in an object store (``train.storage_options`` reach it)."""
    from ray import tune

    from gnntrain.api import train
    from gnntrain.checkpoint import list_checkpoints
    from gnntrain.rundir import RunDir
    from gnntrain.runtime.ray_group import GivenPlacement
    from gnntrain.runtime.worker_pool import POOL

    cfg = trial_config(load_config(raw=base), spec, shape)
    placement = GivenPlacement.current()
    if placement is not None:  # a trial actor: Tune reuses it, with its workers, for the next trial
        POOL.hold()
    location = f"{sweep_dir.rstrip('/')}/runs/{tune.get_context().get_trial_id()}"
    options, scratch = cfg.train.storage_options, cfg.cluster.scratch_dir
    files = open_store(location, options)
    if files.exists("summary.json"):
        # the run ended before the sweep's driver died, after Tune last saved its state:
        # report its last evaluated epoch again, train nothing, rewrite nothing
        report_last(files, metric)
        return
    resume = None
    if files.exists("config.yaml"):  # the trial of a restored sweep: go on from its checkpoint
        earlier = RunDir.open(location, storage_options=options, scratch=scratch,
                              max_bytes=cfg.cluster.scratch_max_bytes)
        resume = earlier if list_checkpoints(earlier) else None

    def report(rec: dict[str, Any]) -> None:
        last = int(rec["epoch"]) + 1 == cfg.train.epochs or "stopped_early" in rec
        if metric in rec and not last:  # the last one once the run directory is complete
            tune.report(tune_metrics(rec))

    fresh = (RunDir.at(location, storage_options=options, scratch=scratch, max_bytes=cfg.cluster.scratch_max_bytes)
             if resume is None else None)
    train(cfg, run_dir=fresh, resume=resume, progress=False, placement=placement, on_epoch=report)
    report_last(files, metric)  # a scheduler that stops the trial now stops a finished run


def report_last(run: Store, metric: str) -> None:
    """Report the last epoch of the run directory ``run`` that has ``metric`` to Tune."""
    from ray import tune

    from gnntrain.rundir import metrics_in

    evaluated = [r for r in metrics_in(run) if metric in r]
    if evaluated:
        tune.report(tune_metrics(evaluated[-1]))

"""gnntrain.sweep: a Ray Tune sweep of 2-worker Cora runs, each in its trial's own placement
group, with ASHA ending poor trials early; the best trial equals a plain fit of its config
bit for bit; bad input fails before any trial starts, naming the key."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

import gnntrain
from bench.harness.s3 import new_bucket
from gnntrain.config import ConfigError, RunConfig, load_config
from gnntrain.rundir import metrics_in
from gnntrain.tune.space import parse_space, partition_settings
from partition.storage import FsspecStore, open_store
from tests.conftest import REPO, SESSION_CPUS
from tests.runtime.helpers import final_params, worker_actors_started
from tests.runtime.test_failures import live_ray_leftovers
from tests.test_accuracy_cora import cora_cfg

tune = pytest.importorskip("ray.tune", reason="gnntrain[tune] not installed")


def small_cora(tmp: Path, data_root: Path) -> RunConfig:
    """Cora, small and short: the sweep is about placement, reporting and stopping."""
    return cora_cfg(tmp, f"dataset.path={data_root / 'planetoid'}", "model.hidden=16", "train.epochs=4",
                    "train.eval_every=1", "sampler.fanouts=[5,5]", "sampler.batch_size=70")


def test_sweep_of_four_two_worker_trials_with_asha(ray_local: None, data_root: Path, tmp_path: Path,
                                                   s3_endpoint: str) -> None:
    """The sweep lives on an S3 server (127.0.0.1): Tune's state, the trials' run
    directories and the summary go to the store; credentials from the environment, so only
    the endpoint is in ``train.storage_options`` (here: a bucket open to unsigned requests)."""
    uri, options = new_bucket(s3_endpoint, "sweeps", anonymous=True)
    cfg = small_cora(tmp_path, data_root).with_overrides(
        [f"train.storage_options={json.dumps(options)}", f"cluster.scratch_dir={tmp_path / 'scratch'}"])
    started = worker_actors_started()
    # a learning rate of 1e-5 learns nothing in 4 epochs: ASHA has a poor trial to stop
    space = {"train.lr": {"grid_search": [0.02, 0.01, 1e-5, 2e-5]}}
    # one trial at a time, the good learning rates first: ASHA has their first-epoch results
    # when a poor trial reports its own, so its decision does not depend on which trial
    # happens to report first
    result = gnntrain.sweep(cfg, space, workers_per_trial=2, num_samples=1, scheduler="asha",
                            cpus_per_worker=0.5, coordinator_cpus=0.5, max_concurrent_trials=1,
                            storage=f"{uri}/sweeps", name="lr")
    assert live_ray_leftovers() == {"actors": [], "placement_groups": []}, "a trial left actors or groups"
    # Tune reused a trial actor for the next trial, and the actor its two workers: fewer
    # than the 4 x 2 worker actors of four fresh trials were started
    assert worker_actors_started() - started < 8, worker_actors_started() - started
    assert len(result.trials) == 4
    assert all(not t.stopped.startswith("error") for t in result.trials), [t.stopped for t in result.trials]
    stopped = [t for t in result.trials if t.stopped == "stopped by ASHA"]
    assert stopped and all(t.epochs < 4 for t in stopped), [(t.stopped, t.epochs) for t in result.trials]
    # one partitioning for the four trials: every trial reused the set the driver built
    assert len(list((tmp_path / "parts").iterdir())) == 1
    # everything in the store: the summary, Tune's state, each trial's run directory
    sweep = open_store(f"{uri}/sweeps/lr", options)
    assert isinstance(sweep, FsspecStore) and result.location == sweep.uri
    for name in ("sweep.json", "sweep.md", "sweep.png"):
        assert (result.sweep_dir / name).is_file() and sweep.exists(name), name
    assert tune.Tuner.can_restore(sweep.uri.removeprefix("s3://"), storage_filesystem=tune_filesystem(options))
    assert json.loads(sweep.read_bytes("sweep.json"))["best_run_dir"] == result.best_run_dir
    for t in result.trials:
        assert t.run_dir == f"{sweep.uri}/runs/{t.trial_id}"
        run = sweep.child("runs").child(t.trial_id)
        assert run.exists("config.yaml") and run.exists("summary.json") == (t.stopped == "finished")
        assert len(metrics_in(run)) == t.epochs

    # the driver and its machine gone (every local copy removed), the same call with
    # resume=True restores the sweep from the store: nothing is run again
    written = store_times(sweep)
    shutil.rmtree(tmp_path / "scratch")
    again = gnntrain.sweep(cfg, space, workers_per_trial=2, cpus_per_worker=0.5, coordinator_cpus=0.5,
                           max_concurrent_trials=1, storage=f"{uri}/sweeps", name="lr", resume=True)
    assert [(t.trial_id, t.best, t.epochs, t.stopped) for t in again.trials] == \
        [(t.trial_id, t.best, t.epochs, t.stopped) for t in result.trials]
    assert {k: v for k, v in store_times(sweep).items() if "/runs/" in k} == \
        {k: v for k, v in written.items() if "/runs/" in k}

    best = result.best
    assert best is not None and best.stopped == "finished" and best.config["train.lr"] in (0.02, 0.01)
    # an ordinary run directory, read from the store
    loaded = gnntrain.load(best.run_dir, checkpoint="last", storage_options=options)
    assert loaded.epochs_done == 4 and loaded.config.cluster.workers == 2
    trial_summary = json.loads(sweep.child("runs").child(best.trial_id).read_bytes("summary.json"))
    plain = gnntrain.fit(loaded.config.with_overrides([f"train.run_root={tmp_path / 'plain'}"]),
                         progress=False)  # the trial's config, outside Tune
    assert plain.summary["final"] == trial_summary["final"]
    for k, v in plain.model.state_dict().items():
        assert torch.equal(v, loaded.model.state_dict()[k]), k


def store_times(store: FsspecStore) -> dict[str, str]:
    """Every object under ``store`` and when it was last written."""
    return {k: str(v.get("LastModified")) for k, v in store.fs.find(store.path, detail=True).items()}


def tune_filesystem(options: dict[str, object]) -> object:
    import pyarrow.fs
    import s3fs

    return pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(s3fs.S3FileSystem(**options)))


def test_a_sweep_whose_driver_is_killed_resumes_where_it_stopped(joined_env: dict[str, str], data_root: Path,
                                                                 tmp_path: Path) -> None:
    """The sweep's driver (``python -m gnntrain.tune``, joined to the session's Ray) is killed
    with SIGKILL while its second trial runs; the same sweep resumed (``resume=True``): the
    finished trial is not run again, the interrupted one goes on from its last checkpoint (no
    epoch trained twice) and ends with the parameters of an uninterrupted run of its config,
    and nothing of the killed driver is left in Ray."""
    cfg = small_cora(tmp_path, data_root).with_overrides(["train.checkpoint_every=1"])
    (tmp_path / "cora.yaml").write_text(yaml.safe_dump(cfg.public_dump(), sort_keys=False))
    (tmp_path / "space.yaml").write_text("train.lr: {grid_search: [0.02, 0.01]}\n")
    sweeps = tmp_path / "sweeps"
    argv = [sys.executable, "-m", "gnntrain.tune", "--config", str(tmp_path / "cora.yaml"),
            "--space", str(tmp_path / "space.yaml"), "--name", "killed", "--storage", str(sweeps),
            "--workers-per-trial", "1", "--cpus-per-worker", "0.5", "--max-concurrent", "1",
            "--scheduler", "fifo"]
    runs = sweeps / "killed" / "runs"
    with (tmp_path / "driver.log").open("w") as log:
        proc = subprocess.Popen(argv, cwd=REPO, env=joined_env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 240
            # the first trial finished (its summary written), the second past its 2nd checkpoint
            while not (list(runs.glob("*/summary.json")) and list(runs.glob("*/checkpoints/ckpt-00002.pt"))
                       and len(list(runs.iterdir())) == 2):
                assert proc.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the sweep did not reach its second trial"
                time.sleep(0.05)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    [done] = [d for d in runs.iterdir() if (d / "summary.json").exists()]
    [cut] = [d for d in runs.iterdir() if d != done]
    assert not (cut / "summary.json").exists(), "the second trial finished before the kill"
    written = (done / "metrics.jsonl").stat().st_mtime_ns

    space = {"train.lr": {"grid_search": [0.02, 0.01]}}
    result = gnntrain.sweep(cfg, space, workers_per_trial=1, cpus_per_worker=0.5, max_concurrent_trials=1,
                            scheduler="fifo", storage=sweeps, name="killed", resume=True)
    assert sorted(Path(t.run_dir) for t in result.trials) == sorted([done, cut])
    assert all(t.stopped == "finished" and t.epochs == 4 for t in result.trials), result.trials
    assert (done / "metrics.jsonl").stat().st_mtime_ns == written  # the finished trial: not run again
    epochs = [json.loads(ln)["epoch"] for ln in (cut / "metrics.jsonl").read_text().splitlines()]
    assert epochs == [0, 1, 2, 3], epochs  # the interrupted trial went on: no epoch trained twice
    assert live_ray_leftovers() == {"actors": [], "placement_groups": []}

    resumed = json.loads((cut / "summary.json").read_text())
    plain = gnntrain.fit(gnntrain.load(cut, checkpoint="last").config, progress=False)
    for k, v in final_params(plain.summary).items():
        assert torch.equal(v, final_params(resumed)[k]), k


def test_unknown_key_in_space_fails_naming_it(tmp_path: Path, data_root: Path) -> None:
    with pytest.raises(ConfigError, match="train.lrr"):
        gnntrain.sweep(small_cora(tmp_path, data_root), {"train.lrr": {"loguniform": [1e-3, 1e-1]}},
                      storage=tmp_path / "sweeps")
    with pytest.raises(ConfigError, match="model.hidden"):  # a value the config refuses
        gnntrain.sweep(small_cora(tmp_path, data_root), {"model.hidden": {"choice": [16, "wide"]}},
                      storage=tmp_path / "sweeps")
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "parts").exists()


def test_a_sweep_on_object_storage_refuses_secrets_in_its_options(tmp_path: Path, data_root: Path) -> None:
    """Tune saves the file system of a sweep's storage with the sweep's state: a key in
    ``train.storage_options`` would reach the store, so it is refused before any work."""
    options = {"endpoint_url": "http://127.0.0.1:9", "key": "AKIA-not-shown", "secret": "not-shown-either"}
    cfg = small_cora(tmp_path, data_root).with_overrides([f"train.storage_options={json.dumps(options)}"])
    with pytest.raises(ConfigError, match="train.storage_options has key, secret: .*environment") as err:
        gnntrain.sweep(cfg, {"train.lr": 0.01}, storage="s3://bucket/sweeps", name="x")
    assert "not-shown" not in str(err.value)
    assert not (tmp_path / "parts").exists()


def test_unreported_metric_fails_naming_it(tmp_path: Path, data_root: Path) -> None:
    with pytest.raises(ConfigError, match="metric='val_f1'.*val_acc"):
        gnntrain.sweep(small_cora(tmp_path, data_root), {"train.lr": 0.01}, metric="val_f1",
                      storage=tmp_path / "sweeps")


def test_a_sweep_may_judge_every_figure_its_task_reports(tmp_path: Path) -> None:
    """Link prediction reports Hits@K, MRR and AUC per split (``ranking: pairs``) and the
    training batches' pair accuracy: each is a metric a sweep may judge, and a figure the
    task does not report is refused naming them all."""
    import numpy as np

    from gnntrain.tasks.link import LinkPrediction
    from gnntrain.tune.tuner import reported_metrics

    task = LinkPrediction()
    rng = np.random.default_rng(0)
    assert tuple(task.metrics({"pos": rng.random(30), "neg": rng.random(90)})) == task.metric_names
    train_state = {"correct": np.array([7]), "total": np.array([10])}
    assert tuple(task.metrics(train_state)) == task.batch_metric_names
    assert reported_metrics(task) == ["loss", "epoch_s", "val_hits", "val_mrr", "val_auc", "test_hits",
                                      "test_mrr", "test_auc", "train_pair_acc_batches"]
    assert reported_metrics(LinkPrediction(ranking="items"))[2:4] == ["val_recall", "val_ndcg"]
    cfg = load_config(raw={"dataset": {"name": "t", "source": "synthetic"}, "task": {"kind": "link"},
                           "train": {"run_root": str(tmp_path / "runs")},
                           "partition": {"root": str(tmp_path / "parts")}})
    with pytest.raises(ConfigError, match="metric='val_acc'.*val_hits, val_mrr, val_auc"):
        gnntrain.sweep(cfg, {"train.lr": 0.01}, metric="val_acc", storage=tmp_path / "sweeps")
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "parts").exists()


def test_workers_beyond_the_clusters_cpus_fail_before_any_trial(ray_local: None, tmp_path: Path,
                                                                 data_root: Path) -> None:
    cfg = small_cora(tmp_path, data_root)
    many = 2 * SESSION_CPUS
    with pytest.raises(ConfigError, match=f"space key 'cluster.workers'={many}.*{SESSION_CPUS}"):
        gnntrain.sweep(cfg, {"cluster.workers": {"choice": [2, many]}}, storage=tmp_path / "sweeps")
    with pytest.raises(ConfigError, match=f"workers_per_trial={SESSION_CPUS}"):
        gnntrain.sweep(cfg, {"train.lr": 0.01}, workers_per_trial=SESSION_CPUS, storage=tmp_path / "sweeps")
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "parts").exists()


def test_space_yaml_is_parsed_without_eval(tmp_path: Path) -> None:
    from ray.tune.search.sample import Categorical, Float

    space = parse_space({"train.lr": {"loguniform": [1e-3, 1e-1]}, "model.hidden": {"choice": [16, 32]},
                         "model.dropout": 0.5})
    assert isinstance(space["train.lr"], Float) and isinstance(space["model.hidden"], Categorical)
    assert space["model.dropout"] == 0.5
    # a mapping that names no sampler is a plain value; a YAML tag is refused by safe_load
    assert parse_space({"task.options": {"__import__": ["os"]}})["task.options"] == {"__import__": ["os"]}
    bad = tmp_path / "space.yaml"
    bad.write_text("train.lr: !!python/object/apply:os.getcwd []\n")
    from gnntrain.tune.space import read_space

    with pytest.raises(Exception, match="could not determine a constructor|python/object"):
        read_space(bad)
    with pytest.raises(ConfigError, match="'partition.seed'.*finite list"):
        partition_settings(parse_space({"partition.seed": {"randint": [0, 10]}, "partition.method": "metis"}))
    assert partition_settings({"partition.seed": {"grid_search": [0, 1]}, "train.lr": 0.1}) == [
        {"partition.seed": 0}, {"partition.seed": 1}]


def test_trial_config_is_a_loadable_run_config(tmp_path: Path) -> None:
    from gnntrain.tune.trial import TrialShape, trial_config

    cfg = load_config(raw={"dataset": {"name": "t", "source": "synthetic"}})
    out = trial_config(cfg, {"train.lr": 0.05}, TrialShape(workers=2, cpus_per_worker=0.5, coordinator_cpus=0.5))
    assert (out.cluster.workers, out.partition.parts, out.cluster.cpus_per_worker, out.train.lr) == (2, 2, 0.5, 0.05)

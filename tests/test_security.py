"""What a user can feed in cannot run code or write outside its root.

Checkpoints load with ``weights_only=True`` (a planted pickle is refused, never run);
names that become paths (``dataset.name``, run names, the files ``meta.json`` lists)
stay one component under their root.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from gnntrain.checkpoint import CheckpointError, list_checkpoints, load_latest
from gnntrain.config import ConfigError, load_config
from gnntrain.data import DataError, load_dataset
from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import run_training
from partition import PartitionFormatError, build_partition_set, open_partition_set
from partition.format import PartitionMeta, meta_digest
from partition.paths import check_component, join_under
from tests.conftest import REPO, make_graph

BAD_NAMES = ["../escape", "/etc", "a/b", "..", ".", "", "a\x00b", "a\\b", "x" * 201]


class _Touch:
    """Unpickling this creates ``path`` -- stands for any code a planted pickle would run."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.path, "w"))


def _raw(tmp_path: Path) -> dict[str, Any]:
    return {
        "dataset": {"name": "sec", "source": "synthetic",
                    "synthetic": {"nodes": 300, "avg_degree": 6, "features": 8, "classes": 3}},
        "partition": {"parts": 1, "root": str(tmp_path / "parts")},
        "sampler": {"fanouts": [4, 4], "batch_size": 64},
        "model": {"hidden": 8, "layers": 2},
        "train": {"epochs": 1, "run_root": str(tmp_path / "runs")},
    }


@pytest.fixture
def trained_run(tmp_path: Path) -> RunDir:
    """A real single-process run with its end-of-run checkpoint."""
    summary = run_training(load_config(raw=_raw(tmp_path)), single_process=True, progress=False)
    return RunDir(Path(summary["run_dir"]))


# checkpoints ------------------------------------------------------------------------

def test_a_real_checkpoint_loads_with_weights_only(trained_run: RunDir) -> None:
    """What gnntrain saves is tensors and plain containers only: weights_only needs no allow-list."""
    ckpt = load_latest(trained_run)
    assert ckpt is not None and ckpt["epochs_done"] == 1
    assert set(ckpt) == {"epochs_done", "config", "model", "opt", "rank_digests"}
    assert all(isinstance(t, torch.Tensor) for t in ckpt["model"].values())
    json.dumps(ckpt["config"])  # the config is stored as JSON-able data, not a pydantic object


@pytest.mark.parametrize("fmt", ["torch.save", "plain pickle"])
def test_a_planted_checkpoint_is_refused_without_running_it(trained_run: RunDir, tmp_path: Path,
                                                            fmt: str) -> None:
    marker = tmp_path / "pwned"
    evil = {"epochs_done": 9, "model": _Touch(marker), "opt": {}, "config": {}}
    # the payload is live: an unrestricted load runs it
    pickle.loads(pickle.dumps(evil))
    assert marker.exists()
    marker.unlink()

    planted = trained_run.path / "checkpoints" / "ckpt-00009.pt"
    if fmt == "torch.save":
        torch.save(evil, planted)
    else:
        planted.write_bytes(pickle.dumps(evil, protocol=2))  # protocol 2: what torch.load reads
    assert list_checkpoints(trained_run)[-1] == planted
    with pytest.raises(CheckpointError, match=r"ckpt-00009\.pt was not loaded: .*open") as e:
        load_latest(trained_run)
    assert not marker.exists()
    assert "never holds" in str(e.value)


def test_resume_from_a_planted_checkpoint_prints_one_error(trained_run: RunDir, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    torch.save({"epochs_done": 9, "model": _Touch(marker)}, trained_run.path / "checkpoints" / "ckpt-00009.pt")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "gnntrain.run", "--resume", str(trained_run.path),
                          "--single-process", "--no-progress"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-3000:]
    errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "ckpt-00009.pt was not loaded" in errors[0], out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert "CheckpointError" in (trained_run.path / "error.log").read_text()
    assert not marker.exists()


# names that become paths ---------------------------------------------------------------

@pytest.mark.parametrize("name", BAD_NAMES)
def test_config_refuses_a_dataset_name_that_is_not_one_path_component(tmp_path: Path, name: str) -> None:
    raw = _raw(tmp_path)
    raw["dataset"]["name"] = name
    with pytest.raises(ConfigError, match=r"dataset\.name: "):
        load_config(raw=raw)


def test_config_refuses_an_escaping_planetoid_name(tmp_path: Path) -> None:
    raw = {"dataset": {"name": "cora", "source": "planetoid", "path": "planetoid",
                       "planetoid_name": "../../etc"}}
    with pytest.raises(ConfigError, match=r"dataset\.planetoid_name: .*path separator"):
        load_config(raw=raw)


@pytest.mark.parametrize("name", BAD_NAMES)
def test_run_directory_names_stay_under_the_run_root(tmp_path: Path, name: str) -> None:
    root = tmp_path / "runs"
    with pytest.raises(ValueError, match=r"run name \(dataset\.name\)="):
        RunDir.create(root, name)
    assert list(tmp_path.iterdir()) == [root] and list(root.iterdir()) == []
    run = RunDir.create(root, "ok.name")
    assert run.path.parent == root


def test_join_under_refuses_symlinks_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    assert join_under(root, "a/b.npy", "f") == root / "a" / "b.npy"
    with pytest.raises(ValueError, match="outside"):
        join_under(root, "out/x.npy", "f")
    for bad in BAD_NAMES[:-1]:
        with pytest.raises(ValueError, match="f="):
            check_component("f", bad)


def test_a_partition_set_whose_meta_names_files_outside_it_is_refused(tmp_path: Path) -> None:
    """``meta.json`` is not secret (its checksum can be recomputed), so the file names it
    lists are checked against the format, not trusted."""
    pset = build_partition_set(make_graph(), load_config(raw={**_raw(tmp_path), "partition": {
        "parts": 2, "root": str(tmp_path / "parts")}, "cluster": {"workers": 2}}).partition)
    meta_path = pset.path / "meta.json"
    raw = json.loads(meta_path.read_text())
    raw["files"]["../../secret.npy"] = raw["files"].pop("part-1/halo_ids.npy")
    meta = PartitionMeta.model_validate(raw)
    raw["meta_sha256"] = meta_digest(meta)
    meta_path.write_text(json.dumps(raw))
    with pytest.raises(PartitionFormatError, match=r"must list exactly the set's files.*secret"):
        open_partition_set(pset.path)


def test_configs_and_run_configs_are_read_with_safe_load(tmp_path: Path) -> None:
    """A YAML tag that would build a Python object is an error, not a call."""
    marker = tmp_path / "pwned"
    cfg = tmp_path / "evil.yaml"
    cfg.write_text(f"dataset: !!python/object/apply:builtins.open [{str(marker)!r}, w]\n")
    with pytest.raises(yaml.YAMLError):
        load_config(cfg)
    assert not marker.exists()


def test_a_planted_planetoid_pickle_is_refused_without_running_it(data_root: Path, tmp_path: Path) -> None:
    """Planetoid raw files are pickles: each is read by an unpickler that builds only what
    Planetoid files hold, before PyG's reader sees it."""
    src = data_root / "planetoid" / "Cora" / "raw"
    if not src.is_dir():
        pytest.skip(f"Cora raw files not found under {src}")
    raw = tmp_path / "Cora" / "raw"
    shutil.copytree(src, raw)
    marker = tmp_path / "pwned"
    (raw / "ind.cora.graph").write_bytes(pickle.dumps({0: [1], 1: _Touch(marker)}, protocol=2))
    cfg = load_config(raw={"dataset": {"name": "cora", "source": "planetoid", "path": str(tmp_path),
                                       "planetoid_name": "Cora"}})
    with pytest.raises(DataError, match=r"ind\.cora\.graph asks to build (builtins|io)\.open"):
        load_dataset(cfg.dataset)
    assert not marker.exists()
    shutil.copy(src / "ind.cora.graph", raw / "ind.cora.graph")
    assert load_dataset(cfg.dataset).num_nodes == 2708  # the real files pass the same check

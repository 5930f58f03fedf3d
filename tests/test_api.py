"""The Python API: fit runs what the CLI runs, load reads it back, overrides and the
lazy package exports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
import torch
import yaml
from torch import Tensor
from torch_geometric.nn import GraphConv

import gnntrain
from gnntrain.api import override_items, resolve_config
from gnntrain.config import ConfigError
from gnntrain.models import build_model
from tests.conftest import REPO, make_graph, quiet
from tests.runtime.helpers import tiny_cfg


def tiny_yaml(tmp_path: Path) -> Path:
    raw = {
        "dataset": {"name": "tiny-api", "source": "synthetic",
                    "synthetic": {"nodes": 300, "avg_degree": 6, "features": 8, "classes": 4}},
        "partition": {"root": str(tmp_path / "parts")},
        "sampler": {"fanouts": [5, 5], "batch_size": 32},
        "model": {"arch": "sage", "hidden": 16, "layers": 2},
        "train": {"epochs": 3, "lr": 0.01, "run_root": str(tmp_path / "runs")},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_keyword_overrides_are_config_keys(tmp_path: Path) -> None:
    assert override_items({"train__epochs": 3, "model.options": {"k": [1, 2]}, "dataset.name": "a b"}) == [
        "train.epochs=3", 'model.options={"k": [1, 2]}', 'dataset.name="a b"']
    base = tiny_cfg(tmp_path)
    cfg, _ = resolve_config(base, override_items({"train__epochs": 7, "model.options": {"k": [1, 2]},
                                                  "dataset.name": "a b"}), workers=2)
    assert (cfg.train.epochs, cfg.model.options, cfg.dataset.name) == (7, {"k": [1, 2]}, "a b")
    assert (cfg.cluster.workers, cfg.partition.parts) == (2, 2)
    assert base.train.epochs == 2 and base.cluster.workers == 1  # the caller's config untouched
    with pytest.raises(ConfigError, match="epochs=3: neither an argument of fit"):
        override_items({"epochs": 3})
    with pytest.raises(ConfigError, match="no such key 'train.epoch'"):
        resolve_config(base, override_items({"train__epoch": 3}))
    with pytest.raises(ConfigError, match="workers=0: must be >= 1"):
        resolve_config(base, workers=0)


def test_fit_equals_the_cli_and_load_reads_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The same YAML trained by `python -m gnntrain.run` (its main, in this process) and by
    gnntrain.fit: the same parameters; load() gives them back without Ray."""
    from gnntrain.run import main as run_cli

    cfg_path = tiny_yaml(tmp_path)
    monkeypatch.chdir(tmp_path)
    code = run_cli(["--config", str(cfg_path), "--single-process", "--no-progress", "--set", "train.lr=0.02"])
    assert code == 0, capsys.readouterr().err[-3000:]
    (cli_dir,) = (tmp_path / "runs").iterdir()
    run = gnntrain.fit(str(cfg_path), single_process=True, progress=False, console=quiet(),
                       train__lr=0.02)
    assert run.run_dir != cli_dir and run.config.train.lr == 0.02
    assert run.summary["run_dir"] == str(run.run_dir) and run.summary["epochs"] == 3
    cli = gnntrain.load(cli_dir, checkpoint="last")  # run.model is the last epoch's
    assert cli.epochs_done == 3 and cli.config == run.config
    a, b = cli.model.state_dict(), run.model.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k}: fit and the CLI trained different parameters"
    assert not run.model.training and next(run.model.parameters()).device.type == "cpu"
    # the model really is the trained one, not a fresh build
    fresh = build_model("sage", run.config.model, 8, 4, run.config.train.seed).state_dict()
    assert any(not torch.equal(fresh[k], a[k]) for k in a)


class ZeroLoss(gnntrain.NodeClassification):
    """A custom loss that gives no gradient: training must then leave the model as built."""

    name: ClassVar[str] = "zero"

    def loss(self, out: Tensor, target: Tensor) -> Tensor:
        return super().loss(out, target) * 0.0


def test_a_task_overriding_loss_is_what_trains(tmp_path: Path) -> None:
    g = make_graph(200, seed=4)
    cfg = tiny_cfg(tmp_path, "train.optimizer=sgd")
    zero = gnntrain.fit(cfg, task=ZeroLoss(), graph=g, single_process=True, progress=False,
                        console=quiet())
    plain = gnntrain.fit(cfg, graph=g, single_process=True, progress=False, console=quiet())
    fresh = build_model("sage", cfg.model, g.num_features, g.num_classes, cfg.train.seed).state_dict()
    z, p = zero.model.state_dict(), plain.model.state_dict()
    assert all(torch.equal(fresh[k], z[k]) for k in fresh), "the task's loss was not the one trained"
    assert any(not torch.equal(fresh[k], p[k]) for k in fresh)
    assert zero.summary["final"]["loss"] == 0.0


def test_load_needs_the_python_model_it_was_trained_with(tmp_path: Path) -> None:
    g = make_graph(200, seed=5)
    cfg = tiny_cfg(tmp_path, "train.epochs=1")

    def factory(in_dim: int, out_dim: int, c: object) -> torch.nn.Module:
        return gnntrain.PygLayers([GraphConv(in_dim, 8), GraphConv(8, out_dim)])

    run = gnntrain.fit(cfg, model=factory, graph=g, single_process=True, progress=False,
                       console=quiet())
    with pytest.raises(ValueError, match=r"trained with a Python model object .*PygLayers.*model="):
        gnntrain.load(run.run_dir)
    loaded = gnntrain.load(run.run_dir, model=factory)
    for k, v in run.model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[k], v)
    with pytest.raises(ValueError, match="do not fit model BlockGNN"):
        gnntrain.load(run.run_dir, model="sage")
    with pytest.raises(ConfigError, match=r"trained with a Python model object .*resume=run_dir, model="):
        gnntrain.fit(None, resume=run.run_dir, graph=g, single_process=True, progress=False,
                     console=quiet())


def test_load_bad_input(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        gnntrain.load(tmp_path)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(tiny_cfg(tmp_path).model_dump(mode="json")))
    (tmp_path / "model.json").write_text('{"in_dim": 8, "out_dim": 4, "arch": "sage"}')
    with pytest.raises(FileNotFoundError, match="no readable checkpoint"):
        gnntrain.load(tmp_path)


def test_version_comes_from_pyproject_beside_the_package_else_the_metadata(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout's pyproject.toml wins over installed metadata (an editable install's copy
    goes stale when the version changes); an installed wheel, with no pyproject.toml beside
    it, reads its metadata; another project's pyproject.toml is not ours."""
    from gnntrain import version as v

    ours, foreign = tmp_path / "ours.toml", tmp_path / "foreign.toml"
    ours.write_text('[project]\nname = "gnntrain"\nversion = "9.8.7"\n')
    foreign.write_text('[project]\nname = "other"\nversion = "1.0"\n')
    assert v.source_version(ours) == "9.8.7"
    assert v.source_version(foreign) is None and v.source_version(tmp_path / "absent.toml") is None
    monkeypatch.setattr(v, "version", lambda name: "0.3.0")  # stale editable metadata
    monkeypatch.setattr(v, "PYPROJECT", ours)
    assert v.package_version() == "9.8.7"
    monkeypatch.setattr(v, "PYPROJECT", tmp_path / "absent.toml")  # an installed wheel
    assert v.package_version() == "0.3.0"


def test_package_exports_are_lazy_and_versioned() -> None:
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    code = ("import sys, gnntrain, gnntrain.api, gnntrain.run; "
            f"assert gnntrain.__version__ == {version!r}, gnntrain.__version__; "
            "print(sorted(m for m in ('torch', 'numba', 'ray', 'pyarrow') if m in sys.modules)); "
            "names = [getattr(gnntrain, n) for n in gnntrain.__all__]; "
            "print(sorted(n for n in gnntrain.__all__ if n not in dir(gnntrain)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.split("\n")[:2] == ["[]", "[]"], out.stdout
    assert gnntrain.PygLayers.__module__ == "gnntrain.models.pyg"
    assert issubclass(gnntrain.NodeClassification, gnntrain.Task)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        gnntrain.nope  # noqa: B018

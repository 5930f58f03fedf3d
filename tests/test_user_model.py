"""User models from outside the package: by import path (YAML, CLI) and as Python objects
(``gnntrain.fit(model=...)``), on the embedded Ray, equal to the single-process run."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml

import gnntrain
from gnntrain.models import build_model
from tests.conftest import REPO, make_graph, quiet
from tests.runtime.helpers import ONE_STEP, assert_params_close, tiny_cfg

MODULE = "gnt_usermodels"
USER_CODE = '''
"""A user's models: not part of gnntrain, importable only through the directory it is in."""
import torch
from torch import nn
from torch_geometric.nn import GraphConv

from gnntrain import PygLayers


def graphconv(in_dim, out_dim, cfg):
    aggr = cfg.options.get("aggr", "add")
    if aggr not in ("add", "mean", "max"):
        raise ValueError(f"model.options.aggr={aggr!r}: expected add, mean or max")
    dims = [in_dim] + [cfg.hidden] * (cfg.layers - 1) + [out_dim]
    return PygLayers([GraphConv(a, b, aggr=aggr) for a, b in zip(dims, dims[1:])],
                     dropout=cfg.dropout)


class ForwardOnly(nn.Module):
    """The protocol's required part only: no layer(), so evaluation is sampled."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, blocks, x):
        return self.inner(blocks, x)


def forward_only(in_dim, out_dim, cfg):
    return ForwardOnly(graphconv(in_dim, out_dim, cfg))


def not_a_module(in_dim, out_dim, cfg):
    return {"weights": torch.zeros(3)}
'''


@pytest.fixture(scope="module")
def user_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``gnt_usermodels`` written into a temporary directory outside the package and put
    on the driver's ``sys.path`` only (not ``$PYTHONPATH``): Ray workers must still import it."""
    d = tmp_path_factory.mktemp("usercode")
    (d / f"{MODULE}.py").write_text(textwrap.dedent(USER_CODE))
    sys.path.insert(0, str(d))
    try:
        yield importlib.import_module(MODULE)
    finally:
        sys.path.remove(str(d))
        sys.modules.pop(MODULE, None)


def params(run: gnntrain.Run) -> dict[str, torch.Tensor]:
    return dict(run.model.state_dict())


# The largest group first: the kept group of its run then serves the smaller runs below
# (gnntrain.reuse_workers).
def test_two_workers_one_step_equal_single_process(ray_local: None, user_module: Any,
                                                   tmp_path: Path) -> None:
    """All neighbours, SGD, one step over the same global batch; the model named by its
    import path (the workers import the module themselves)."""
    g = make_graph(240, seed=2)
    common = [*ONE_STEP, f"model.arch={MODULE}:graphconv", "model.options={aggr: mean}"]
    single = gnntrain.fit(tiny_cfg(tmp_path, *common, fanouts="[-1,-1]"), graph=g,
                          single_process=True, progress=False, console=quiet())
    dist = gnntrain.fit(tiny_cfg(tmp_path, *common, workers=2, fanouts="[-1,-1]"), graph=g,
                        progress=False, console=quiet())
    assert dist.summary["workers"] == 2
    a, b = params(single), params(dist)
    assert_params_close(b, a)
    fresh = build_model(user_module.graphconv, single.config.model, g.num_features, g.num_classes, 0)
    assert any(not torch.allclose(fresh.state_dict()[k], a[k]) for k in a), "the step moved nothing"


def test_one_ray_worker_equals_single_process_bit_for_bit(ray_local: None, user_module: Any,
                                                          tmp_path: Path) -> None:
    g = make_graph(300, seed=1)
    cfg = tiny_cfg(tmp_path, "train.epochs=2")
    single = gnntrain.fit(cfg, model=user_module.graphconv, graph=g, single_process=True,
                          progress=False, console=quiet())
    dist = gnntrain.fit(cfg, model=user_module.graphconv, graph=g, progress=False, console=quiet())
    a, b = params(single), params(dist)
    assert a.keys() == b.keys() and any("convs.1" in k for k in a), sorted(a)
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs between 1 Ray worker and single-process"
    assert single.summary["final"]["test_acc"] == dist.summary["final"]["test_acc"]


def test_model_without_layer_is_evaluated_sampled_and_the_run_says_so(
        user_module: Any, tmp_path: Path) -> None:
    g = make_graph(200, seed=3)
    runs = {}
    for name, factory in (("forward_only", user_module.forward_only),
                          ("layerwise", user_module.graphconv)):
        out = quiet()
        runs[name] = gnntrain.fit(tiny_cfg(tmp_path, "train.epochs=2"), model=factory, graph=g,
                                  single_process=True, progress=False, console=out)
        runs[name].log = out.file.getvalue()  # type: ignore[attr-defined]
    modes = {name: [json.loads(ln).get("eval_mode") for ln in
                    (r.run_dir / "metrics.jsonl").read_text().splitlines()]
             for name, r in runs.items()}
    assert modes == {"forward_only": ["sampled", "sampled"], "layerwise": ["full", "full"]}
    assert "has no layer(i, block, h)" in runs["forward_only"].log  # type: ignore[attr-defined]
    assert "has no layer" not in runs["layerwise"].log  # type: ignore[attr-defined]


def _tiny_yaml(tmp_path: Path, arch: str, **model: Any) -> Path:
    raw = {
        "dataset": {"name": "tiny-user", "source": "synthetic",
                    "synthetic": {"nodes": 300, "avg_degree": 6, "features": 8, "classes": 4}},
        "partition": {"root": str(tmp_path / "parts")},
        "sampler": {"fanouts": [5, 5], "batch_size": 32},
        "model": {"arch": arch, "hidden": 16, "layers": 2, "dropout": 0.0, **model},
        "train": {"epochs": 1, "lr": 0.01, "run_root": str(tmp_path / "runs")},
    }
    path = tmp_path / "user.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m gnntrain.run`` from ``cwd``; ``env`` (default: this one) joins a Ray or not."""
    env = env or {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0",
                  "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "gnntrain.run", "--no-progress", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_cli_trains_a_user_model_from_yaml_on_two_workers(user_module: Any, tmp_path: Path,
                                                          joined_env: dict[str, str]) -> None:
    """``model.arch: gnt_usermodels:graphconv`` in YAML, run from the user's project
    directory (where the module is), 2 workers on a running Ray (the workers import the
    module from the driver's directory); then loaded back."""
    project = Path(user_module.__file__).parent
    cfg = _tiny_yaml(tmp_path, f"{MODULE}:graphconv", options={"aggr": "mean"})
    out = _cli(["--config", str(cfg), "--workers", "2"], cwd=project, env=joined_env)
    assert out.returncode == 0, out.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    info = json.loads((run_dir / "model.json").read_text())
    assert info["arch"] == f"{MODULE}:graphconv" and info["class"] == "gnntrain.models.pyg.PygLayers"
    loaded = gnntrain.load(run_dir)
    assert loaded.config.cluster.workers == 2 and loaded.epochs_done == 1
    assert loaded.model.convs[0].aggr == "mean"  # type: ignore[union-attr]


@pytest.mark.parametrize(("arch", "options", "expected"), [
    ("nosuchmod:f", {}, "cannot import module 'nosuchmod'"),
    (f"{MODULE}:not_a_module", {}, "returned dict, not a torch.nn.Module"),
    (f"{MODULE}:missing", {}, f"module '{MODULE}' has no attribute 'missing'"),
    ("sage", {"aggr": "mean"}, "takes no options"),
    (f"{MODULE}:graphconv", {"aggr": "median"}, "model.options.aggr='median'"),
])
def test_bad_model_fails_before_ray_starts(user_module: Any, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, arch: str,
                                           options: dict[str, Any], expected: str) -> None:
    import gnntrain.runtime.cluster as cluster

    def no_ray(*_: Any, **__: Any) -> Any:
        raise AssertionError("Ray was started for a run that should have failed first")

    monkeypatch.setattr(cluster, "ray_session", no_ray)
    with pytest.raises(ValueError, match=re.escape(expected)):
        gnntrain.fit(tiny_cfg(tmp_path, f"model.arch={arch}", workers=2), graph=make_graph(100),
                     model__options=options, progress=False, console=quiet())


def test_cli_bad_import_path_is_one_error_line(tmp_path: Path) -> None:
    out = _cli(["--config", str(_tiny_yaml(tmp_path, "nosuchmod:factory")), "--workers", "2"],
               cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "model.arch='nosuchmod:factory'" in out.stderr and "Traceback" not in out.stderr


# --- accuracy on real data -------------------------------------------------------------

CORA_SEEDS = (0, 1)


def _cora_acc(data_root: Path, tmp: Path, factory: Callable[..., Any], **kw: Any) -> float:
    accs = []
    for seed in CORA_SEEDS:
        run = gnntrain.fit(
            {"dataset": {"name": "cora", "source": "planetoid", "path": str(data_root / "planetoid"),
                         "planetoid_name": "Cora", "normalize_features": "row"},
             "partition": {"root": str(tmp / "parts")},
             "sampler": {"fanouts": [10, 10], "batch_size": 35},
             "model": {"hidden": 64, "layers": 2, "dropout": 0.5, "options": {"aggr": "mean"}},
             "train": {"epochs": 30, "lr": 0.01, "weight_decay": 5e-4, "eval_every": 1000,
                       "seed": seed, "run_root": str(tmp / "runs")}},
            model=factory, progress=False, console=quiet(), **kw)
        accs.append(run.summary["final"]["test_acc"])
    return float(np.mean(accs))


def test_user_model_on_cora_two_workers_within_1_5_points(ray_local: None, data_root: Path,
                                                          user_module: Any, tmp_path: Path) -> None:
    """GraphConv (mean) through PygLayers, 2 METIS workers with the same global batch
    (17 + 17 seeds a step) against the single process, mean of 2 seeds."""
    if not (data_root / "planetoid" / "Cora" / "raw").is_dir():
        pytest.skip(f"Cora raw files not found under {data_root / 'planetoid'}")
    t0 = time.perf_counter()
    single = _cora_acc(data_root, tmp_path, user_module.graphconv, single_process=True)
    dist = _cora_acc(data_root, tmp_path, user_module.graphconv, workers=2,
                     sampler__batch_size=17)
    print(f"cora graphconv: single {single:.3f}, 2 workers {dist:.3f} "
          f"({time.perf_counter() - t0:.0f}s)")
    assert single >= 0.70, f"the user model did not learn Cora: {single:.3f}"
    assert abs(dist - single) <= 0.015, f"2 workers {dist:.3f} vs single process {single:.3f}"



def test_workers_get_the_drivers_extra_code_directories_only(user_module: Any) -> None:
    """What the runtime adds to the workers' PYTHONPATH: the directory the user put on
    sys.path, not the interpreter's own directories, $PYTHONPATH or the working directory
    (the workers have those already)."""
    from gnntrain.runtime.cluster import driver_code_paths

    extra = driver_code_paths()
    assert os.path.realpath(Path(user_module.__file__).parent) in extra
    assert not [p for p in extra if p.startswith(os.path.realpath(sys.prefix))
                or p == os.path.realpath(os.getcwd()) or p == os.path.realpath(REPO)]

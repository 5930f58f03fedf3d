"""Benchmark correctness checks bite: a broken component or a failing measurement makes
the module exit non-zero, and ``bench.smoke`` passes that on, naming the module.

Each module is shown failing once: in-process with a component broken by ``monkeypatch``
where the module is cheap to run (cache, sampling, partition, epoch's single-process
section), otherwise through its check function fed a failing measurement (comm's exact,
bytes and sparse checks), and comm's worker-death path through its ``main`` with a failing run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import bench.cache
import bench.comm
import bench.epoch
import bench.gpu
import bench.harness.paths
import bench.partition
import bench.sampling
import bench.smoke
from bench.harness.verdict import check, conclude
from samplers import CSRSource, Neighbors
from tests.conftest import make_graph


@pytest.fixture(autouse=True)
def bench_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every module writes its JSON (and partition sets, run dirs) under a temp dir."""
    monkeypatch.setattr(bench.harness.paths, "OUT", tmp_path)  # out_path, bench_config, run_root
    for mod in (bench.cache, bench.comm, bench.epoch, bench.partition, bench.sampling):
        monkeypatch.setattr(mod, "OUT", tmp_path, raising=False)
    return tmp_path


# -- the shared verdict --------------------------------------------------------------------
def test_conclude_is_1_when_any_check_fails(capsys: pytest.CaptureFixture[str]) -> None:
    out: dict[str, Any] = {}
    assert conclude("x", [check("a", True), check("b", True)], out) == 0
    assert [c["ok"] for c in out["checks"]] == [True, True]
    assert conclude("x", [check("a", True), check("b holds", False, "measured 3")], out) == 1
    text = capsys.readouterr().out
    assert "FAILED check: b holds (measured 3)" in text and "1 of 2 correctness checks FAILED" in text


# -- gpu -----------------------------------------------------------------------------------
def test_gpu_checks_fail_when_a_draw_or_one_worker_trains_differently() -> None:
    def row(mode: str, sampler: str, losses: list[float]) -> dict[str, Any]:
        return {"graph": "small", "mode": mode, "precision": "fp32", "sampler": sampler, "epoch_s": 1.0,
                "test_acc": 0.5, "losses": losses}

    same = [row("single", "numba", [1.0, 0.5]), row("single", "torch", [1.0, 0.5]),
            row("k=1", "numba", [1.0, 0.5]), row("k=1", "torch", [1.0, 0.5])]
    checks = bench.gpu.compare(same, exact=True)
    assert len(checks) == 4 and all(c.ok for c in checks)
    off = [*same[:3], row("k=1", "torch", [1.0, 0.49])]
    assert [c.name for c in bench.gpu.compare(off, exact=True) if not c.ok] == [
        "small k=1 fp32: the torch draw trains as the numba draw",
        "small fp32 torch: 1 worker trains as the single process"]
    assert bench.gpu.compare(off, exact=False) == []  # on CUDA the differences are printed, not checked


# -- cache ---------------------------------------------------------------------------------
def test_cache_exits_1_when_presample_picks_cold_rows(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.cache.main(["--smoke", "--nodes", "3000"]) == 0
    # broken: the presample cache ignores its counts and keeps the lowest ids
    monkeypatch.setattr(bench.cache, "presample_ids", lambda counts, cap: np.arange(cap, dtype=np.int64))
    assert bench.cache.main(["--smoke", "--nodes", "3000"]) == 1
    assert "FAILED check: presample >= 0.9 x oracle" in capsys.readouterr().out


def test_cache_checks_flag_a_static_policy_above_the_oracle() -> None:
    rate = {"degree": 0.5, "presample": 0.3, "lru": 0.2, "fifo": 0.2, "oracle": 0.3}
    bad = [c.name for c in bench.cache.checks([{"size": 0.1, "hit_rate": rate,
                                                 "presample_over_oracle": 1.0}]) if not c.ok]
    assert bad == ["degree (static) <= oracle at 10%"]


# -- sampling ------------------------------------------------------------------------------
class OffByOne(CSRSource):
    """Broken: every sampled neighbour id is shifted by one (mostly not an edge)."""

    def sample_neighbors(self, seeds: np.ndarray, fanout: int, *, replace: bool,
                         key: int) -> Neighbors:
        nb = super().sample_neighbors(seeds, fanout, replace=replace, key=key)
        return Neighbors(counts=nb.counts, nbrs=(nb.nbrs + 1) % self.num_nodes)


def test_sampling_verify_passes_on_the_real_sampler_and_fails_on_a_broken_one() -> None:
    g = make_graph(num_nodes=3000, avg_degree=12)
    seeds = np.random.default_rng(0).permutation(g.num_nodes)
    good = bench.sampling.NeighborSampler(CSRSource(g.indptr, g.indices), bench.sampling.FANOUTS)
    assert all(c.ok for c in bench.sampling.verify(good, g.indptr, g.indices, seeds, 2, "g"))
    bad = bench.sampling.NeighborSampler(OffByOne(g.indptr, g.indices), bench.sampling.FANOUTS)
    failed = [c.name for c in bench.sampling.verify(bad, g.indptr, g.indices, seeds, 2, "g") if not c.ok]
    assert "g: sampled edges exist" in failed


def test_sampling_exits_1_with_a_broken_graph_source(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench.sampling, "CSRSource", OffByOne)
    assert bench.sampling.main(["--smoke", "--threads", "2", "--only", "homogeneous"]) == 1
    assert "FAILED check: 20k/400k: sampled edges exist" in capsys.readouterr().out


class WrongRelation(CSRSource):
    """Broken: every sampled edge carries the next relation id."""

    def sample_neighbors(self, seeds: np.ndarray, fanout: Any, *, replace: bool, key: int) -> Neighbors:
        nb = super().sample_neighbors(seeds, fanout, replace=replace, key=key)
        assert nb.rels is not None
        return Neighbors(counts=nb.counts, nbrs=nb.nbrs, rels=(nb.rels + 1) % self.num_relations)


def test_typed_sampling_checks_pass_on_the_real_sampler_and_fail_on_wrong_relations(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.sampling.main(["--smoke", "--only", "typed"]) == 0
    monkeypatch.setattr(bench.sampling, "CSRSource", WrongRelation)
    assert bench.sampling.main(["--smoke", "--only", "typed"]) == 1
    out = capsys.readouterr().out
    assert "FAILED check: MAG 10k: sampled edges exist with their relation" in out
    assert "FAILED check: MAG 10k: min(deg_r, fanout) per relation" in out


# -- partition -----------------------------------------------------------------------------
def test_partition_exits_1_when_the_metis_build_does_not_cut(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--nodes", "3000", "--ks", "2", "--only", "synthetic"]
    assert bench.partition.main(args) == 0
    real_build = bench.partition.build_partition_set

    def random_instead(g: Any, cfg: Any, root: Any, force: bool = False) -> Any:
        # broken: the build ignores the method it was asked for
        return real_build(g, cfg.model_copy(update={"method": "random"}), root, force=force)

    monkeypatch.setattr(bench.partition, "build_partition_set", random_instead)
    assert bench.partition.main(args) == 1
    assert "FAILED check: synthetic k=2 build metis, spill: edge cut below random's" in capsys.readouterr().out


def test_partition_row_checks_flag_imbalance_and_empty_parts() -> None:
    stats = {"train_imb": 1.2, "edge_imb": 1.0, "node_imb": 1.0}
    rows = [{"row": "metis", "k": 4, "cut": 0.1, "parts_used": 3, "balance_excess": 1.1, **stats},
            {"row": "random", "k": 4, "cut": 0.7, "parts_used": 4, "balance_excess": 1.0, **stats}]
    failed = [c.name for c in bench.partition.row_checks(rows, "g") if not c.ok]
    assert failed == ["g metis: all 4 parts used", "g metis: every constraint within the allowed load"]


# -- epoch ---------------------------------------------------------------------------------
def test_epoch_exits_1_when_training_climbs_the_gradient(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--smoke", "--only", "ours"]
    assert bench.epoch.main(args) == 0
    step = torch.optim.Adam.step

    def ascend(self: torch.optim.Adam, closure: Any = None) -> Any:
        for group in self.param_groups:  # broken: the optimiser walks up the loss
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.neg_()
        return step(self, closure)

    monkeypatch.setattr(torch.optim.Adam, "step", ascend)
    assert bench.epoch.main(args) == 1
    text = capsys.readouterr().out
    assert "FAILED check: ours, single process" in text and "loss falls" in text


def test_epoch_checks_flag_a_ray_worker_that_trains_something_else() -> None:
    run = {"label": "ours", "loss": [2.0, 1.5], "test_acc": 0.5, "threads": 1}
    results = {"ours1": run, "ray1": {**run, "label": "ray", "loss": [2.0, 1.49]}}
    failed = [c.name for c in bench.epoch.checks(results, floor=0.2) if not c.ok]
    assert failed == ["Ray 1 worker trains what the single process trains (per-epoch loss, exactly)"]
    assert [c.ok for c in bench.epoch.checks({"ours1": run}, floor=0.6)] == [True, False]


# -- comm ----------------------------------------------------------------------------------
def test_comm_exact_checks_fail_when_a_cache_changes_the_parameters() -> None:
    rows = [{"name": "no cache", "identical": True, "same_partition": True, "max_abs_param_diff": 0.0},
            {"name": "presample", "identical": False, "same_partition": True, "max_abs_param_diff": 1e-3},
            {"name": "random part.", "identical": False, "same_partition": False, "max_abs_param_diff": 1.0}]
    assert [(c.name, c.ok) for c in bench.comm.exact_checks(rows)] == [
        ("presample: final parameters identical to no cache", False)]


def test_comm_bytes_checks_fail_when_a_cache_changes_sampling_or_adds_bytes() -> None:
    def row(name: str, overrides: list[str], sample: int, feature: int) -> dict[str, Any]:
        return {"name": name, "overrides": overrides, "bytes_by_category": {"sample": sample},
                "feature_bytes": feature}

    rows = [row("metis", ["partition.method=metis"], 100, 1000),
            row("metis + cache", ["partition.method=metis", "sampler.cache.policy=presample"], 101, 900),
            row("metis + fp16", ["partition.method=metis", "train.feature_dtype=float16"], 100, 1200),
            row("random", [], 300, 5000)]
    failed = [c.name for c in bench.comm.bytes_checks(rows) if not c.ok]
    assert failed == ["'metis + cache' samples what 'metis' samples",
                      "'metis + fp16' sends no more feature bytes than 'metis'"]


def test_comm_sparse_checks_fail_on_more_bytes_changed_sampling_or_no_data() -> None:
    def row(name: str, sparse_feature: int, sparse_sample: int) -> dict[str, Any]:
        return {"dataset": name,
                "dense": {"feature_bytes": 1000, "sample_bytes": 50, "feature_messages": 4},
                "sparse": {"feature_bytes": sparse_feature, "sample_bytes": sparse_sample,
                           "feature_messages": 4}}

    rows = [row("a", 100, 50), row("b", 1001, 50), row("c", 10, 51), {"dataset": "d", "skipped": "no data"}]
    failed = [c.name for c in bench.comm.sparse_checks(rows, require_data=True) if not c.ok]
    assert failed == ["sparse: b sends no more feature bytes, the same sample bytes and messages",
                      "sparse: c sends no more feature bytes, the same sample bytes and messages"]
    none = [{"dataset": "a", "skipped": "no data at /x"}]
    assert [c.ok for c in bench.comm.sparse_checks(none, require_data=True)] == [False]
    assert bench.comm.sparse_checks(none, require_data=False) == []


def test_comm_runs_train_with_no_failure_allowance(monkeypatch: pytest.MonkeyPatch) -> None:
    import gnntrain.runtime.coordinator as coordinator

    seen: list[int] = []

    def capture(cfg: Any, **_: Any) -> Any:
        seen.append(cfg.train.max_failures)
        raise RuntimeError("stop here")

    monkeypatch.setattr(coordinator, "run_training", capture)
    cfg = bench.epoch.bench_config("synthetic-small.yaml", [], "t").with_overrides(
        ["train.max_failures=3"])
    with pytest.raises(RuntimeError, match="stop here"):
        bench.comm.train(cfg, make_graph(), keep=False)
    assert seen == [0]


def test_comm_exits_1_when_a_worker_dies(monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    import contextlib

    import gnntrain.runtime.cluster as cluster
    from gnntrain.runtime.ray_group import WorkerFailure

    def dies(*_: Any, **__: Any) -> Any:
        raise WorkerFailure(1, "train", "killed by SIGKILL")

    monkeypatch.setattr(cluster, "ray_session", lambda *a, **k: contextlib.nullcontext())
    monkeypatch.setattr(bench.comm, "train", dies)
    assert bench.comm.main(["--smoke", "--only", "exact"]) == 1
    assert "FAILED check: no worker died (worker 1 failed during train" in capsys.readouterr().out


# -- the smoke runner ----------------------------------------------------------------------
def test_smoke_runner_passes_a_module_failure_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("cache", "sampling"):
        (tmp_path / f"{name}.py").touch()
    monkeypatch.setattr(bench.smoke, "BENCH", tmp_path)
    exits = {"cache": "raise SystemExit(3)", "sampling": "pass"}
    monkeypatch.setattr(bench.smoke, "command", lambda name: [sys.executable, "-c", exits[name]])
    assert bench.smoke.main(["--only", "sampling"]) == 0
    assert bench.smoke.main(["--only", "cache,sampling"]) == 1
    text = capsys.readouterr().out
    assert "FAILED (exit 3)" in text and text.rstrip().endswith("FAILED: cache")

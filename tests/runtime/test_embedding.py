"""Learnable node embeddings: sparse optimizers equal dense ones, the partitioned table
trains exactly like one process, checkpoints restore it, bad input is refused early."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from gnntrain.checkpoint import load_part_file
from gnntrain.config import ConfigError, NodeEmbeddingConfig, load_config
from gnntrain.embedding import EmbeddingShard, init_rows
from gnntrain.predict import predict, read_predictions
from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import run_training
from partition import open_training_set
from partition.manifest import record_file
from tests.conftest import make_graph
from tests.runtime.helpers import (
    ONE_STEP,
    assert_params_close,
    assert_same_state,
    final_state,
    tiny_cfg,
)

EMB = "model.node_embedding={dim: 6, optimizer: %s, lr: 0.05}"
EMB_LR = "model.node_embedding={dim: 6, optimizer: %s, lr: %s}"


def _shard(optimizer: str, rows: int = 12, dim: int = 4) -> EmbeddingShard:
    cfg = NodeEmbeddingConfig(dim=dim, optimizer=optimizer, lr=0.1)  # type: ignore[arg-type]
    return EmbeddingShard(cfg, np.arange(rows, dtype=np.int64), seed=0)


def _dense(optimizer: str, table: np.ndarray) -> tuple[torch.nn.Parameter, torch.optim.Optimizer]:
    p = torch.nn.Parameter(torch.from_numpy(table.copy()))
    opt = {"sgd": lambda: torch.optim.SGD([p], lr=0.1),
           "sparse_adagrad": lambda: torch.optim.Adagrad([p], lr=0.1),
           "sparse_adam": lambda: torch.optim.Adam([p], lr=0.1, foreach=False)}[optimizer]()
    return p, opt


@pytest.mark.parametrize("optimizer", ["sgd", "sparse_adagrad", "sparse_adam"])
def test_sparse_update_equals_dense_optimizer(optimizer: str) -> None:
    """Contributions of two workers for overlapping rows are summed and divided by the
    global count, then the row update equals PyTorch's dense optimizer on the same rows
    (Adam: rows touched at every step, the case where lazy and dense Adam agree)."""
    rng = np.random.default_rng(0)
    shard = _shard(optimizer)
    p, opt = _dense(optimizer, shard.table)
    for step in range(4):
        touched = np.arange(12) if optimizer == "sparse_adam" else rng.choice(12, 7, replace=False)
        a, b = touched[:5], touched[2:]  # rows 2..4 come from both workers
        ga = rng.standard_normal((a.size, 4)).astype(np.float32)
        gb = rng.standard_normal((b.size, 4)).astype(np.float32)
        shard.add_grads(step, 1, b, gb)  # arrival order does not matter
        shard.add_grads(step, 0, a, ga)
        shard.apply(count=3.0)
        dense = np.zeros((12, 4), dtype=np.float32)
        np.add.at(dense, a, ga)
        np.add.at(dense, b, gb)
        p.grad = torch.from_numpy(dense / 3.0)
        opt.step()
        np.testing.assert_allclose(shard.table, p.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert shard.version == 4 and not np.allclose(shard.table, init_rows(np.arange(12), 4, seed=0,
                                                                         init="normal", scale=1.0))


def test_sparse_adam_is_lazy_on_untouched_rows() -> None:
    """A row no step touches keeps its value and its moments (dense Adam would move it)."""
    shard = _shard("sparse_adam")
    before = shard.table.copy()
    for step in range(3):
        shard.add_grads(step, 0, np.array([0, 1]), np.ones((2, 4), dtype=np.float32))
        shard.apply(count=1.0)
    assert np.array_equal(shard.table[2:], before[2:])
    assert not shard.state["exp_avg"][2:].any() and shard.state["exp_avg"][:2].all()
    assert not np.array_equal(shard.table[:2], before[:2])


def test_initial_rows_do_not_depend_on_the_partition() -> None:
    ids = np.arange(50, dtype=np.int64)
    whole = init_rows(ids, 8, seed=3, init="normal", scale=1.0)
    part = init_rows(ids[[40, 7, 19]], 8, seed=3, init="normal", scale=1.0)
    np.testing.assert_array_equal(part, whole[[40, 7, 19]])
    assert abs(float(whole.std()) - 1.0) < 0.15 and abs(float(whole.mean())) < 0.15
    u = init_rows(ids, 8, seed=3, init="uniform", scale=0.5)
    assert u.min() >= -0.5 and u.max() <= 0.5
    assert not np.array_equal(whole, init_rows(ids, 8, seed=4, init="normal", scale=1.0))


def test_large_table_is_memory_mapped() -> None:
    cfg = NodeEmbeddingConfig(dim=4, optimizer="sparse_adagrad", mmap_above_mb=0)
    shard = EmbeddingShard(cfg, np.arange(100, dtype=np.int64), seed=0)
    assert shard.scratch is not None and isinstance(shard.table, np.memmap)
    np.testing.assert_array_equal(shard.table, _shard_rows(100))
    scratch = shard.scratch
    del shard
    import gc

    gc.collect()
    assert not scratch.exists(), "the scratch files outlived the table"


def _shard_rows(n: int) -> np.ndarray:
    return init_rows(np.arange(n, dtype=np.int64), 4, seed=0, init="normal", scale=1.0)


def tables_by_orig_id(summary: dict[str, Any]) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """The whole learned table in original-id order (from the checkpoint's per-part files)
    and the per-part states."""
    run = RunDir(Path(summary["run_dir"]))
    ckpt = final_state(summary)
    states = [load_part_file(run, n) for n in ckpt["part_files"]]
    report = run.path / "partition.json"
    if len(states) == 1 and not report.is_file():
        return states[0]["embedding"]["table"].numpy(), states
    pset = open_training_set(json.loads(report.read_text())["partition_path"])
    out = None
    for p, st in enumerate(states):
        table = st["embedding"]["table"].numpy()
        if out is None:
            out = np.zeros((pset.book.num_nodes, table.shape[1]), dtype=np.float32)
        part = pset.load_part(p)
        out[np.asarray(part.orig_ids[:table.shape[0]])] = table
    assert out is not None
    return out, states


# The largest group first: the kept group of its run then serves the smaller runs below
# (gnntrain.reuse_workers).
@pytest.mark.parametrize(("workers", "optimizer", "lr"), [(4, "sparse_adagrad", 0.05), (2, "sgd", 50.0)])
def test_k_workers_one_step_equals_single_process_with_embeddings(
        ray_local: None, tmp_path: Path, workers: int, optimizer: str, lr: float) -> None:
    """All neighbours, one step over the same global batch: the dense parameters and every
    row of the partitioned table end where the single process puts them."""
    g = make_graph(240, seed=2)
    common = [*ONE_STEP, EMB_LR % (optimizer, lr)]
    single = run_training(tiny_cfg(tmp_path, *common, fanouts="[-1,-1]"), single_process=True,
                          graph=g, progress=False)
    dist = run_training(tiny_cfg(tmp_path, *common, workers=workers, fanouts="[-1,-1]"),
                        graph=g, progress=False)
    assert_params_close(final_state(dist)["model"], final_state(single)["model"])
    ta, _ = tables_by_orig_id(single)
    tb, states = tables_by_orig_id(dist)
    assert len(states) == workers
    torch.testing.assert_close(torch.from_numpy(tb), torch.from_numpy(ta), rtol=1e-4, atol=1e-5)
    fresh = init_rows(np.arange(240), 6, seed=0, init="normal", scale=1.0)
    assert float(np.abs(ta - fresh).max()) > 1e-3, "one step did not move the table"
    by = dist["bytes_per_epoch_by_category"]
    assert by["embedding"] > 0 and by["embedding_grad"] > 0


def test_one_ray_worker_equals_single_process_with_embeddings(ray_local: None, tmp_path: Path) -> None:
    g = make_graph(300, seed=1)
    cfg = tiny_cfg(tmp_path, "train.epochs=2", EMB % "sparse_adam")
    single = run_training(cfg, single_process=True, graph=g, progress=False)
    dist = run_training(cfg, graph=g, progress=False)
    assert_same_state(final_state(dist), final_state(single), world=1)
    a, sa = tables_by_orig_id(single)
    b, sb = tables_by_orig_id(dist)
    assert np.array_equal(a, b)
    for k in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(sa[0]["embedding"]["state"][k], sb[0]["embedding"]["state"][k])
    assert final_state(dist)["part_digests"] == final_state(single)["part_digests"]
    fresh = init_rows(np.arange(300), 6, seed=0, init="normal", scale=1.0)
    assert float(np.abs(a - fresh).max()) > 1e-3, "training did not move the table"


def test_resume_with_embeddings_is_bit_identical(tmp_path: Path) -> None:
    """Stop after epoch 1, resume to 3: the table, its optimizer state and the model end
    exactly where an uninterrupted run ends."""
    g = make_graph(300, seed=4)
    full = run_training(tiny_cfg(tmp_path, "train.epochs=3", EMB % "sparse_adam"),
                        single_process=True, graph=g, progress=False)
    first = run_training(tiny_cfg(tmp_path, "train.epochs=1", EMB % "sparse_adam"),
                         single_process=True, graph=g, progress=False)
    run = RunDir(Path(first["run_dir"]))
    (run.path / "config.yaml").write_text((run.path / "config.yaml").read_text()
                                          .replace("epochs: 1", "epochs: 3"))
    resumed = run_training(load_config(raw=run.read_config_raw()), single_process=True, graph=g,
                           resume=run, progress=False)
    assert_same_state(final_state(resumed), final_state(full))
    assert final_state(resumed)["part_digests"] == final_state(full)["part_digests"]
    assert resumed["final"]["test_acc"] == full["final"]["test_acc"]


def test_checkpoint_table_of_another_shape_is_refused_before_training(tmp_path: Path) -> None:
    g = make_graph(200, seed=5)
    first = run_training(tiny_cfg(tmp_path, "train.epochs=1", EMB % "sgd"), single_process=True,
                         graph=g, progress=False)
    run = RunDir(Path(first["run_dir"]))
    name = final_state(first)["part_files"][0]
    state = load_part_file(run, name)
    state["embedding"]["table"] = state["embedding"]["table"][:150]
    side = run.path / "checkpoints" / name
    torch.save(state, side)
    main = side.with_name(name.split(".part-")[0] + ".pt")
    ckpt = torch.load(main, weights_only=True)
    ckpt["part_records"][0] = dataclasses.asdict(record_file(side))  # a consistent checkpoint
    torch.save(ckpt, main)
    cfg = load_config(raw=run.read_config_raw(), overrides=["train.epochs=2"])
    with pytest.raises(ValueError, match=r"shape \(150, 6\).*200 nodes x model.node_embedding.dim=6"):
        run_training(cfg, single_process=True, graph=g, resume=run, progress=False)
    assert len(run.metrics()) == 1, "training went on after the refusal"


@pytest.mark.parametrize(("override", "match"), [
    ("model.node_embedding={dim: 8, optimizer: sgd, lr: 0.1}",
     r"checkpoint's model does not fit.*\(16, 14\) vs \(16, 16\).*node_embedding.dim"),
    ("model.node_embedding={dim: 6, optimizer: sparse_adam, lr: 0.1}",
     r"trained with optimizer 'sgd' but model.node_embedding.optimizer='sparse_adam'"),
])
def test_resume_with_another_embedding_width_or_optimizer_is_refused(tmp_path: Path, override: str,
                                                                     match: str) -> None:
    """The run's own checkpoint, resumed under a config whose table is wider or whose table
    optimizer differs: refused by name before any epoch runs."""
    g = make_graph(200, seed=5)
    first = run_training(tiny_cfg(tmp_path, "train.epochs=1", EMB % "sgd"), single_process=True,
                         graph=g, progress=False)
    run = RunDir(Path(first["run_dir"]))
    cfg = load_config(raw=run.read_config_raw(), overrides=["train.epochs=2", override])
    with pytest.raises(ValueError, match=match):
        run_training(cfg, single_process=True, graph=g, resume=run, progress=False)
    assert len(run.metrics()) == 1, "training went on after the refusal"


@pytest.mark.parametrize(("override", "match"), [
    ("model.node_embedding={dim: 0}", "dim=0: the embedding width must be a positive integer"),
    ("model.node_embedding={dim: 4, optimizer: adam}", "optimizer='adam'.*sparse_adam"),
])
def test_bad_embedding_config_is_refused(tmp_path: Path, override: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        tiny_cfg(tmp_path, override)


def test_sum_needs_matching_width(tmp_path: Path) -> None:
    cfg = tiny_cfg(tmp_path, "model.node_embedding={dim: 3, combine: sum}")
    with pytest.raises(ValueError, match="dim=3 with combine='sum' must equal the dataset's feature width"):
        run_training(cfg, single_process=True, graph=make_graph(100), progress=False)


def test_predict_exports_the_learned_table(tmp_path: Path) -> None:
    g = make_graph(200, seed=6)
    summary = run_training(tiny_cfg(tmp_path, "train.epochs=1", EMB % "sparse_adagrad",
                                    "model.node_embedding.combine=only"),
                           single_process=True, graph=g, progress=False)
    out = predict(summary["run_dir"], "node_embedding", single_process=True, graph=g, progress=False)
    ids, values = read_predictions(out)
    table, _ = tables_by_orig_id(summary)
    np.testing.assert_array_equal(values[np.argsort(ids)], table)
    # layer 0 of a combine=only model is the table itself, through the layer-wise path
    out0 = predict(summary["run_dir"], "embeddings", layer=0, single_process=True, graph=g,
                   progress=False)
    ids0, values0 = read_predictions(out0)
    np.testing.assert_array_equal(values0[np.argsort(ids0)], table)


def test_reads_wait_for_the_owner_to_apply_the_step() -> None:
    """A peer at version v never reads a row from before the owner's update v: the read
    waits for the owner's apply, and times out (never hangs) when it does not come."""
    import threading

    shard = _shard("sgd")
    shard.add_grads(0, 1, np.array([3]), np.ones((1, 4), dtype=np.float32))
    got: list[np.ndarray] = []
    reader = threading.Thread(target=lambda: got.append(shard.rows(np.array([3]), 1)))
    reader.start()
    reader.join(timeout=0.3)
    assert reader.is_alive() and not got, "the read did not wait for version 1"
    before = shard.table[3].copy()
    shard.apply(count=1.0)
    reader.join(timeout=5)
    assert got and np.allclose(got[0][0], before - 0.1)
    shard.wait_timeout_s = 0.2
    with pytest.raises(TimeoutError, match="version 5 asked"):
        shard.rows(np.array([0]), 5)


def test_worker_loss_with_embeddings_recovers_bit_identical(ray_local: None, tmp_path: Path) -> None:
    """A worker exits mid-epoch on a 2-worker run with a sparse-Adam table: the recovered
    run restores every part's rows and moments from the per-part checkpoint files and
    ends bit-identical to the undisturbed run (model, optimizer, and each part's table)."""
    g = make_graph(400, seed=7)
    base = ("train.epochs=3", "train.checkpoint_every=1", "train.keep_checkpoints=5",
            "sampler.batch_size=32", EMB % "sparse_adam", "cluster.collective_timeout_s=60")
    calm = run_training(tiny_cfg(tmp_path / "a", *base, workers=2), graph=g, progress=False)
    hit = run_training(tiny_cfg(tmp_path / "b", *base, "train.max_failures=1", "faults.kind=exit",
                                "faults.rank=1", "faults.epoch=1", "faults.step=2", workers=2),
                       graph=g, progress=False)
    [f] = hit["failures"]
    assert f["restart_from_epoch"] == 1
    assert_same_state(final_state(hit), final_state(calm), world=2)
    assert final_state(hit)["part_digests"] == final_state(calm)["part_digests"]
    assert len(set(final_state(calm)["part_digests"])) == 2  # the parts really differ

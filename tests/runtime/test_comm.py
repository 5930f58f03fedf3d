"""Communication accounting: bytes counted equal bytes sent (DESIGN: account and report).

The reference is measured where the messages cross the actor boundary on real Ray: a
probe subclass of the worker actor serialises, with Ray's own serializer, every request
it receives (each argument as Ray delivered it) and every reply it returns, and the
counted figures must equal that per category, per destination and per message.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import ray
import torch

from gnntrain.config import RunConfig
from gnntrain.report import main as report_main
from gnntrain.runtime import ray_group
from gnntrain.runtime.codec import DTYPES, decode, encode
from gnntrain.runtime.comm import CATEGORIES, COUNTING_RULE, summarise, wire_bytes
from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.driver import fit
from gnntrain.runtime.loopback import LoopbackGroup
from gnntrain.runtime.ray_group import RayGroup, WorkerActor
from gnntrain.tasks import NodeClassification
from partition import build_partition_set, build_training_set
from partition.graph import Graph
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg

PEER_CALLS = {"sample": "sample", "features": "feature", "hidden": "eval",  # SERVE_CALLS
              "embedding_rows": "embedding", "embedding_grads": "embedding_grad"}
TABLE_CATEGORIES = ("embedding", "embedding_grad")
BYTES_PER_VALUE = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}


def serialised_size(value: Any) -> int:
    """Length of the bytes Ray's serializer really produces for ``value``, plus its tag."""
    from ray._private.worker import global_worker

    s = global_worker.get_serialization_context().serialize(value)
    return len(s.to_bytes()) + len(s.metadata)


class RecordingHandle:
    """An actor handle that measures the arguments of every ``.method.remote(*args)`` as
    Ray serialises them in the caller, then makes the call."""

    def __init__(self, handle: Any, record: Any) -> None:
        self._handle = handle
        self._record = record  # record(call name, nbytes)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._handle, name)
        record = self._record

        class _Method:
            @staticmethod
            def remote(*args: Any) -> Any:  # serve("sample", ...), call("train_epoch", ...)
                record(args[0], sum(serialised_size(a) for a in args))
                return method.remote(*args)

        return _Method


class ProbeActor(WorkerActor):
    """The worker actor, measuring every peer request it sends (in the caller, before Ray
    has it) and every reply it returns to a peer or the coordinator."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._lock = threading.Lock()
        self.seen: dict[str, Any] = {}
        self.probe_take()

    def setup(self, handles: list[Any], master: tuple[str, int], attempt: int = 0,
              backend: str = "gloo") -> dict[str, Any]:
        n = super().setup(handles, master, attempt, backend)
        peers = self._w().access.peers
        assert isinstance(peers, ray_group.RayPeers)
        peers.handles = [RecordingHandle(h, lambda name, nbytes, dst=dst:
                                         self._peer(PEER_CALLS[name], self.rank, dst, nbytes))
                         for dst, h in enumerate(handles)]
        return n

    def _peer(self, cat: str, src: int, dst: int, nbytes: int) -> None:
        with self._lock:
            b_m = self.seen["peer"].setdefault(f"{cat} {src} {dst}", [0, 0])
            b_m[0] += nbytes
            b_m[1] += 1

    def probe_take(self) -> dict[str, Any]:
        """What was measured since the last call, then reset."""
        with self._lock:
            out = self.seen
            self.seen = {"peer": {}, "control": [0, 0], "feature_payload": [0, 0, 0, 0, 0]}
        return out

    def probe_feature_dtype(self, dtype: str) -> None:
        self._w().access.reader.dtype = dtype


def _serve_probe(self: ProbeActor, name: str, *args: Any) -> Any:
    out = WorkerActor.serve(self, name, *args)
    self._peer(PEER_CALLS[name], self.rank, int(args[-1]), serialised_size(out))  # reply to the requester
    if name == "features":  # what the array buffers carry per value
        with self._lock:  # a typed graph's reply: one Encoded per node type
            for enc in out if isinstance(out, tuple) else (out,):
                fp = self.seen["feature_payload"]
                fp[0] += enc.data.size
                fp[1] += enc.data.nbytes
                fp[2] += enc.scale.nbytes if enc.scale is not None else 0
                fp[3] += int(enc.sparse)
                fp[4] += (enc.indptr.size - 1) * enc.width if enc.indptr is not None else enc.data.size
    return out


def _call_probe(self: ProbeActor, name: str, *args: Any) -> Any:
    out = WorkerActor.call(self, name, *args)
    with self._lock:
        self.seen["control"][0] += serialised_size(out)
        self.seen["control"][1] += 1
    return out


ProbeActor.serve = _serve_probe  # type: ignore[method-assign]
ProbeActor.call = _call_probe  # type: ignore[method-assign]


def _counted(comms: list[dict[str, Any]], world: int) -> dict[str, Any]:
    """Matrices and messages of several ``summarise`` results, added up."""
    out: dict[str, Any] = {c: np.zeros((world, world), dtype=np.int64) for c in CATEGORIES}
    out["messages"] = dict.fromkeys(CATEGORIES, 0)
    out["control_per_worker"] = np.zeros(world, dtype=np.int64)
    for c in comms:
        for cat in CATEGORIES:
            out[cat] += np.asarray(c["matrix_by_category"][cat], dtype=np.int64)
            out["messages"][cat] += c["messages_by_category"][cat]
        out["control_per_worker"] += np.asarray(c["coordinator_control_bytes"], dtype=np.int64)
    return out


@contextmanager
def recorded_group(cfg: Any, graph: Any, world: int) -> Iterator[tuple[RayGroup, list[Any], np.ndarray]]:
    """A Ray group over ``graph``'s parts (the set a run trains on: typed for a typed graph)
    whose coordinator calls are recorded: yields the group, its real actor handles and
    ``sent`` (bytes, messages) per worker."""
    pset = build_training_set(graph, cfg.partition)
    group = RayGroup(cfg, str(pset.path), world, cfg.model.arch, NodeClassification())
    actors = group.actors
    sent = np.zeros((2, world), dtype=np.int64)

    def record(w: int, nbytes: int) -> None:
        sent[:, w] += (nbytes, 1)

    try:
        group.actors = [RecordingHandle(a, lambda _name, nbytes, w=w: record(w, nbytes))
                        for w, a in enumerate(actors)]
        yield group, actors, sent
    finally:
        group.actors = actors
        group.shutdown()


def test_counted_bytes_equal_what_ray_serialises(ray_local: None, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Sampling, features, layer-wise evaluation and control over the real Ray transport,
    for every transfer dtype. One pair of actors serves all four: between runs the probe
    switches the dtype its feature reader asks for (the owner encodes what is asked)."""
    monkeypatch.setattr(ray_group.actor, "WorkerActor", ProbeActor)  # actor_class builds on it
    world = 2
    cfg = tiny_cfg(tmp_path, "train.epochs=1", "train.eval=full", workers=world)
    with recorded_group(cfg, make_graph(300, seed=3), world) as (group, actors, sent):
        for dtype in DTYPES:
            ray.get([a.probe_feature_dtype.remote(dtype) for a in actors], timeout=60)
            sent[:] = 0
            res = fit(cfg, group, None, NodeClassification(), progress=False)
            seen = ray.get([a.probe_take.remote() for a in actors], timeout=60)
            _check_counted_equals_seen(res, seen, sent, dtype, world)
            assert sum(s["feature_payload"][3] for s in seen) == 0  # dense rows travel dense


def sparse_features(g: Graph, keep: float = 0.02, seed: int = 0) -> Graph:
    """``g`` with all but about ``keep`` of its feature values zero (bag-of-words-like rows),
    one of them a ``-0.0``, which must travel as it is."""
    rng = np.random.default_rng(seed)
    x = np.where(rng.random(g.x.shape) < keep, g.x, 0.0).astype(np.float32)
    x[0, 0] = -0.0
    return dataclasses.replace(g, x=x)


def test_sparse_feature_rows_counted_as_ray_serialises(ray_local: None, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Mostly-zero rows travel as CSR (fewer values than rows x width) and are still counted
    exactly as Ray serialises them, for a full-width and a narrowed dtype."""
    monkeypatch.setattr(ray_group.actor, "WorkerActor", ProbeActor)
    world = 2
    cfg = tiny_cfg(tmp_path, "train.epochs=1", "train.eval=full", workers=world)
    g = sparse_features(make_graph(300, seed=3, num_features=64))
    with recorded_group(cfg, g, world) as (group, actors, sent):
        for dtype in ("float32", "int8"):
            ray.get([a.probe_feature_dtype.remote(dtype) for a in actors], timeout=60)
            sent[:] = 0
            res = fit(cfg, group, None, NodeClassification(), progress=False)
            seen = ray.get([a.probe_take.remote() for a in actors], timeout=60)
            _check_counted_equals_seen(res, seen, sent, dtype, world)
            values, sparse, dense_values = (sum(s["feature_payload"][i] for s in seen)
                                            for i in (0, 3, 4))
            assert sparse > 0 and 0 < values < 0.05 * dense_values, (values, dense_values)


def test_embedding_bytes_equal_what_ray_serialises(ray_local: None, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A learnable node embedding adds row reads (``embedding``) and gradient pushes
    (``embedding_grad``): counted exactly as Ray serialises them, like every other category."""
    monkeypatch.setattr(ray_group.actor, "WorkerActor", ProbeActor)
    world = 2
    cfg = tiny_cfg(tmp_path, "train.epochs=1", "train.eval=sampled",
                   "model.node_embedding={dim: 6, optimizer: sparse_adagrad}", workers=world)
    with recorded_group(cfg, make_graph(300, seed=3), world) as (group, actors, sent):
        res = fit(cfg, group, None, NodeClassification(), progress=False)
        seen = ray.get([a.probe_take.remote() for a in actors], timeout=60)
        _check_counted_equals_seen(res, seen, sent, "float32", world,
                                   categories=("sample", "feature", *TABLE_CATEGORIES))
        # one gradient message per owner per step, as many as the reads of training
        msgs = res.epochs[0]["comm"]["messages_by_category"]
        assert msgs["embedding_grad"] == msgs["embedding"] > 0


def _check_counted_equals_seen(res: Any, seen: list[dict[str, Any]], sent: np.ndarray,
                               dtype: str, world: int,
                               categories: tuple[str, ...] = ("sample", "feature", "eval")) -> None:
    rec = res.epochs[0]
    counted = _counted([res.setup_comm, rec["comm"], rec["eval_comm"]], world)
    for cat in categories:
        measured = np.zeros((world, world), dtype=np.int64)
        messages = 0
        for s in seen:
            for key, (b, m) in s["peer"].items():
                c, src, dst = key.split()
                if c == cat:
                    measured[int(src), int(dst)] += b
                    messages += m
        assert measured[0, 1] > 0 and measured[1, 0] > 0, f"{dtype}: no {cat} traffic both ways"
        np.testing.assert_array_equal(counted[cat], measured,
                                      err_msg=f"{dtype}: {cat} bytes, sender x destination")
        assert counted["messages"][cat] == messages, (dtype, cat)
    control = sent[0] + np.array([s["control"][0] for s in seen])  # calls + replies
    assert sent[0].min() > 0 and control.min() > sent[0].min()
    np.testing.assert_array_equal(counted["control_per_worker"], control,
                                  err_msg=f"{dtype}: control bytes per worker")
    assert counted["messages"]["control"] == sent[1].sum() + sum(s["control"][1] for s in seen)
    # the feature rows crossed the boundary at the transfer dtype's width
    values, data, scale, _, _ = np.sum([s["feature_payload"] for s in seen], axis=0)
    assert values > 0 and data == values * BYTES_PER_VALUE[dtype], dtype
    assert (scale > 0) == (dtype == "int8")
    # the matrix adds up to the categories and nobody sends to itself
    mat = np.asarray(rec["comm"]["matrix"])
    assert mat.sum() == rec["comm"]["total_bytes"] - rec["comm"]["by_category"]["control"]
    assert np.all(np.diag(mat) == 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transfer_dtype_width_and_round_trip(dtype: str) -> None:
    """Each extra row costs its values at the dtype's width on the wire, and the
    receiver decodes what a local cast would give (bfloat16: torch's own rounding)."""
    rng = np.random.default_rng(0)
    rows = (rng.standard_normal((128, 33)) * 300).astype(np.float32)
    enc = encode(rows, dtype)
    assert not enc.sparse
    per_row = rows.shape[1] * BYTES_PER_VALUE[dtype] + (4 if dtype == "int8" else 0)
    assert enc.nbytes == rows.shape[0] * per_row
    # 64 more rows: their buffer, plus at most a few bytes of longer length fields
    assert 0 <= wire_bytes(enc) - wire_bytes(encode(rows[:64], dtype)) - 64 * per_row <= 8
    got = decode(enc, dtype)
    assert got.dtype == np.float32
    if dtype == "int8":
        step = np.abs(rows).max(axis=1, keepdims=True) / 127
        assert np.all(np.abs(got - rows) <= step / 2 + 1e-6 * np.abs(rows))
        return
    local = {"float32": rows, "float16": rows.astype(np.float16).astype(np.float32),
             "bfloat16": torch.from_numpy(rows).to(torch.bfloat16).float().numpy()}[dtype]
    np.testing.assert_array_equal(got, local)
    if dtype != "float32":
        assert not np.array_equal(got, rows)  # the values really were narrowed


@pytest.mark.parametrize("dtype", DTYPES)
def test_mostly_zero_rows_travel_sparse_and_decode_as_dense(dtype: str) -> None:
    """Rows with 1% of values set go as CSR in at most half the dense bytes and decode to
    exactly what the dense encoding decodes to (``-0.0`` included); a reply that would not
    halve stays dense."""
    rng = np.random.default_rng(1)
    rows = np.where(rng.random((200, 700)) < 0.01, rng.standard_normal((200, 700)) * 30,
                    0.0).astype(np.float32)
    rows[3] = 0.0          # an empty row
    rows[5, 7] = -0.0      # a set sign bit
    enc = encode(rows, dtype)
    assert enc.sparse and enc.width == 700 and enc.indices is not None
    assert enc.indices.dtype == np.uint16
    assert enc.data.size == np.count_nonzero(rows.view(np.uint32))
    dense_bytes = rows.size * BYTES_PER_VALUE[dtype] + (4 * rows.shape[0] if dtype == "int8" else 0)
    assert enc.nbytes <= dense_bytes / 2
    got = decode(enc, dtype)
    assert not encode(np.where(rng.random((50, 40)) < 0.5, 1.0, 0.0).astype(np.float32), dtype).sparse
    with_dense = decode(encode(rows, dtype, sparse=False), dtype)
    assert got.dtype == np.float32 and got.shape == rows.shape
    np.testing.assert_array_equal(got.view(np.uint32), with_dense.view(np.uint32))
    if dtype == "float32":
        np.testing.assert_array_equal(got.view(np.uint32), rows.view(np.uint32))


def test_sparse_rows_train_exactly_as_dense_rows(tmp_path: Path) -> None:
    """Two in-process workers on mostly-zero features: the same losses and metrics (layer-wise
    evaluation included) whether rows travel sparse or dense, in under half the feature
    bytes. (No dropout: in-process workers are threads drawing their masks from torch's one
    global generator.)"""
    g = sparse_features(make_graph(400, seed=3, num_features=64))
    out = {}
    for mode in ("sparse", "dense"):
        cfg = tiny_cfg(tmp_path, "train.epochs=2", "model.dropout=0.0",
                       f"train.sparse_feature_transfer={mode == 'sparse'}", workers=2)
        group = _loopback(cfg, tmp_path, graph=g)
        out[mode] = fit(cfg, group, None, NodeClassification(), progress=False)
    for a, b in zip(out["sparse"].epochs, out["dense"].epochs, strict=True):
        for key in ("loss", "val_acc", "test_acc"):
            assert a[key] == b[key], key
        fs, fd = a["comm"]["by_category"]["feature"], b["comm"]["by_category"]["feature"]
        assert 0 < fs < fd / 2, (fs, fd)
        assert a["comm"]["by_category"]["sample"] == b["comm"]["by_category"]["sample"]
        # layer-wise evaluation: layer 0's halo rows are the features, sent sparse as well
        es, ed = a["eval_comm"]["by_category"]["eval"], b["eval_comm"]["by_category"]["eval"]
        assert 0 < es < 0.75 * ed, (es, ed)


def _loopback(cfg: RunConfig, tmp_path: Path, seed: int = 3, graph: Graph | None = None) -> LoopbackGroup:
    g = graph if graph is not None else make_graph(400, seed=seed)
    pset = build_partition_set(g, cfg.partition, tmp_path / "parts")
    parts = [pset.load_part(p) for p in range(pset.num_parts)]
    return LoopbackGroup(cfg, parts, pset.global_degrees(), int(pset.num_classes), cfg.model.arch,
                         NodeClassification())


def test_cache_of_all_remote_rows_moves_no_feature_bytes(tmp_path: Path) -> None:
    cfg = tiny_cfg(tmp_path, "sampler.cache.policy=degree", "sampler.cache.size=1.0",
                   "train.epochs=2", workers=2)
    group = _loopback(cfg, tmp_path)
    res = fit(cfg, group, None, NodeClassification(), progress=False)
    assert res.setup_comm["by_category"]["feature"] > 0  # warm-up filled the cache
    for rec in res.epochs:
        assert rec["comm"]["by_category"]["feature"] == 0
        assert rec["cache_hit_rate"] == 1.0
        assert rec["feature_bytes_saved_by_cache"] > 0


def test_reduced_precision_halves_feature_bytes(tmp_path: Path) -> None:
    out: dict[str, Any] = {}
    for dtype in ("float32", "float16"):
        cfg = tiny_cfg(tmp_path, f"train.feature_dtype={dtype}", "train.epochs=1", workers=2)
        group = _loopback(cfg, tmp_path)
        res = fit(cfg, group, None, NodeClassification(), progress=False)
        out[dtype] = res.epochs[0]["comm"]
    f32, f16 = out["float32"]["by_category"]["feature"], out["float16"]["by_category"]["feature"]
    assert f16 < 0.75 * f32
    assert out["float32"]["by_category"]["sample"] == out["float16"]["by_category"]["sample"]


def test_one_worker_sends_nothing_but_control(ray_local: None, tmp_path: Path) -> None:
    summary = run_training(tiny_cfg(tmp_path, "train.epochs=1"), graph=make_graph(200), progress=False)
    for cat in CATEGORIES:
        if cat != "control":
            assert summary["bytes_per_epoch_by_category"][cat] == 0


def test_two_workers_on_ray_report_traffic(ray_local: None, tmp_path: Path) -> None:
    summary = run_training(tiny_cfg(tmp_path, "train.epochs=1", "train.plots=true", workers=2),
                           graph=make_graph(300), progress=False)
    by = summary["bytes_per_epoch_by_category"]
    assert by["sample"] > 0 and by["feature"] > 0 and by["gradient"] > 0
    run = Path(summary["run_dir"])
    plots = ("bytes.png", "heatmap.png", "accuracy.png", "partition.png")
    for name in ("comm.json", "metrics.jsonl", "summary.json", "partition.json", "config.yaml", *plots):
        assert (run / name).is_file(), name
    for name in plots:  # `python -m gnntrain.report` draws every one of them again from the files
        (run / name).unlink()
    assert report_main([str(run)]) == 0
    assert all((run / name).stat().st_size > 0 for name in plots)
    # comm.json states the counting rule and shows the evaluation's hidden-row traffic
    epoch0 = json.loads((run / "comm.json").read_text())["per_epoch"][0]
    assert epoch0["bytes_are"] == COUNTING_RULE
    assert epoch0["by_category"]["eval"] == 0  # training moves no hidden rows
    assert epoch0["evaluation"]["by_category"]["eval"] > 0
    assert summary["bytes_per_evaluation_by_category"]["eval"] > 0


def test_summarise_matrix() -> None:
    assert CATEGORIES == ("sample", "feature", "eval", "gradient", "control", "embedding",
                          "embedding_grad")
    snaps = [{"rank": 0, "bytes": [[0, 5], [0, 7], [0, 2], [0, 0], [0, 0], [0, 3], [0, 0]],
              "messages": [[0, 1], [0, 1], [0, 1], [0, 0], [0, 0], [0, 1], [0, 0]]},
             {"rank": 1, "bytes": [[3, 0], [0, 0], [0, 0], [0, 0], [1, 0], [0, 0], [2, 0]],
              "messages": [[1, 0], [0, 0], [0, 0], [0, 0], [1, 0], [0, 0], [1, 0]]}]
    s = summarise(snaps, 2)
    assert s["matrix"] == [[0, 17], [6, 0]]
    assert s["by_category"] == {"sample": 8, "feature": 7, "eval": 2, "gradient": 0, "control": 1,
                                "embedding": 3, "embedding_grad": 2}
    assert s["bytes_are"] == COUNTING_RULE

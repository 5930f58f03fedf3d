"""Typed graphs train as one graph with node types as id ranges: R-GCN, exact like the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from gnntrain.config import RunConfig, SyntheticHeteroConfig, load_config
from gnntrain.data.hetero import to_training_graph
from gnntrain.data.hetero_synthetic import generate_hetero
from gnntrain.models import build_model
from gnntrain.precision import resolve_precision
from gnntrain.runtime.coordinator import run_training
from partition import build_partition_set, open_partition_set
from partition.feature_rows import TypedRows
from partition.graph import Graph
from samplers import Block
from tests.conftest import make_graph
from tests.runtime.helpers import (
    ONE_STEP,
    assert_moved,
    assert_params_close,
    assert_replicas_agree,
    assert_same_state,
    final_state,
)

HG = generate_hetero(SyntheticHeteroConfig(papers=300, authors=300, institutions=10, fields=20,
                                           features=8, classes=4, seed=3), add_reverse=True)
GRAPH = to_training_graph(HG)


def typed_cfg(tmp_path: Path, *overrides: str, workers: int = 1, fanouts: str = "[5,5]") -> RunConfig:
    raw: dict[str, Any] = {
        "dataset": {"name": GRAPH.name, "source": "synthetic"},
        "partition": {"parts": workers, "method": "metis", "root": str(tmp_path / "parts")},
        "sampler": {"fanouts": [5, 5], "batch_size": 32, "prefetch": 1},
        "model": {"arch": "rgcn", "hidden": 16, "layers": 2, "dropout": 0.3,
                  "options": {"node_types": 4, "bases": 2}},
        "train": {"epochs": 2, "lr": 0.01, "seed": 0, "run_root": str(tmp_path / "runs"), "plots": False},
        "cluster": {"workers": workers, "call_timeout_s": 60, "collective_timeout_s": 60},
    }
    return load_config(raw=raw, overrides=[f"sampler.fanouts={fanouts}", *overrides])


def test_typed_graph_becomes_one_graph_with_type_ranges() -> None:
    g, hom = GRAPH, HG.homogenise()
    assert g.node_type_names == tuple(HG.node_types)
    assert g.node_type_offsets == tuple(int(o) for o in hom.type_offsets)
    types = g.node_types()
    assert types is not None
    np.testing.assert_array_equal(types, hom.node_type)
    paper = HG.node_types.index("paper")
    lo = g.node_type_offsets[paper]
    np.testing.assert_array_equal(g.train_idx, HG.train_idx + lo)
    np.testing.assert_array_equal(g.y[lo:lo + HG.num_nodes["paper"]], HG.y)
    np.testing.assert_array_equal(g.x[lo:lo + HG.num_nodes["paper"], :8], HG.x["paper"])
    assert not g.x[types != paper].any(), "featureless types must get zero rows"
    assert g.num_edges == HG.total_edges
    # the type ranges are part of the graph's identity (its partition sets are its own)
    untyped = Graph(indptr=g.indptr, indices=g.indices, x=g.x, y=g.y, train_idx=g.train_idx,
                    val_idx=g.val_idx, test_idx=g.test_idx, num_classes=g.num_classes, name=g.name)
    assert untyped.content_hash() != g.content_hash()


def test_partition_set_records_types_and_untyped_sets_keep_their_digest(tmp_path: Path) -> None:
    cfg = typed_cfg(tmp_path, workers=2)
    pset = build_partition_set(GRAPH, cfg.partition)
    again = open_partition_set(pset.path)
    types = again.node_types()
    assert types is not None
    np.testing.assert_array_equal(types, GRAPH.node_types()[again.orig_ids(np.arange(GRAPH.num_nodes))])
    plain = build_partition_set(make_graph(100), cfg.partition)
    assert plain.node_types() is None
    assert "node_types" not in json.loads((plain.path / "meta.json").read_text())


def test_rgcn_layerwise_equals_forward_and_relations_matter() -> None:
    """Layer by layer over the full graph equals the model's forward on full blocks, and
    swapping two node types changes the output (the relations are really used)."""
    cfg = typed_cfg(Path("."))
    model = build_model("rgcn", cfg.model, GRAPH.num_features, GRAPH.num_classes, 0).eval()
    n = GRAPH.num_nodes
    ei = torch.from_numpy(np.stack([GRAPH.indices, np.repeat(np.arange(n), np.diff(GRAPH.indptr))]))
    types = torch.from_numpy(GRAPH.node_types())  # type: ignore[arg-type]
    block = Block(ei, n, n, torch.from_numpy(GRAPH.indptr), None, types)
    x = torch.from_numpy(GRAPH.x)
    with torch.no_grad():
        full = model([block, block], x)
        step = model.layer(1, block, model.layer(0, block, model.encode(x, types)))
        torch.testing.assert_close(full, step)
        shuffled = Block(ei, n, n, block.indptr, None, (types + 1) % 4)
        assert not torch.allclose(model([shuffled, shuffled], x), full)


def test_one_ray_worker_equals_single_process_on_a_typed_graph(ray_local: None, tmp_path: Path) -> None:
    cfg = typed_cfg(tmp_path)
    single = run_training(cfg, single_process=True, graph=GRAPH, progress=False)
    dist = run_training(cfg, graph=GRAPH, progress=False)
    assert_same_state(final_state(dist), final_state(single), world=1)
    assert single["final"]["test_acc"] == dist["final"]["test_acc"]
    report = json.loads((Path(dist["run_dir"]) / "partition.json").read_text())
    meta = json.loads((Path(report["partition_path"]) / "meta.json").read_text())
    assert meta["format_version"] == 2 and meta["kind"] == "typed"  # trained on the typed set


@pytest.mark.parametrize("workers", [2, 4])
def test_k_workers_one_step_equals_single_process_on_a_typed_graph(
        ray_local: None, tmp_path: Path, workers: int) -> None:
    single = run_training(typed_cfg(tmp_path, *ONE_STEP, fanouts="[-1,-1]"), single_process=True,
                          graph=GRAPH, progress=False)
    dist = run_training(typed_cfg(tmp_path, *ONE_STEP, workers=workers, fanouts="[-1,-1]"),
                        graph=GRAPH, progress=False)
    a = final_state(single)["model"]
    assert_moved(build_model("rgcn", typed_cfg(tmp_path).model, GRAPH.num_features,
                             GRAPH.num_classes, 0).state_dict(), a)
    assert_params_close(final_state(dist)["model"], a)
    assert_replicas_agree(final_state(dist), workers)


def test_one_process_holds_and_evaluates_a_typed_graph_per_type(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """In one process the typed features are held as a worker's part holds them, one table
    per node type: evaluation encodes each type at its own width and never builds the
    matrix padded to the widest type (which made DBLP's evaluation 8x slower than a
    worker's)."""
    from gnntrain.runtime.evaluator import Evaluator

    encoded = []
    by_type = Evaluator._encode_by_type
    monkeypatch.setattr(Evaluator, "_encode_by_type", lambda self, enc, x: encoded.append(1) or by_type(self, enc, x))
    monkeypatch.setattr(TypedRows, "__array__", lambda *a, **k: pytest.fail("the padded feature matrix was built"))
    s = run_training(typed_cfg(tmp_path, "train.epochs=2", "train.eval_every=1"), single_process=True, graph=GRAPH,
                     progress=False)
    assert len(encoded) == 2 and s["final"]["test_acc"] is not None


def test_rgcn_learns_the_typed_neighbourhood(tmp_path: Path) -> None:
    """Labels of the synthetic MAG-shaped graph follow the typed neighbourhood: R-GCN beats
    chance by far."""
    s = run_training(typed_cfg(tmp_path, "train.epochs=15", "model.dropout=0.0"), single_process=True,
                     graph=GRAPH, progress=False)
    assert s["final"]["test_acc"] > 0.5, s["final"]


@pytest.mark.parametrize(("arch", "options", "match"), [
    ("rgcn", "{node_types: 2}", r"model.options.node_types=2 but dataset .* has 4 node types"),
    ("rgcn", "{}", "takes node_types"),
    ("rgcn", "{node_types: 4, root_per_type: 'yes'}", r"model.options.root_per_type='yes': must be true or false"),
    ("rgcn", "{node_types: 4, input_projection: 1}",
     r"model.options.input_projection=1: arch 'rgcn' takes true .* or false"),
])
def test_typed_model_misconfigured_is_refused_before_work(tmp_path: Path, arch: str, options: str,
                                                          match: str) -> None:
    cfg = typed_cfg(tmp_path, f"model.arch={arch}", f"model.options={options}")
    with pytest.raises(ValueError, match=match):
        run_training(cfg, single_process=True, graph=GRAPH, progress=False)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_rgcn_on_an_untyped_graph_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reads node types but dataset .* is untyped"):
        run_training(typed_cfg(tmp_path), single_process=True, graph=make_graph(100), progress=False)


def rgcn_and_pyg(ours: Any, relations: int) -> tuple[Any, Any]:
    """``ours`` (an RGCNLayer) and PyG's ``RGCNConv`` over ``relations`` relations with the
    same bases, coefficients, root and bias (ours' per-type roots and biases all set to the
    first type's, PyG's single ones)."""
    from torch_geometric.nn import RGCNConv

    ref = RGCNConv(ours.bases.shape[1], ours.bases.shape[2], num_relations=relations,
                   num_bases=ours.bases.shape[0], aggr="mean")
    with torch.no_grad():
        ref.weight.copy_(ours.bases)
        ref.comp.copy_(ours.coeff)
        ref.root.copy_(ours.root[0])
        ref.bias.copy_(ours.bias[0])
        ours.root.copy_(ours.root[0].expand_as(ours.root))
        ours.bias.copy_(ours.bias[0].expand_as(ours.bias))
    return ours, ref


def test_rgcn_layer_equals_pyg_rgcnconv() -> None:
    """One layer equals PyG's RGCNConv (basis decomposition, per-relation mean) with the
    same bases, coefficients, root and bias, relation = (source type, destination type)."""
    from gnntrain.models.typed import RGCNLayer

    t, n = 4, GRAPH.num_nodes
    torch.manual_seed(0)
    ours, ref = rgcn_and_pyg(RGCNLayer(GRAPH.num_features, 5, t, 2), t * t)
    types = torch.from_numpy(GRAPH.node_types())  # type: ignore[arg-type]
    src = torch.from_numpy(GRAPH.indices)
    dst = torch.from_numpy(np.repeat(np.arange(n), np.diff(GRAPH.indptr)))
    x = torch.from_numpy(GRAPH.x)
    got = ours(Block(torch.stack([src, dst]), n, n, torch.from_numpy(GRAPH.indptr), None, types), x)
    want = ref(x, torch.stack([src, dst]), types[src] * t + types[dst])
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_type_projection_equals_pyg_heterodictlinear_on_each_types_own_columns() -> None:
    """Each node's padded row through its type's weights equals PyG's ``HeteroDictLinear``
    on the type's own (unpadded) features, then ReLU, and so does the type's own unpadded
    row (what layer-wise inference encodes); the first R-GCN layer then reads
    ``model.hidden``-wide rows, and without the projection the raw rows."""
    from torch_geometric.nn import HeteroDictLinear

    from gnntrain.models.typed import TypeProjection

    torch.manual_seed(0)
    widths = {t: w for t, w in zip(GRAPH.node_type_names, GRAPH.node_type_features, strict=True) if w}
    assert len(set(widths.values())) > 1 or len(widths) < len(GRAPH.node_type_names), \
        "the test graph's types should differ in width (or lack features)"
    ref = HeteroDictLinear(widths, 7)
    ours = TypeProjection(GRAPH.num_features, 7, len(GRAPH.node_type_names))
    x = torch.from_numpy(GRAPH.x)
    types = torch.from_numpy(GRAPH.node_types())  # type: ignore[arg-type]
    rows = {}
    with torch.no_grad():
        for i, t in enumerate(GRAPH.node_type_names):
            lo, hi = GRAPH.node_type_offsets[i], GRAPH.node_type_offsets[i + 1]
            if t in widths:
                lin = ref.lins[t]
                ours.weight[i, :widths[t]].copy_(lin.weight.T)
                ours.bias[i].copy_(lin.bias)
                rows[t] = x[lo:hi, :widths[t]]
        want = ref(rows)
        got = ours(x, types)
    for i, t in enumerate(GRAPH.node_type_names):
        lo, hi = GRAPH.node_type_offsets[i], GRAPH.node_type_offsets[i + 1]
        if t in widths:
            torch.testing.assert_close(got[lo:hi], torch.relu(want[t]))
        else:  # a featureless type's zero rows: its bias alone
            torch.testing.assert_close(got[lo:hi], torch.relu(ours.bias[i]).expand(hi - lo, -1))
        # layer-wise inference encodes each type's rows at the type's own width (no padding)
        own = x[lo:hi, :widths.get(t, 0)]
        torch.testing.assert_close(ours(own, types[lo:hi]), got[lo:hi])
    cfg = typed_cfg(Path("."))
    on = build_model("rgcn", cfg.model, GRAPH.num_features, GRAPH.num_classes, 0)
    off = build_model("rgcn", cfg.model.model_copy(update={"options": {**cfg.model.options,
                                                                       "input_projection": False}}),
                      GRAPH.num_features, GRAPH.num_classes, 0)
    assert on.convs[0].bases.shape[1] == cfg.model.hidden and on.project is not None
    assert off.convs[0].bases.shape[1] == GRAPH.num_features and off.project is None


def test_a_sparse_types_rows_project_as_their_dense_rows() -> None:
    """One type's rows as a sparse CSR tensor (how layer-wise inference hands a wide
    bag-of-words type to the projection) give the dense rows' projection; mixed types in a
    sparse tensor are refused."""
    from gnntrain.models.typed import TypeProjection

    torch.manual_seed(0)
    proj = TypeProjection(50, 8, 3)
    dense = torch.zeros(40, 30)
    dense[torch.arange(40), torch.randint(0, 30, (40,))] = 1.0  # one nonzero a row
    one = torch.full((40,), 1, dtype=torch.int64)
    with torch.no_grad():
        torch.testing.assert_close(proj(dense.to_sparse_csr(), one), proj(dense, one))
        with pytest.raises(ValueError, match="one node type"):
            proj(dense.to_sparse_csr(), torch.arange(40) % 3)


def test_layerwise_inference_encodes_a_sparse_type_sparse_and_equals_the_dense_path(tmp_path: Path) -> None:
    """The evaluator keeps a sparse type's table as CSR (built once) and encodes from it; the
    rows equal those encoded from the dense table."""
    from gnntrain.models import SPARSE_INPUT_DENSITY
    from gnntrain.runtime.evaluator import Evaluator

    cfg = typed_cfg(tmp_path)
    model = build_model("rgcn", cfg.model, GRAPH.num_features, GRAPH.num_classes, 0).eval()
    types = GRAPH.node_types()
    assert types is not None
    tables = []
    for t in range(len(GRAPH.node_type_names)):
        rows = GRAPH.x[types == t]
        sparse = np.zeros_like(rows)  # one value in 32: under SPARSE_INPUT_DENSITY
        sparse[:, 0] = rows[:, 0] * (np.arange(rows.shape[0]) % 4 == 0)
        tables.append(np.ascontiguousarray(sparse if t == 0 else rows))
    x = TypedRows(tables, types, GRAPH.num_features)
    assert np.count_nonzero(tables[0]) <= SPARSE_INPUT_DENSITY * tables[0].size
    ev = Evaluator.__new__(Evaluator)  # the encoding alone: no part access needed
    ev.model, ev._sparse_inputs = model, {}
    ev.precision = resolve_precision("fp32", torch.device("cpu"))
    got = ev._encode_by_type(model.encode, x)
    assert ev._sparse_inputs[0] is not None and ev._sparse_inputs[0].layout == torch.sparse_csr
    with torch.no_grad():
        want = model.encode(torch.from_numpy(np.asarray(x)), torch.from_numpy(types))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)

"""The quality report, checked against independent computations (scipy, brute force, Monte Carlo)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from rich.console import Console

from partition import (
    PartitionConfig,
    PartitionError,
    PartitionReport,
    PartitionSet,
    assign_parts,
    open_partition_set,
    quality_report,
    set_report,
    write_report,
)
from partition.format import PartitionMeta, meta_digest
from partition.graph import Graph
from tests.conftest import make_graph
from tests.partition.conftest import directed_messy


def _brute_force(g: Graph, parts: np.ndarray, k: int) -> dict[str, object]:
    """Per-edge Python loops: the slow, obvious definitions."""
    matrix = [[0] * k for _ in range(k)]
    halo: list[set[int]] = [set() for _ in range(k)]
    for v in range(g.num_nodes):
        for u in g.indices[g.indptr[v]:g.indptr[v + 1]].tolist():
            matrix[parts[v]][parts[u]] += 1
            if parts[u] != parts[v]:
                halo[parts[v]].add(u)
    return {"matrix": matrix, "halo": [len(h) for h in halo]}


def test_report_numbers_match_brute_force_and_scipy() -> None:
    g = directed_messy(n=90, m=400, seed=4)
    k = 3
    parts = assign_parts(g, PartitionConfig(parts=k))
    r = quality_report(g, parts, method="metis")
    ref = _brute_force(g, parts, k)
    assert r.cut_matrix == ref["matrix"]
    assert [p.halo for p in r.parts] == ref["halo"]
    # scipy: cut = stored edges whose endpoints differ, via the incidence of parts
    a = sp.csr_matrix((np.ones(g.num_edges), g.indices, g.indptr), shape=(g.num_nodes,) * 2)
    onehot = sp.csr_matrix((np.ones(g.num_nodes), (np.arange(g.num_nodes), parts)), shape=(g.num_nodes, k))
    within = (onehot.T @ a @ onehot).diagonal().sum()
    assert r.edge_cut == g.num_edges - int(within)
    assert r.edge_cut_fraction == pytest.approx(r.edge_cut / g.num_edges)
    assert r.edge_cut == sum(p.cut_edges for p in r.parts)
    nodes = np.bincount(parts, minlength=k)
    assert [p.nodes for p in r.parts] == nodes.tolist()
    assert [p.edges for p in r.parts] == np.bincount(parts, weights=g.in_degrees(), minlength=k).astype(int).tolist()
    for s in ("train", "val", "test"):
        assert [getattr(p, s) for p in r.parts] == np.bincount(parts[g.split_idx(s)], minlength=k).tolist()
    assert r.imbalance["nodes"] == pytest.approx(nodes.max() / nodes.mean())
    assert [p.replication for p in r.parts] == pytest.approx([h / n for h, n in zip(ref["halo"], nodes, strict=True)])


def test_random_baseline_is_measured_and_near_one_minus_one_over_k() -> None:
    g = make_graph(3000, 10, seed=5)
    for k in (2, 4, 8):
        r = quality_report(g, assign_parts(g, PartitionConfig(parts=k)), method="metis")
        assert r.random_expected_fraction == pytest.approx(1 - 1 / k)
        assert abs(r.random_edge_cut_fraction - (1 - 1 / k)) < 0.02
        assert r.cut_vs_random == pytest.approx(r.edge_cut / r.random_edge_cut)


def test_report_agrees_with_the_partition_set(four_parts: PartitionSet, messy_graph: Graph) -> None:
    r = quality_report(messy_graph, four_parts.assignment(), method="metis", steps=four_parts.meta.steps)
    m = four_parts.meta
    assert r.edge_cut == m.edge_cut
    assert [(p.nodes, p.edges, p.train, p.halo, p.cut_edges) for p in r.parts] == [
        (c.nodes, c.edges, c.train, c.halo, c.cut_edges) for c in m.parts]
    assert [s.name for s in r.steps] == [s.name for s in m.steps]


def test_set_report_needs_no_part_and_equals_the_whole_graph_report(four_parts: PartitionSet,
                                                                     messy_graph: Graph, tmp_path: Path) -> None:
    """The set's meta carries the cut matrix and the random baseline's cut: the report of
    the set alone equals the whole-graph report without opening a part, and a set written
    before those fields (meta without them, its digest unchanged) counts them from its
    parts, with the same result."""
    want = quality_report(messy_graph, four_parts.assignment(), method="metis").model_dump(mode="json")
    keys = ("edge_cut", "random_edge_cut", "cut_matrix", "parts", "imbalance")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PartitionSet, "load_part", lambda *a, **k: pytest.fail("the report read a part"))
        got = set_report(four_parts).model_dump(mode="json")
    assert {k: got[k] for k in keys} == {k: want[k] for k in keys}

    old = tmp_path / "old-set"
    shutil.copytree(four_parts.path, old)
    body = json.loads((old / "meta.json").read_text())
    del body["cut_matrix"], body["random_edge_cut"]
    body["meta_sha256"] = meta_digest(PartitionMeta.model_validate(body))
    (old / "meta.json").write_text(json.dumps(body))
    older = open_partition_set(old)
    assert older.meta.cut_matrix is None and older.meta.random_edge_cut is None
    got = set_report(older).model_dump(mode="json")
    assert {k: got[k] for k in keys} == {k: want[k] for k in keys}


def test_remote_share_with_all_neighbours_is_exact() -> None:
    """One hop with fanout -1 samples every in-edge of every training node: the remote share
    is the share of those edges that come from another part."""
    g = directed_messy(n=80, m=300, seed=6)
    parts = assign_parts(g, PartitionConfig(parts=3, method="random"))
    r = quality_report(g, parts, fanouts=[-1])
    remote = total = 0
    for v in g.train_idx.tolist():
        for u in g.indices[g.indptr[v]:g.indptr[v + 1]].tolist():
            total += 1
            remote += int(parts[u] != parts[v])
    assert r.sampled_per_hop == pytest.approx([total])
    assert r.remote_per_hop == pytest.approx([remote])
    assert r.remote_share == pytest.approx(remote / total)


def test_remote_share_matches_monte_carlo_sampling() -> None:
    """Simulate fanout sampling without replacement (frontier kept with multiplicity, as the
    estimate assumes) and compare the mean sampled/remote counts per hop."""
    g = directed_messy(n=40, m=160, seed=7)
    k, fanouts = 2, [2, 3]
    parts = assign_parts(g, PartitionConfig(parts=k, method="random", seed=1))
    r = quality_report(g, parts, fanouts=fanouts)
    rng = np.random.default_rng(0)
    trials = 1500
    sampled = np.zeros(len(fanouts))
    remote = np.zeros(len(fanouts))
    for _ in range(trials):
        for seed in g.train_idx.tolist():
            frontier = [seed]
            for h, f in enumerate(fanouts):
                nxt = []
                for v in frontier:
                    row = g.indices[g.indptr[v]:g.indptr[v + 1]]
                    if row.size:
                        pick = rng.choice(row.size, size=min(f, row.size), replace=False)
                        nxt.extend(row[pick].tolist())
                sampled[h] += len(nxt)
                remote[h] += sum(parts[u] != parts[seed] for u in nxt)
                frontier = nxt
    assert r.sampled_per_hop == pytest.approx((sampled / trials).tolist(), rel=0.03)
    assert r.remote_per_hop == pytest.approx((remote / trials).tolist(), rel=0.06)


def test_one_part_has_no_cut_and_no_remote_neighbours(tiny_graph: Graph) -> None:
    r = quality_report(tiny_graph, np.zeros(tiny_graph.num_nodes, dtype=np.int64), fanouts=[5, 5])
    assert r.edge_cut == 0 and r.random_edge_cut == 0 and r.remote_share == 0.0
    assert r.cut_vs_random == 0.0 and r.parts[0].halo == 0


def test_bad_assignment_is_refused(tiny_graph: Graph) -> None:
    with pytest.raises(PartitionError, match=r"assignment: expected an integer array of shape \[200\]"):
        quality_report(tiny_graph, np.zeros(5, dtype=np.int64))
    with pytest.raises(PartitionError, match=r"num_parts=2"):
        quality_report(tiny_graph, np.full(tiny_graph.num_nodes, 3), num_parts=2)


def test_write_report_json_round_trips_and_png_is_written(four_parts: PartitionSet, messy_graph: Graph,
                                                          tmp_path: Path) -> None:
    main = quality_report(messy_graph, four_parts.assignment(), fanouts=[4, 2], method="metis",
                          steps=four_parts.meta.steps, partition_path=four_parts.path)
    rnd = quality_report(messy_graph, assign_parts(messy_graph, PartitionConfig(parts=4, method="random")),
                         method="random")
    out = write_report(main, tmp_path / "run", compare=[rnd])
    body = json.loads(out["json"].read_text())
    assert [c["method"] for c in body.pop("compare")] == ["random"]
    assert PartitionReport.model_validate(body) == main
    assert out["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_printed_tables_show_the_numbers(four_parts: PartitionSet, messy_graph: Graph) -> None:
    r = quality_report(messy_graph, four_parts.assignment(), fanouts=[4, 2], method="metis",
                       steps=four_parts.meta.steps)
    buf = io.StringIO()
    r.print(Console(file=buf, width=160))
    text = buf.getvalue()
    assert f"{r.edge_cut} ({100 * r.edge_cut_fraction:.1f}%)" in text
    assert f"{r.imbalance['train']:.3f}" in text and "symmetrize" in text
    assert str(r.parts[3].halo) in text

"""Link-prediction edge splits: OGB link folders, LightGCN files, seeded random splits,
the SNAP edge lists through the CSV path, and the guarantee that the message-passing
graph never holds a validation or test edge."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from gnntrain.config import ConfigError, load_config, parse_dataset
from gnntrain.data import load_dataset
from gnntrain.data.errors import DataError
from gnntrain.data.link import (
    EdgeSplit,
    load_lightgcn,
    load_ogbl,
    load_pt,
    message_passing_graph,
    random_edge_split,
)
from partition.graph import Graph
from tests.conftest import make_graph, real_path
from tests.data.conftest import write_text


def graph_pairs(g: Graph) -> set[tuple[int, int]]:
    src, dst = g.edge_index()
    return set(zip(src.tolist(), dst.tolist(), strict=True))


def assert_no_eval_edge_in_graph(split: EdgeSplit, g: Graph) -> None:
    """Neither direction of any validation/test positive is a message-passing edge; every
    training edge (both directions) is one."""
    edges = graph_pairs(g)
    for name in ("val", "test"):
        for u, v in split.pos(name).tolist():
            assert (u, v) not in edges and (v, u) not in edges, (name, u, v)
    for u, v in split.train.tolist()[:5000]:
        if u != v:
            assert (u, v) in edges and (v, u) in edges


def save_legacy(path: Path, obj: object) -> None:
    """OGB's files are torch-saved in the legacy (non-zip) format; write the same."""
    torch.save(obj, path, _use_new_zipfile_serialization=False)


def ogbl_folder(root: Path, n: int = 30, seed: int = 0) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(seed)
    e = np.unique(np.sort(rng.integers(0, n, size=(120, 2)), axis=1), axis=0)
    e = e[e[:, 0] != e[:, 1]]
    tr, va, te = e[:80], e[80:90], e[90:]
    write_text(root / "raw" / "edge.csv.gz", "".join(f"{u},{v}\n" for u, v in tr))
    write_text(root / "raw" / "num-node-list.csv.gz", f"{n}\n")
    sp = root / "split" / "target"
    sp.mkdir(parents=True)
    save_legacy(sp / "train.pt", {"edge": tr})
    save_legacy(sp / "valid.pt", {"edge": va, "edge_neg": rng.integers(0, n, size=(7, 2))})
    save_legacy(sp / "test.pt", {"edge": te, "edge_neg": rng.integers(0, n, size=(9, 2))})
    return root, e


# --- (a) OGB link layout --------------------------------------------------------------------

def test_ogbl_folder_loads_and_graph_holds_train_edges_only(tmp_path: Path) -> None:
    root, _ = ogbl_folder(tmp_path / "ogbl_toy")
    split = load_ogbl(root, "target")
    assert split.num_nodes == 30 and split.val_neg.shape == (7, 2) and split.test_neg.shape == (9, 2)
    g = load_dataset(parse_dataset({"name": "toy", "source": "ogbl", "path": str(root)}))
    assert_no_eval_edge_in_graph(split, g)
    assert g.num_edges == 2 * split.train.shape[0]


class _RunsCode:
    """A pickle of this object calls os.system when loaded (what a full unpickle would do)."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("touch SHOULD_NOT_EXIST",))


def test_malicious_pickle_is_refused_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "valid.pt"
    with bad.open("wb") as f:
        pickle.dump({"edge": _RunsCode()}, f)
    save_legacy(tmp_path / "evil_legacy.pt", {"edge": _RunsCode()})
    for path in (bad, tmp_path / "evil_legacy.pt"):
        with pytest.raises(DataError, match="refused to load.*posix.system|refused to load"):
            load_pt(path)
    assert not (tmp_path / "SHOULD_NOT_EXIST").exists()
    # the same file IS code: a full unpickle runs it (so the refusal above is what saved us)
    with bad.open("rb") as f:
        pickle.load(f)  # noqa: S301 - deliberate, to show the file is really malicious
    assert (tmp_path / "SHOULD_NOT_EXIST").exists()


def test_ogbl_bad_input(tmp_path: Path) -> None:
    root, _ = ogbl_folder(tmp_path / "o")
    with pytest.raises(DataError, match=r"split='nope'.*allowed: \['target'\]"):
        load_ogbl(root, "nope")
    save_legacy(root / "split" / "target" / "valid.pt",
                {"edge": np.array([[0, 99]]), "edge_neg": np.array([[0, 1]])})
    with pytest.raises(DataError, match=r"val edge endpoint 99 is outside \[0, num_nodes=30\)"):
        load_ogbl(root, "target")
    root2, e = ogbl_folder(tmp_path / "o2")
    save_legacy(root2 / "split" / "target" / "test.pt", {"edge": e[:3], "edge_neg": e[:3]})
    with pytest.raises(DataError, match="test edge .* is also a training"):
        load_ogbl(root2, "target")


def test_real_ogbl_ddi(data_root: Path) -> None:
    root = real_path(data_root, "link", "ogbl_ddi")
    split = load_ogbl(root, "target")
    assert split.num_nodes == 4267
    assert split.train.shape == (1067911, 2)
    assert split.val.shape == (133489, 2) and split.val_neg.shape == (101882, 2)
    assert split.test.shape == (133489, 2) and split.test_neg.shape == (95599, 2)
    g = message_passing_graph(split, "ddi")
    keys = g.indices + g.num_nodes * np.repeat(np.arange(g.num_nodes), g.in_degrees())
    for name in ("val", "test"):
        u, v = split.pos(name).T
        assert not np.isin(v * g.num_nodes + u, keys).any()
        assert not np.isin(u * g.num_nodes + v, keys).any()


# --- (b) seeded random split ----------------------------------------------------------------

def test_random_split_is_seeded_disjoint_and_keeps_every_node_trained() -> None:
    g = make_graph(300, avg_degree=4, seed=3)
    a = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7)
    b = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7)
    c = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=8)
    assert np.array_equal(a.val, b.val) and np.array_equal(a.test_neg, b.test_neg)
    assert not np.array_equal(a.val, c.val)
    total = a.train.shape[0] + a.val.shape[0] + a.test.shape[0]
    assert total == g.num_edges // 2  # each undirected edge exactly once
    assert abs(a.test.shape[0] - 0.2 * total) <= 1
    # no node that had an edge lost all its training edges
    had = np.flatnonzero(g.in_degrees() > 0)
    trained = np.unique(a.train)
    assert np.isin(had, trained).all()
    mp = message_passing_graph(a, "t")
    assert_no_eval_edge_in_graph(a, mp)
    # negatives are non-edges
    edges = graph_pairs(g)
    for u, v in a.val_neg.tolist():
        assert (u, v) not in edges and u != v


def test_random_split_can_isolate_nodes_when_asked() -> None:
    """keep_train_per_node=False: a plain random split, which strands some nodes here (so
    the default's guarantee above is not vacuous)."""
    g = make_graph(300, avg_degree=2, seed=3)
    s = random_edge_split(g, val_frac=0.3, test_frac=0.3, seed=0, keep_train_per_node=False)
    had = np.flatnonzero(g.in_degrees() > 0)
    assert not np.isin(had, np.unique(s.train)).all()


def test_random_split_bad_fractions() -> None:
    g = make_graph(50)
    with pytest.raises(DataError, match=r"val_frac=0.6, test_frac=0.5: .*sum below 1"):
        random_edge_split(g, val_frac=0.6, test_frac=0.5, seed=0)


# --- (c) LightGCN user-item files -----------------------------------------------------------

def test_lightgcn_bipartite_items_after_users(tmp_path: Path) -> None:
    write_text(tmp_path / "train.txt", "0 0 1 2\n1 2 3\n2 0 4\n")
    write_text(tmp_path / "valid.txt", "0 3\n1 4\n")
    write_text(tmp_path / "test.txt", "2 1\n0 0\n")  # (0, 0) is a training pair: dropped
    s = load_lightgcn(tmp_path, num_negatives=2, seed=0)
    n_users = 3
    assert s.num_nodes == 3 + 5 and s.dst_range == (n_users, 8)
    assert {tuple(r) for r in s.train.tolist()} == {(0, 3), (0, 4), (0, 5), (1, 5), (1, 6), (2, 3), (2, 7)}
    assert s.test.tolist() == [[2, 4]]
    assert ((s.val_neg[:, 1] >= n_users) & (s.val_neg[:, 0] < n_users)).all()
    assert_no_eval_edge_in_graph(s, message_passing_graph(s, "cf"))


def test_real_lightgcn_lastfm(data_root: Path) -> None:
    root = real_path(data_root, "link", "cf", "lastfm")
    s = load_lightgcn(root)
    assert s.train.shape[0] == 64315 and s.dst_range == (1885, 1885 + 17388)
    assert_no_eval_edge_in_graph(s, message_passing_graph(s, "lastfm"))


# --- SNAP edge lists through the CSV path ---------------------------------------------------

@pytest.mark.parametrize(("name", "header", "nodes", "edges"), [
    ("ca-GrQc", True, 4158, 13422), ("ca-HepPh", False, 11203, 117618),
    ("ca-CondMat", False, 21363, 91286)])
def test_snap_lists_load_through_csv(name: str, header: bool, nodes: int, edges: int,
                                     data_root: Path) -> None:
    """ca-GrQc: a numeric 'nodes edges' header line and a weight column; the others a '{}'
    third column and a first edge the header detection would swallow; sparse ids."""
    path = real_path(data_root, "link", "snap", f"{name}.txt")
    g = load_dataset(parse_dataset({"name": name, "source": "csv", "path": str(path),
                                    "relabel": True, "self_loops": "remove", "header": header}))
    assert (g.num_nodes, g.num_edges // 2) == (nodes, edges)


def test_csv_extra_columns_and_forced_header(tmp_path: Path) -> None:
    f = write_text(tmp_path / "e.txt", "3 2\n0 1 {}\n1 2 {}\n")
    g = load_dataset(parse_dataset({"name": "t", "source": "csv", "path": str(f), "header": True}))
    assert graph_pairs(g) == {(0, 1), (1, 0), (1, 2), (2, 1)}
    # without header: true the numeric first line is an edge 3 -> 2
    g2 = load_dataset(parse_dataset({"name": "t", "source": "csv", "path": str(f), "header": False}))
    assert (3, 2) in graph_pairs(g2)


# --- config -------------------------------------------------------------------------------

def test_link_config_bad_input() -> None:
    base = {"dataset": {"name": "d", "source": "ogbl", "path": "link/ogbl_ddi"},
            "task": {"kind": "link"}}
    cfg = load_config(raw=base)
    assert cfg.task.kind == "link" and cfg.dataset.source == "ogbl"
    with pytest.raises(ConfigError, match="eval_negatives"):
        load_config(raw={**base, "dataset": {"name": "d", "source": "lightgcn", "path": "x",
                                             "eval_negatives": 0}})
    with pytest.raises(ConfigError, match="task.kind.*'lnk'.*link"):
        load_config(raw={**base, "task": {"kind": "lnk"}})


def _old_keep_one_split(ei: np.ndarray, order: np.ndarray, n: int, n_val: int,
                        n_test: int) -> np.ndarray:
    """The per-edge Python scan the numpy version replaced (the reference)."""
    held = np.zeros(ei.shape[0], dtype=np.int8)
    deg = np.bincount(ei.ravel(), minlength=n)
    cand = order
    for label, count in ((1, n_val), (2, n_test)):
        taken: list[int] = []
        for i in cand:
            if len(taken) == count:
                break
            u, v = ei[i]
            if deg[u] > 1 and deg[v] > 1:
                deg[u] -= 1
                deg[v] -= 1
                taken.append(int(i))
        held[taken] = label
        cand = cand[held[cand] == 0]
    return held


@pytest.mark.parametrize("block", [3, 64, 8192])
@pytest.mark.parametrize("seed", [0, 1])
def test_keep_train_per_node_scan_equals_the_per_edge_loop(seed: int, block: int) -> None:
    from gnntrain.data.link import _take_keeping_one

    g = make_graph(300, avg_degree=4, seed=seed)  # sparse: many nodes near their last edge
    ei = g.edge_index().T
    ei = np.unique(np.sort(ei[ei[:, 0] != ei[:, 1]], axis=1), axis=0)
    n = g.num_nodes
    order = np.random.default_rng(seed).permutation(ei.shape[0])
    n_val, n_test = ei.shape[0] // 3, ei.shape[0] // 2  # more than the rule allows
    want = _old_keep_one_split(ei, order, n, n_val, n_test)
    held = np.zeros(ei.shape[0], dtype=np.int8)
    spare = np.bincount(ei.ravel(), minlength=n) - 1
    cand = order
    for label, count in ((1, n_val), (2, n_test)):
        held[_take_keeping_one(ei, cand, spare, count, block=block)] = label
        cand = cand[held[cand] == 0]
    np.testing.assert_array_equal(held, want)
    assert (want == 2).sum() < n_test  # the constraint bit: not every wish was granted
    split = random_edge_split(g, val_frac=0.2, test_frac=0.3, seed=seed)
    assert split.train.shape[0] > 0


def test_random_split_negatives_shared_set_or_per_positive() -> None:
    """``shared_negatives`` = N: one set of N random non-edges, sources uniform over the
    nodes, not the positives'; ``per_positive`` = K: each positive's own K from its source.
    The default (one per positive, shared) is unchanged, and both kinds are never edges."""
    g = make_graph(300, avg_degree=4, seed=3)
    base = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7)
    shared = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7, shared_negatives=500)
    per = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7, per_positive=6)
    for s in (shared, per):  # the positives do not depend on how negatives are drawn
        np.testing.assert_array_equal(s.val, base.val)
        np.testing.assert_array_equal(s.test, base.test)
    assert base.neg_per_pos == 0 and base.val_neg.shape[0] == base.val.shape[0]
    assert shared.neg_per_pos == 0 and shared.val_neg.shape == shared.test_neg.shape == (500, 2)
    assert np.unique(shared.test_neg[:, 0]).size > np.unique(shared.test[:, 0]).size  # uniform sources
    assert per.neg_per_pos == 6 and per.test_neg.shape[0] == 6 * per.test.shape[0]
    np.testing.assert_array_equal(per.test_neg[:, 0], np.repeat(per.test[:, 0], 6))
    edges = graph_pairs(g)
    for s in (shared, per):
        for u, v in np.concatenate([s.val_neg, s.test_neg]).tolist():
            assert (u, v) not in edges and u != v
    with pytest.raises(DataError, match="either one shared set or each positive's own"):
        random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7, shared_negatives=5, per_positive=2)


def _common_neighbours(train: np.ndarray, n: int, pairs: np.ndarray) -> np.ndarray:
    adj = np.zeros((n, n), dtype=np.int64)
    adj[train[:, 0], train[:, 1]] = adj[train[:, 1], train[:, 0]] = 1
    return np.asarray((adj @ adj)[pairs[:, 0], pairs[:, 1]])


def test_common_neighbour_negatives_are_the_hardest_non_edges_of_each_source() -> None:
    """HeaRT-style negatives: each positive's K are non-edges from its source, as many common
    neighbours in the training edges as any other non-edge of that source can have (checked
    against a dense count), more than uniform ones on average, the same for the same seed; the
    option needs per-positive negatives."""
    g = make_graph(300, avg_degree=6, seed=3)
    hard = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7, per_positive=5,
                             common_neighbour_negatives=True)
    uniform = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7, per_positive=5)
    np.testing.assert_array_equal(hard.test, uniform.test)
    assert hard.neg_per_pos == 5
    np.testing.assert_array_equal(hard.test_neg[:, 0], np.repeat(hard.test[:, 0], 5))
    edges = graph_pairs(g)
    for u, v in np.concatenate([hard.val_neg, hard.test_neg]).tolist():
        assert (u, v) not in edges and u != v
    n = g.num_nodes
    cn = _common_neighbours(hard.train, n, hard.test_neg).reshape(-1, 5)
    everyone = np.stack([np.repeat(np.arange(n), n), np.tile(np.arange(n), n)], axis=1)
    all_cn = _common_neighbours(hard.train, n, everyone).reshape(n, n)
    for i, s in enumerate(hard.test[:, 0].tolist()):
        allowed = np.array([w != s and (s, w) not in edges for w in range(n)])
        best = np.sort(all_cn[s][allowed])[::-1][:5]
        np.testing.assert_array_equal(np.sort(cn[i])[::-1], best)
    assert cn.mean() > 2 * _common_neighbours(uniform.train, n, uniform.test_neg).mean()
    again = random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7, per_positive=5,
                              common_neighbour_negatives=True)
    np.testing.assert_array_equal(again.test_neg, hard.test_neg)
    with pytest.raises(DataError, match="each positive's own negatives"):
        random_edge_split(g, val_frac=0.1, test_frac=0.2, seed=7, common_neighbour_negatives=True)


def test_common_neighbour_negatives_are_configured_per_source_only() -> None:
    from gnntrain.tasks.link_options import LinkOptions

    opts = LinkOptions.parse({"ranking": "per_source", "eval_negatives": 20,
                              "eval_negatives_from": "common_neighbours"})
    assert opts.random_split().common_neighbour_negatives and opts.random_split().per_positive == 20
    with pytest.raises(ValueError, match="eval_negatives_from=common_neighbours: .*ranking: per_source"):
        LinkOptions.parse({"eval_negatives_from": "common_neighbours", "eval_negatives": 20})
    with pytest.raises(ValueError, match=r"eval_negatives_from='heart': expected one of \['uniform', "
                                         r"'common_neighbours'\]"):
        LinkOptions.parse({"eval_negatives_from": "heart"})

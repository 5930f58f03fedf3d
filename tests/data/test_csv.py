"""Edge-list CSV source: real SNAP / MUSAE / karateclub files and small written fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gnntrain.data import GraphSummary, csr_from_edges, load_dataset
from tests.data.conftest import dataset, write_text


def test_ca_hepph_structure_only(data_root: Path) -> None:
    g = load_dataset(dataset(source="csv", edges="snap/ca-HepPh/CA-HepPh.txt"))
    s = GraphSummary.of(g)
    # SOURCES.md: 12,008 nodes; 237,010 rows = both directions of 118,489 edges + 32 loops
    assert (s.nodes, s.edges, s.self_loops, s.symmetric) == (12008, 237010, 32, True)
    assert s.classes == 1 and s.features == 5  # structure only: one class, degree features
    g2 = load_dataset(dataset(source="csv", edges="snap/ca-HepPh/CA-HepPh.txt",
                              self_loops="remove"))
    assert g2.num_edges == 2 * 118_489


def test_email_eu_core_with_department_labels(data_root: Path) -> None:
    g = load_dataset(dataset(source="csv", edges="snap/email-Eu-core/email-Eu-core.txt",
                             labels="snap/email-Eu-core/email-Eu-core-department-labels.txt",
                             self_loops="remove"))
    assert (g.num_nodes, g.num_classes, g.num_edges) == (1005, 42, 2 * 16064)
    lab = np.loadtxt(data_root / "snap/email-Eu-core/email-Eu-core-department-labels.txt",
                     dtype=np.int64)
    np.testing.assert_array_equal(g.y[lab[:, 0]], lab[:, 1])
    directed = load_dataset(dataset(source="csv", undirected=False,
                                    edges="snap/email-Eu-core/email-Eu-core.txt"))
    assert directed.num_edges == 25571  # directed pairs, as SOURCES.md counts them


def test_twitch_de_json_features_and_string_labels(data_root: Path) -> None:
    g = load_dataset(dataset(source="csv", edges="musae/edges/DE_edges.csv",
                             labels="musae/target/DE_target.csv",
                             features="musae/features/DE.json",
                             id_column="new_id", label_column="mature"))
    assert (g.num_nodes, g.num_edges, g.num_classes) == (9498, 2 * 153138, 2)
    assert np.bincount(g.y).tolist() == [3756, 5742]  # False, True in sorted order
    bags = json.loads((data_root / "musae/features/DE.json").read_text())
    for node in ("0", "17", "9497"):
        np.testing.assert_array_equal(np.flatnonzero(g.x[int(node)]), sorted(set(bags[node])))
    assert g.num_features <= 3170


def test_twitch_fr_duplicate_target_rows_agree(data_root: Path) -> None:
    g = load_dataset(dataset(source="csv", edges="musae/edges/FR_edges.csv",
                             labels="musae/target/FR_target.csv",
                             id_column="new_id", label_column="mature"))
    # SOURCES.md counts rows (2,416 True in 6,551 rows); the two repeated rows are True
    assert g.num_nodes == 6549 and np.bincount(g.y).tolist() == [4135, 2414]


def test_github_labels_and_random_projection_fallback(data_root: Path) -> None:
    g = load_dataset(dataset(source="csv", edges="musae/edges/git_edges.csv",
                             labels="musae/target/git_target.csv",
                             feature_fallback="random_projection", fallback_dim=16))
    assert (g.num_nodes, g.num_edges, g.num_features) == (37700, 2 * 289003, 16)
    assert np.bincount(g.y).tolist() == [27961, 9739]


@pytest.mark.parametrize("name,nodes,edges,classes", [("deezer", 28281, 92752, 2),
                                                       ("lastfm", 7624, 27806, 18)])
def test_karateclub(data_root: Path, name: str, nodes: int, edges: int, classes: int) -> None:
    g = load_dataset(dataset(source="csv", edges=f"karateclub/{name}/edges.csv",
                             labels=f"karateclub/{name}/target.csv"))
    assert (g.num_nodes, g.num_edges, g.num_classes) == (nodes, 2 * edges, classes)


def test_edge_list_with_dense_features_and_positional_labels(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 30
    e = rng.integers(0, n, (100, 2))
    x = rng.normal(size=(n, 4))
    y = rng.integers(0, 3, n)
    write_text(tmp_path / "e.tsv", "src\tdst\n" + "".join(f"{a}\t{b}\n" for a, b in e))
    write_text(tmp_path / "x.csv.gz", "".join(",".join(repr(float(v)) for v in r) + "\n" for r in x))
    write_text(tmp_path / "y.txt", "".join(f"{v}\n" for v in y))
    g = load_dataset(dataset(source="csv", edges=str(tmp_path / "e.tsv"),
                             features=str(tmp_path / "x.csv.gz"), labels=str(tmp_path / "y.txt"),
                             undirected=False, dedup=False))
    indptr, indices = csr_from_edges(e[:, 0], e[:, 1], n, dedup=False)
    np.testing.assert_array_equal(g.indptr, indptr)
    np.testing.assert_array_equal(g.indices, indices)
    np.testing.assert_array_equal(g.x, x.astype(np.float32))
    np.testing.assert_array_equal(g.y, y)


def test_sparse_triplet_features_and_npy(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "0,1\n1,2\n")
    write_text(tmp_path / "f.csv", "node_id,feature_id,value\n2,3,1.5\n0,0,1\n")
    g = load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"),
                             features=str(tmp_path / "f.csv")))
    np.testing.assert_array_equal(g.x, [[1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1.5]])
    np.save(tmp_path / "x.npy", np.eye(3))
    g = load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"),
                             features=str(tmp_path / "x.npy")))
    np.testing.assert_array_equal(g.x, np.eye(3, dtype=np.float32))


def test_relabel_maps_arbitrary_ids_consistently(tmp_path: Path) -> None:
    write_text(tmp_path / "e.txt", "# raw SNAP ids\n1000 70\n70 5\n5 1000\n")
    write_text(tmp_path / "l.csv", "node,label\n5,0\n70,1\n1000,2\n")
    g = load_dataset(dataset(source="csv", edges=str(tmp_path / "e.txt"),
                             labels=str(tmp_path / "l.csv"), relabel=True, undirected=False))
    # ids 5, 70, 1000 become 0, 1, 2 in increasing order; labels follow their nodes
    assert g.num_nodes == 3
    np.testing.assert_array_equal(g.y, [0, 1, 2])
    src, dst = g.edge_index()
    assert sorted(zip(src.tolist(), dst.tolist(), strict=True)) == [(0, 2), (1, 0), (2, 1)]


def test_unlabeled_nodes_stay_out_of_random_splits(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "".join(f"{i},{i + 1}\n" for i in range(19)))
    write_text(tmp_path / "l.csv", "id,target\n" + "".join(f"{i},{i % 2}\n" for i in range(0, 20, 2)))
    g = load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"),
                             labels=str(tmp_path / "l.csv"), train_frac=0.5, val_frac=0.3))
    used = np.concatenate([g.train_idx, g.val_idx, g.test_idx])
    np.testing.assert_array_equal(np.sort(used), np.arange(0, 20, 2))
    assert (g.train_idx.size, g.val_idx.size, g.test_idx.size) == (5, 3, 2)

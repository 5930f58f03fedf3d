"""Typed-graph loaders: the HeCo/HGCMA directory layout (real data, counts from the
dataset sources), OGB-MAG's layout (a fixture written here) and the config kinds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gnntrain.config import ConfigError, load_config, parse_dataset
from gnntrain.data.errors import DataError
from gnntrain.data.hetero import load_hetero
from tests.conftest import real_path
from tests.data.conftest import rows, write_text

DATASETS = Path(__file__).resolve().parents[2] / "datasets"

# (config, node counts, relation rows, target, classes, train size) from the dataset sources
PUBLISHED = {
    "acm": ({"paper": 4019, "author": 7167, "subject": 60}, {"written_by": 13407, "has_subject": 4019},
            "paper", 3, 60),
    "dblp": ({"author": 4057, "paper": 14328, "conference": 20, "term": 7723},
             {"written_by": 19645, "published_in": 14328, "has_term": 85810}, "author", 4, 80),
    "aminer": ({"paper": 6564, "author": 13329, "reference": 35890},
               {"written_by": 18007, "cites": 58831}, "paper", 4, 80),
    "freebase": ({"movie": 3492, "actor": 33401, "director": 2502, "writer": 4459},
                 {"has_actor": 65341, "directed_by": 3762, "written_by": 6414}, "movie", 3, 60),
    "hgcma-acm": ({"paper": 3025, "author": 5912, "subject": 57},
                  {"written_by": 9936, "has_subject": 3025}, "paper", 3, 30),
    "hgcma-dblp": ({"author": 4057, "paper": 14328, "conference": 20},
                   {"written_by": 19645, "published_in": 14328}, "author", 4, 40),
    "hgcma-imdb": ({"movie": 4661, "actor": 5841, "director": 2270},
                   {"has_actor": 13983, "directed_by": 4661}, "movie", 3, 29),
}
FEATURED = {"acm": {"paper": 1902, "author": 1902}, "dblp": {"author": 334, "paper": 4231, "term": 50},
            # no type has features: the configs' feature_fallback gives each 5 log-degree columns
            "aminer": dict.fromkeys(("paper", "author", "reference"), 5),
            "freebase": dict.fromkeys(("movie", "actor", "director", "writer"), 5), "hgcma-imdb": {"movie": 1256, "actor": 1256, "director": 1256}}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shipped_mapping_loads_the_published_counts(name: str, data_root: Path) -> None:
    cfg = load_config(DATASETS / f"{name}.yaml").dataset
    real_path(data_root, cfg.path)  # type: ignore[union-attr]
    counts, rels, target, classes, train = PUBLISHED[name]
    g = load_hetero(cfg)
    assert g.num_nodes == counts
    assert g.target == target and g.num_classes == classes and g.train_idx.size == train
    for (s, r, d), csr in g.relations.items():
        assert csr.num_edges == rels[r.removeprefix("rev_")]
        if r.startswith("rev_"):
            assert (d, r.removeprefix("rev_"), s) in g.relations
    if name in FEATURED:
        assert {t: a.shape[1] for t, a in g.x.items()} == FEATURED[name]


def write_dir(root: Path, *, pa: np.ndarray, labels: np.ndarray, sparse_feat: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_text(root / "pa.txt", rows(pa, "\t"))
    feat = np.arange(12, dtype=np.float64).reshape(4, 3)
    if sparse_feat:
        sp.save_npz(root / "p_feat.npz", sp.csr_matrix(feat))
    else:
        np.save(root / "p_feat.npy", feat)
        (root / "p_feat.npy").rename(root / "p_feat.npz")  # DBLP's t_feat.npz is a plain .npy
    np.save(root / "labels.npy", labels)
    for name, ids in (("train", [0, 1]), ("val", [2]), ("test", [3])):
        np.save(root / f"{name}_x.npy", np.array(ids))
    return root


def dir_cfg(path: Path, **over: object) -> dict:
    raw = {"name": "mine", "source": "hetero_dir", "path": str(path), "types": {"p": "paper", "a": "author"},
           "relations": {"pa": "written_by"}, "target": "paper", "split": "x"}
    raw.update(over)
    return raw


@pytest.mark.parametrize("sparse_feat", [True, False])
def test_users_directory_loads_without_code(tmp_path: Path, sparse_feat: bool) -> None:
    pa = np.array([[0, 0], [1, 0], [1, 2], [3, 4]])
    path = write_dir(tmp_path / "d", pa=pa, labels=np.array([0.0, 1.0, 1.0, 0.0]), sparse_feat=sparse_feat)
    g = load_hetero(parse_dataset(dir_cfg(path, add_reverse=True)))
    assert g.num_nodes == {"paper": 4, "author": 5}  # author count from the largest id + 1
    np.testing.assert_array_equal(g.x["paper"], np.arange(12, dtype=np.float32).reshape(4, 3))
    src, dst = g.relations[("paper", "written_by", "author")].edges()
    assert sorted(zip(src.tolist(), dst.tolist(), strict=True)) == sorted(map(tuple, pa.tolist()))
    assert ("author", "rev_written_by", "paper") in g.relations
    assert g.y.tolist() == [0, 1, 1, 0]


def test_directory_errors_name_the_field(tmp_path: Path) -> None:
    path = write_dir(tmp_path / "d", pa=np.array([[0, 0], [4, 1]]), labels=np.array([0, 1, 0, 1]))
    with pytest.raises(DataError, match=r"source id 4 is outside \[0, num_nodes\['paper'\]=4\)"):
        load_hetero(parse_dataset(dir_cfg(path, counts={"p": 4})))
    with pytest.raises(DataError, match=r"split 'train' \(split='y'\).*does not exist"):
        load_hetero(parse_dataset(dir_cfg(path, split="y")))
    with pytest.raises(ConfigError, match=r"file stem 'pv' must be two type letters from \['a', 'p'\]"):
        parse_dataset(dir_cfg(path, relations={"pv": "at"}))
    with pytest.raises(ConfigError, match=r"target='venue': not one of the types"):
        parse_dataset(dir_cfg(path, target="venue"))


# ---- OGB-MAG layout -------------------------------------------------------------------------
class MagFixture:
    """A tiny folder in OGB-MAG's layout with known arrays."""

    counts = {"author": 6, "field_of_study": 3, "institution": 2, "paper": 8}

    def __init__(self, root: Path) -> None:
        rng = np.random.default_rng(0)
        self.root = root
        self.edges = {
            ("author", "affiliated_with", "institution"): np.stack([np.arange(6), rng.integers(0, 2, 6)], 1),
            ("author", "writes", "paper"): np.stack([rng.integers(0, 6, 15), rng.integers(0, 8, 15)], 1),
            ("paper", "cites", "paper"): np.array([[0, 1], [1, 2], [2, 0], [7, 3]]),
            ("paper", "has_topic", "field_of_study"): np.stack([np.arange(8), rng.integers(0, 3, 8)], 1),
        }
        self.x = rng.normal(size=(8, 4)).astype(np.float32)
        self.y = np.array([0, 1, 2, 0, 1, 2, 0, 1])

    def write(self) -> Path:
        raw = self.root / "raw"
        names = list(self.counts)
        write_text(raw / "num-node-dict.csv.gz", ",".join(names) + "\n"
                   + ",".join(str(self.counts[n]) for n in names) + "\n")
        for (s, r, d), e in self.edges.items():
            write_text(raw / "relations" / f"{s}___{r}___{d}" / "edge.csv.gz", rows(e))
        write_text(raw / "node-feat" / "paper" / "node-feat.csv.gz", rows(self.x))
        write_text(raw / "node-label" / "paper" / "node-label.csv.gz", rows(self.y))
        for name, ids in (("train", [0, 1, 2, 3]), ("valid", [4, 5]), ("test", [6, 7])):
            write_text(self.root / "split" / "time" / "paper" / f"{name}.csv.gz", rows(np.array(ids)))
        return self.root


def test_ogb_mag_layout_loads_every_relation(tmp_path: Path) -> None:
    fx = MagFixture(tmp_path / "mag")
    fx.write()
    g = load_hetero(parse_dataset({"name": "mag", "source": "ogb_mag", "path": str(fx.root)}))
    assert g.num_nodes == fx.counts
    for et, e in fx.edges.items():
        src, dst = g.relations[et].edges()
        assert set(zip(src.tolist(), dst.tolist(), strict=True)) == set(map(tuple, e.tolist()))
    np.testing.assert_allclose(g.x["paper"], fx.x, rtol=1e-6)
    assert set(g.x) == {"paper"} and g.y.tolist() == fx.y.tolist()
    assert g.val_idx.tolist() == [4, 5]


def test_ogb_mag_errors_name_the_field(tmp_path: Path) -> None:
    fx = MagFixture(tmp_path / "mag")
    fx.write()
    with pytest.raises(DataError, match=r"split='year': no folder .*splits here: \['time'\]"):
        load_hetero(parse_dataset({"name": "m", "source": "ogb_mag", "path": str(fx.root), "split": "year"}))
    with pytest.raises(DataError, match=r"target='author': .* has splits for \['paper'\] only"):
        load_hetero(parse_dataset({"name": "m", "source": "ogb_mag", "path": str(fx.root),
                                   "target": "author"}))
    write_text(fx.root / "raw" / "relations" / "author___writes___paper" / "edge.csv.gz", "0,8\n")
    with pytest.raises(DataError, match=r"relation \('author', 'writes', 'paper'\): destination id 8"):
        load_hetero(parse_dataset({"name": "m", "source": "ogb_mag", "path": str(fx.root)}))


def test_synthetic_hetero_config_kind() -> None:
    cfg = parse_dataset({"name": "s", "source": "synthetic_hetero", "add_reverse": True,
                         "synthetic_hetero": {"papers": 200, "authors": 300, "institutions": 5,
                                              "fields": 20}})
    g = load_hetero(cfg)
    assert g.total_nodes == 525 and ("paper", "rev_writes", "author") in g.relations
    with pytest.raises(ConfigError, match=r"dataset\.synthetic_hetero\.paper: unknown key"):
        parse_dataset({"name": "s", "source": "synthetic_hetero", "synthetic_hetero": {"paper": 3}})


def test_load_dataset_gives_the_training_graph_of_a_typed_source() -> None:
    """``load_dataset`` (what training reads) makes a typed source one graph with its node
    types as id ranges (:func:`gnntrain.data.hetero.to_training_graph`)."""
    from gnntrain.data import load_dataset
    from gnntrain.data.hetero import load_hetero

    cfg = parse_dataset({"name": "s", "source": "synthetic_hetero",
                         "synthetic_hetero": {"papers": 200, "authors": 300}})
    g, hg = load_dataset(cfg), load_hetero(cfg)
    assert g.node_type_names == tuple(hg.node_types)
    assert g.num_nodes == hg.total_nodes and g.num_edges == hg.total_edges


def test_real_acm_round_trips_through_pyg(data_root: Path) -> None:
    from gnntrain.data.hetero import from_pyg_hetero, to_pyg_hetero

    cfg = load_config(DATASETS / "hgcma-acm.yaml").dataset
    real_path(data_root, cfg.path)  # type: ignore[union-attr]
    g = load_hetero(cfg)
    back = from_pyg_hetero(to_pyg_hetero(g), target=g.target, name=g.name, num_classes=g.num_classes)
    assert back.content_hash() == g.content_hash()


@pytest.mark.parametrize("kind", ["degree", "random_projection"])
def test_featureless_types_get_structural_features(tmp_path: Path, kind: str) -> None:
    """``feature_fallback`` gives every type without features its rows of the fallback
    matrix over all relations together; a type with features keeps its own."""
    from gnntrain.data.features import fallback_features

    pa = np.array([[0, 0], [1, 0], [1, 2], [3, 4], [2, 3]])
    path = write_dir(tmp_path / "d", pa=pa, labels=np.array([0, 1, 1, 0]))
    plain = load_hetero(parse_dataset(dir_cfg(path, add_reverse=True)))
    assert set(plain.x) == {"paper"}
    g = load_hetero(parse_dataset(dir_cfg(path, add_reverse=True, feature_fallback=kind, fallback_dim=6)))
    np.testing.assert_array_equal(g.x["paper"], plain.x["paper"])
    hom = plain.homogenise()  # paper 0-3, author 4-8
    want = fallback_features(hom.indptr, hom.indices, kind, 6)[4:]  # type: ignore[arg-type]
    np.testing.assert_array_equal(g.x["author"], want)
    assert g.x["author"].shape == (5, 5 if kind == "degree" else 6) and np.isfinite(g.x["author"]).all()
    assert np.unique(g.x["author"], axis=0).shape[0] > 1  # rows differ by structure
    again = load_hetero(parse_dataset(dir_cfg(path, add_reverse=True, feature_fallback=kind, fallback_dim=6)))
    assert again.content_hash() == g.content_hash() != plain.content_hash()


def test_feature_fallback_names_what_is_allowed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"dataset\.feature_fallback.*'none', 'degree' or 'random_projection'"):
        parse_dataset(dir_cfg(tmp_path, feature_fallback="onehot"))

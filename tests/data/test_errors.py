"""Bad input fails at load, with a message naming the field or file, the value and the rule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gnntrain.data import DataError, load_dataset
from tests.data.conftest import OgbFixture, dataset, write_text

# --- missing files and folders: the path and the expected layout -----------------------


def test_missing_planetoid_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=rf"{tmp_path}/nowhere does not exist; expected "
                                        r"<path>/<Name>/raw/ind\.<name>\.\{x,tx"):
        load_dataset(dataset(source="planetoid", path=str(tmp_path / "nowhere"),
                             planetoid_name="Cora"))


def test_planetoid_missing_raw_file(planetoid_copy: Path) -> None:
    (planetoid_copy / "Cora" / "raw" / "ind.cora.graph").unlink()
    with pytest.raises(DataError, match=r"Cora/raw lacks ind\.cora\.graph; expected"):
        load_dataset(dataset(source="planetoid", path=str(planetoid_copy), planetoid_name="Cora"))


def test_planetoid_unknown_name_lists_folders(planetoid_copy: Path) -> None:
    with pytest.raises(DataError, match=r"no PubMed/raw folder .*found: \['CiteSeer', 'Cora'\]"):
        load_dataset(dataset(source="planetoid", path=str(planetoid_copy),
                             planetoid_name="PubMed"))


def test_missing_ogb_file_names_layout(ogb_dir: OgbFixture) -> None:
    (ogb_dir.root / "raw" / "node-label.csv.gz").unlink()
    with pytest.raises(DataError, match=r"raw lacks node-label\.csv\.gz; expected "
                                        r"<path>/raw/\{edge,node-feat,node-label\}"):
        load_dataset(dataset(source="ogb", path=str(ogb_dir.root)))


def test_missing_ogb_split_folder(ogb_dir: OgbFixture) -> None:
    with pytest.raises(DataError, match=r"split='sales_ranking': no folder .*splits here: \['time'\]"):
        load_dataset(dataset(source="ogb", path=str(ogb_dir.root), split="sales_ranking"))


def test_relative_path_resolves_against_data_root(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNNTRAIN_DATA", str(tmp_path))
    with pytest.raises(DataError, match=rf"dataset\.edges='snap/e\.txt' resolves to {tmp_path}/snap/"
                                        rf"e\.txt, which does not exist \(\$GNNTRAIN_DATA={tmp_path}\)"):
        load_dataset(dataset(source="csv", edges="snap/e.txt"))
    write_text(tmp_path / "snap" / "e.txt", "0,1\n1,2\n")
    g = load_dataset(dataset(source="csv", edges="snap/e.txt"))
    assert g.num_nodes == 3


def test_missing_csv_labels_fails_before_parsing_edges(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "0,1\nnot,parsed\n")
    with pytest.raises(DataError, match=r"csv labels file: .*lab\.csv does not exist"):
        load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"),
                             labels=str(tmp_path / "lab.csv")))


def test_npz_without_edges_lists_keys(npz_writer: Callable[..., Path]) -> None:
    path = npz_writer(x=np.zeros((3, 2)))
    with pytest.raises(DataError, match=r"no edge_index \[2, E\] or edges \[E, 2\] key "
                                        r"\(found \['x'\]\)"):
        load_dataset(dataset(source="npz", path=str(path)))


def test_heterophilous_missing_keys(npz_writer: Callable[..., Path]) -> None:
    path = npz_writer(edges=np.array([[0, 1]]), node_labels=np.array([0, 1]))
    with pytest.raises(DataError, match=r"missing keys \['node_features', 'train_masks'"):
        load_dataset(dataset(source="heterophilous", path=str(path)))


# --- bad values ----------------------------------------------------------------------------


def _graph_npz(npz_writer: Callable[..., Path], **over: np.ndarray) -> Path:
    arrays: dict[str, np.ndarray] = {
        "edge_index": np.array([[0, 1, 2], [1, 2, 3]]), "x": np.ones((4, 2), np.float32),
        "y": np.array([0, 1, 0, 1]), "train_mask": np.array([1, 1, 0, 0], bool),
        "val_mask": np.array([0, 0, 1, 0], bool), "test_mask": np.array([0, 0, 0, 1], bool)}
    arrays.update(over)
    return npz_writer(**arrays)


def test_edge_id_at_num_nodes(npz_writer: Callable[..., Path]) -> None:
    path = _graph_npz(npz_writer, edge_index=np.array([[0, 1], [1, 4]]))
    with pytest.raises(DataError, match=r"destination id 4 \(edge 1\) is outside "
                                        r"\[0, num_nodes=4\)"):
        load_dataset(dataset(source="npz", path=str(path)))


def test_negative_edge_id_in_csv(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "0,1\n-2,1\n")
    with pytest.raises(DataError, match=r"e\.csv: source id -2 \(edge 1\) is outside "
                                        r"\[0, num_nodes=2\).*relabel"):
        load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv")))


def test_label_at_num_classes(npz_writer: Callable[..., Path]) -> None:
    path = _graph_npz(npz_writer, y=np.array([0, 1, 2, 1]))
    with pytest.raises(DataError, match=r"key 'y'.*node 2 has label 2, outside "
                                        r"\[0, num_classes=2\)"):
        load_dataset(dataset(source="npz", path=str(path), num_classes=2))


def test_negative_label(npz_writer: Callable[..., Path]) -> None:
    path = _graph_npz(npz_writer, y=np.array([0, -3, 0, 1]))
    with pytest.raises(DataError, match=r"node 1 has label -3; labels must be in "
                                        r"\[0, num_classes\), or -1 for an unlabeled node"):
        load_dataset(dataset(source="npz", path=str(path)))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_features(npz_writer: Callable[..., Path], bad: float) -> None:
    x = np.ones((4, 2), np.float32)
    x[2, 1] = bad
    path = _graph_npz(npz_writer, x=x)
    with pytest.raises(DataError, match=rf"key 'x'.*node 2 column 1 is {bad}; features must "
                                        r"be finite"):
        load_dataset(dataset(source="npz", path=str(path)))


def test_nan_in_feature_csv(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "0,1\n")
    write_text(tmp_path / "x.csv", "1.0,2.0\nNaN,0\n")
    with pytest.raises(DataError, match=r"x\.csv: node 1 column 0 is nan"):
        load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"),
                             features=str(tmp_path / "x.csv")))


def test_feature_rows_differ_from_num_nodes(npz_writer: Callable[..., Path]) -> None:
    path = _graph_npz(npz_writer, x=np.ones((3, 2), np.float32), num_nodes=np.int64(4))
    with pytest.raises(DataError, match=r"3 rows but num_nodes=4; there must be exactly one "
                                        r"feature row per node"):
        load_dataset(dataset(source="npz", path=str(path)))


def test_feature_rows_differ_in_csv(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "0,1\n1,2\n")
    np.save(tmp_path / "x.npy", np.ones((2, 3)))
    with pytest.raises(DataError, match=r"x\.npy: 2 rows but num_nodes=3"):
        load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"),
                             features=str(tmp_path / "x.npy")))


def test_empty_training_set(npz_writer: Callable[..., Path]) -> None:
    path = _graph_npz(npz_writer, train_mask=np.zeros(4, bool))
    with pytest.raises(DataError, match=r"train split in .* is empty: at least one training "
                                        r"node is needed"):
        load_dataset(dataset(source="npz", path=str(path)))


def test_empty_training_set_from_random_split(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "0,1\n")
    with pytest.raises(DataError, match=r"train_frac=0\.1 of 2 labeled nodes leaves the "
                                        r"training set empty"):
        load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"), train_frac=0.1))


def test_overlapping_splits(npz_writer: Callable[..., Path]) -> None:
    path = _graph_npz(npz_writer, test_mask=np.array([0, 1, 0, 1], bool))
    with pytest.raises(DataError, match=r"node 1 is in both train and test; train/val/test "
                                        r"must be disjoint"):
        load_dataset(dataset(source="npz", path=str(path)))


def test_split_index_out_of_range(data_root: Path) -> None:
    with pytest.raises(DataError, match=r"split=10: .*tolokers\.npz stores 10 splits, "
                                        r"allowed 0\.\.9"):
        load_dataset(dataset(source="heterophilous", path="heterophilous/tolokers.npz", split=10))


def test_conflicting_duplicate_labels(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "0,1\n")
    write_text(tmp_path / "l.csv", "id,target\n0,1\n1,0\n0,0\n")
    with pytest.raises(DataError, match=r"node 0 is listed with two different labels"):
        load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"),
                             labels=str(tmp_path / "l.csv")))


def test_fractional_label(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "0,1\n")
    write_text(tmp_path / "l.csv", "0\n1.5\n")
    with pytest.raises(DataError, match=r"record 2 has value 1\.5; .* whole numbers"):
        load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"),
                             labels=str(tmp_path / "l.csv")))


def test_relabel_refuses_dense_features(tmp_path: Path) -> None:
    write_text(tmp_path / "e.csv", "10,20\n")
    np.save(tmp_path / "x.npy", np.ones((2, 3)))
    with pytest.raises(DataError, match=r"relabel=true: the dense features in .* matched to "
                                        r"nodes by row"):
        load_dataset(dataset(source="csv", edges=str(tmp_path / "e.csv"),
                             features=str(tmp_path / "x.npy"), relabel=True))

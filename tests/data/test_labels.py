"""Class ids as the model sees them: 0..C-1 whatever a dataset stores, an empty class named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnntrain.data.build import BuildOptions, RawGraph, build_graph
from gnntrain.runtime.coordinator import run_training
from partition.hetero_graph import HeteroGraph
from partition.labels import classes_without, dense_class_ids
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg


def _raw(y: np.ndarray, num_classes: int | None = None) -> RawGraph:
    n = y.shape[0]
    src = np.arange(n - 1)
    return RawGraph(name="labels", num_nodes=n, src=src, dst=src + 1, y=y, num_classes=num_classes,
                    where={"y": "labels.csv"})


def test_one_based_ids_are_remapped_with_a_warning_naming_them() -> None:
    y = np.array([1, 2, 3, 1, 2, 3, -1, 3])
    with pytest.warns(UserWarning, match=r"labels in labels.csv: the 3 class ids present are \[1, 2, 3\], "
                                         r"not 0..2; they are remapped to 0..2"):
        g = build_graph(_raw(y), BuildOptions(split="random"))
    assert g.num_classes == 3  # not a 4-class head with an empty class 0
    np.testing.assert_array_equal(g.y[y >= 0], y[y >= 0] - 1)


def test_gapped_ids_keep_their_order() -> None:
    y = np.array([0, 5, 2, 5, 0, 2])
    with pytest.warns(UserWarning, match=r"\[0, 2, 5\]"):
        ids = dense_class_ids(y, y >= 0, None, "y")
    assert ids.num_classes == 3 and ids.stored is not None and ids.stored.tolist() == [0, 2, 5]
    np.testing.assert_array_equal(ids.y, [0, 2, 1, 2, 0, 1])


def test_dense_ids_or_a_given_class_count_stay_as_stored(recwarn: pytest.WarningsRecorder) -> None:
    y = np.array([0, 1, 2, 1])
    assert dense_class_ids(y, y >= 0, None, "y").num_classes == 3
    gapped = np.array([1, 3])
    kept = dense_class_ids(gapped, gapped >= 0, 5, "y")  # num_classes given: ids as stored
    assert kept.num_classes == 5 and kept.y is gapped
    g = build_graph(_raw(np.array([1, 2, 3, 1]), num_classes=4), BuildOptions(split="random"))
    assert g.num_classes == 4 and g.y.tolist() == [1, 2, 3, 1]
    assert not [w for w in recwarn if issubclass(w.category, UserWarning) and "class ids" in str(w.message)]


def test_typed_target_labels_stored_one_based_are_remapped() -> None:
    with pytest.warns(UserWarning, match=r"target 'paper'.*\[1, 2, 3\]"):
        hg = HeteroGraph.from_edges(num_nodes={"paper": 6, "author": 2},
                                    edges={("author", "writes", "paper"): (np.array([0, 1]), np.array([0, 5]))},
                                    x={"paper": np.ones((6, 2), np.float32)}, target="paper",
                                    y=np.array([1, 2, 3, 1, 2, 3]),
                                    splits={"train": np.arange(3), "val": np.array([3]), "test": np.array([4, 5])})
    assert hg.num_classes == 3 and hg.y.tolist() == [0, 1, 2, 0, 1, 2]


def test_a_class_without_training_nodes_is_reported_before_training(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    g = make_graph(200, num_classes=4, seed=2)
    train = g.train_idx[g.y[g.train_idx] != 3]  # class 3 only in val/test
    g = type(g)(indptr=g.indptr, indices=g.indices, x=g.x, y=g.y, train_idx=train, val_idx=g.val_idx,
                test_idx=g.test_idx, num_classes=4, name="tiny").validate()
    assert classes_without(g.y, g.train_idx, 4) == [3]
    from rich.console import Console

    out = Console(file=open(tmp_path / "out.txt", "w"), width=200)  # noqa: SIM115 - closed below
    run_training(tiny_cfg(tmp_path, "train.epochs=1"), single_process=True, graph=g, progress=False, console=out)
    out.file.close()
    said = (tmp_path / "out.txt").read_text()
    assert "warning: 1 of 4 classes have no training node ([3])" in said
    assert said.index("warning: 1 of 4 classes") < said.index("test / val acc")  # before the run's report

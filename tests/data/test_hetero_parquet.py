"""``source: hetero_parquet``: a typed graph stored as a Parquet table per node type and per
relation (a local directory, an S3 server on 127.0.0.1) loads as the same typed graph (same
content hash, same typed partition set, file for file) as the graph it was written from; bad
tables and configs fail before any data is read, naming the table, the column and the fix."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gnntrain.config import SyntheticHeteroConfig
from gnntrain.data import DataError, load_dataset
from gnntrain.data.hetero import load_hetero, to_training_graph
from gnntrain.data.hetero_synthetic import generate_hetero
from partition import PartitionConfig
from partition.hetero_graph import HeteroGraph, relation_name
from partition.hetero_store import build_hetero_partition_set
from tests.data.conftest import dataset

S3Bucket = tuple[str, dict[str, object]]
MASKS = ["train_mask", "val_mask", "test_mask"]


@pytest.fixture(scope="module")
def mag() -> HeteroGraph:
    return generate_hetero(SyntheticHeteroConfig(papers=80, authors=100, institutions=6, fields=12,
                                                 features=5, classes=4, seed=3), name="mag")


def _tables(g: HeteroGraph) -> dict[str, pa.Table]:
    """The graph as tables: papers shuffled with an id column, a list column of features, labels
    and masks; authors as an id column alone (their count); one table per relation (authors'
    ids as int32: widths may differ). Institutions and fields get no table."""
    perm = np.random.default_rng(1).permutation(g.num_nodes["paper"])
    x = g.x["paper"][perm]
    paper = pa.table({"id": perm, "feat": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1]),
                      "venue": g.y[perm], **{m: g.mask(s)[perm] for m, s in zip(MASKS, ("train", "val", "test"),
                                                                                 strict=True)}})
    out = {"paper": paper, "author": pa.table({"id": np.arange(g.num_nodes["author"])})}
    for et, csr in g.relations.items():
        src, dst = csr.edges()
        out[relation_name(et)] = pa.table({"s": src.astype(np.int32), "d": dst})
    return out


def _config(g: HeteroGraph, at: str, **extra: Any) -> dict[str, Any]:
    nodes = {"paper": {"path": f"{at}/paper", "id": "id", "features": "feat", "label": "venue", "masks": MASKS},
             "author": {"path": f"{at}/author.parquet"}}
    edges = {relation_name(et): {"path": f"{at}/{relation_name(et)}", "src": "s", "dst": "d"}
             for et in g.edge_types}
    # institutions by count; fields of study from their largest edge id
    return {"source": "hetero_parquet", "name": "mag", "target": "paper", "nodes": nodes, "edges": edges,
            "counts": {"institution": g.num_nodes["institution"]}, **extra}


def _write_local(g: HeteroGraph, root: Path) -> None:
    """Node tables as files, relation tables as directories of two files."""
    root.mkdir(parents=True)
    for name, table in _tables(g).items():
        if name in ("paper", "author"):
            (root / name if name == "paper" else root).mkdir(exist_ok=True)
            pq.write_table(table, root / "paper" / "part-0.parquet" if name == "paper" else root / "author.parquet")
            continue
        (root / name).mkdir()
        half = table.num_rows // 2
        pq.write_table(table.slice(0, half), root / name / "part-0.parquet")
        pq.write_table(table.slice(half), root / name / "part-1.parquet")


def _write_s3(g: HeteroGraph, uri: str, options: dict[str, object]) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    for name, table in _tables(g).items():
        key = "author.parquet" if name == "author" else f"{name}/part-0.parquet"
        with fs.open(f"{uri}/{key}".removeprefix("s3://"), "wb") as f:
            pq.write_table(table, f)


def _set_files(g: HeteroGraph, root: Path) -> dict[str, tuple[int, str]]:
    pset = build_hetero_partition_set(g, PartitionConfig(method="metis", parts=2), root)
    return {rel: (e.bytes, e.sha256) for rel, e in pset.meta.files.items()}


def test_tables_local_and_on_s3_give_the_typed_graph_and_its_partition_set(
        mag: HeteroGraph, s3_bucket: S3Bucket, tmp_path: Path) -> None:
    assert mag.num_nodes["field_of_study"] == max(int(mag.relations[et].edges()[1].max()) + 1
                                                  for et in mag.edge_types if et[2] == "field_of_study")
    _write_local(mag, tmp_path / "pq")
    local = load_hetero(dataset(**_config(mag, str(tmp_path / "pq"))))
    uri, options = s3_bucket
    _write_s3(mag, uri, options)
    remote = load_hetero(dataset(**_config(mag, uri, storage_options=options)))
    assert local.content_hash() == remote.content_hash() == mag.content_hash()
    assert list(local.num_nodes) == list(mag.num_nodes) and local.edge_types == mag.edge_types
    assert _set_files(remote, tmp_path / "sets-s3") == _set_files(mag, tmp_path / "sets-mem")
    # the training graph of every typed source: load_dataset gives it whole
    assert load_dataset(dataset(**_config(mag, str(tmp_path / "pq")))).content_hash() == \
        to_training_graph(mag).content_hash()


def test_without_masks_the_labelled_targets_split_at_random_and_reverse_relations_are_added(
        mag: HeteroGraph, tmp_path: Path) -> None:
    _write_local(mag, tmp_path / "pq")
    # labels alone, as whole floats (how pandas writes an integer column that had nulls)
    pq.write_table(pa.table({"venue": mag.y.astype(np.float64)}), tmp_path / "labels.parquet")
    cfg = _config(mag, str(tmp_path / "pq"), add_reverse=True, feature_fallback="degree", split_seed=4)
    cfg["nodes"]["paper"] = {"path": str(tmp_path / "labels.parquet"), "label": "venue"}
    g = load_hetero(dataset(**cfg))
    n = mag.num_nodes["paper"]
    assert sorted(np.concatenate([g.train_idx, g.val_idx, g.test_idx]).tolist()) == list(range(n))
    assert g.train_idx.size == round(0.6 * n) and g.val_idx.size == round(0.2 * n)
    assert np.array_equal(g.y, mag.y)
    assert set(g.edge_types) == set(mag.add_reverse().edge_types)
    assert set(g.x) == set(mag.num_nodes)  # structural features on every featureless type


@pytest.mark.parametrize("case", ["id_past_the_type", "missing_column", "wrong_dtype", "no_count", "null_label"])
def test_bad_tables_name_the_table_the_column_and_the_fix(mag: HeteroGraph, tmp_path: Path, case: str) -> None:
    root = tmp_path / "pq"
    _write_local(mag, root)
    cfg = _config(mag, str(root))
    writes = root / "author:writes:paper"
    if case == "id_past_the_type":  # an author id past the author table's rows
        cfg["nodes"]["author"]["path"] = str(root / "few-authors.parquet")
        pq.write_table(pa.table({"id": np.arange(10)}), root / "few-authors.parquet")
        want = (r"dataset\.edges\.author:writes:paper: .*part-0\.parquet column 's' holds node id \d+ "
                r"\(row \d+ of that file\), outside \[0, 10\) of node type 'author'")
    elif case == "missing_column":
        cfg["edges"]["author:writes:paper"]["dst"] = "paper_id"
        want = r"dataset\.edges\.author:writes:paper.*'paper_id'"
    elif case == "wrong_dtype":
        pq.write_table(pa.table({"s": ["a", "b"], "d": [0, 1]}), writes / "part-1.parquet")
        want = r"dataset\.edges\.author:writes:paper.*part-1\.parquet.*'s'.*int"
    elif case == "null_label":  # every paper needs its label
        labels = np.where(np.arange(mag.num_nodes["paper"]) == 5, np.nan, mag.y.astype(np.float64))
        pq.write_table(pa.table({"venue": labels}), root / "labels.parquet")
        cfg["nodes"]["paper"] = {"path": str(root / "labels.parquet"), "label": "venue"}
        want = r"target 'paper' has a NaN label; every 'paper' node needs a label"
    else:  # institutions: no table, no count, and their one relation's table is empty
        del cfg["counts"]
        empty = root / "empty.parquet"
        pq.write_table(pa.table({"s": pa.array([], pa.int64()), "d": pa.array([], pa.int64())}), empty)
        cfg["edges"]["author:affiliated_with:institution"]["path"] = str(empty)
        want = r"node type 'institution' has no node table, no edges and no count; give dataset\.counts\.institution"
    with pytest.raises(DataError, match=want):
        load_hetero(dataset(**cfg))


@pytest.mark.parametrize(("change", "field", "want"), [
    (lambda c: c["edges"].update({"writes": c["edges"].pop("author:writes:paper")}), "edges",
     "key 'writes' must name a relation as 'src_type:relation:dst_type'"),
    (lambda c: c["nodes"]["author"].update(label="venue"), "nodes.author.label",
     "only the target type ('paper') carries labels and split masks"),
    (lambda c: c.update(target="author"), "target",
     "nodes.author.label is not set"),
    (lambda c: c.update(target="venue"), "target",
     "target='venue': the target type needs a node table"),
    (lambda c: c["edges"]["paper:cites:paper"].update(edge_type="kind"), "edges",
     "edge_type='kind': each relation has its own table here"),
    (lambda c: c.update(counts={"author": 5}), "counts",
     "counts: 'author'=5 must be >= 1 and name a type without a node table"),
    (lambda c: c.update(counts={"venue": 3}), "counts",
     "counts: 'venue'=3 must be >= 1 and name a type without a node table (types: ['paper', 'author', "
     "'field_of_study', 'institution']"),
])
def test_bad_configs_are_refused_naming_the_field(mag: HeteroGraph, change: Any, field: str, want: str) -> None:
    from gnntrain.config import ConfigError

    cfg = _config(mag, "/nowhere")
    change(cfg)
    with pytest.raises((ConfigError, ValueError), match=re.escape(want)):
        dataset(**cfg)


def test_a_typed_run_from_tables_on_s3_trains_as_the_graph_in_memory(
        mag: HeteroGraph, s3_bucket: S3Bucket, tmp_path: Path) -> None:
    """``gnntrain.fit`` of a config whose dataset is the tables on S3 ends with the parameters of
    the same run handed the typed graph's training graph."""
    import torch

    import gnntrain
    from tests.conftest import quiet

    uri, options = s3_bucket
    _write_s3(mag, uri, options)
    cfg = {"dataset": _config(mag, uri, storage_options=options),
           "sampler": {"fanouts": [4, 4], "batch_size": 16},
           "model": {"arch": "rgcn", "options": {"node_types": 4, "bases": 2}, "hidden": 8, "layers": 2},
           "train": {"epochs": 1, "eval_every": 1, "run_root": str(tmp_path / "runs")}}
    runs = [gnntrain.fit(cfg, single_process=True, progress=False, console=quiet(), **kw)
            for kw in ({}, {"graph": to_training_graph(mag)})]
    a, b = (r.model.state_dict() for r in runs)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert runs[0].summary["final"] == runs[1].summary["final"] and runs[0].summary["dataset"] == "mag"

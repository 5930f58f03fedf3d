"""Training from a chunked graph: the coordinator partitions it with the Ray pipeline (never
loading the whole graph), workers load their parts, and the run equals the in-memory one.
The chunks and the partition set live on an S3 server on 127.0.0.1: the pipeline's tasks
and the workers share no directory."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from gnntrain.config import ConfigError, RunConfig, SyntheticConfig, load_config
from gnntrain.data.synthetic import generate
from gnntrain.data.synthetic_chunks import write_synthetic_chunks
from gnntrain.runtime.coordinator import run_training
from partition import open_partition_set, quality_report
from partition.chunked import ChunkedGraph
from partition.manifest import sha256_file
from partition.storage import open_store
from tests.conftest import upload_tree
from tests.runtime.helpers import assert_same_state, final_state

SYN = SyntheticConfig(nodes=3000, avg_degree=8, features=16, classes=4, homophily=0.8, feature_noise=1.0)
CLASSES = 4


def _cfg(tmp: Path, dataset: dict[str, Any], root: str, *overrides: str) -> RunConfig:
    raw: dict[str, Any] = {
        "dataset": {"name": "syn", **dataset},
        "partition": {"parts": 2, "method": "multilevel", "root": str(tmp / root)},
        "sampler": {"fanouts": [5, 5], "batch_size": 64, "prefetch": 1},
        "model": {"arch": "sage", "hidden": 16, "layers": 2, "dropout": 0.3},
        "train": {"epochs": 2, "lr": 0.01, "seed": 0, "run_root": str(tmp / "runs"), "plots": False},
        "cluster": {"workers": 2, "call_timeout_s": 60, "collective_timeout_s": 60, "epoch_timeout_s": 120},
    }
    return load_config(raw=raw, overrides=list(overrides))


def test_chunks_on_object_storage_train_like_memory(own_pool: float, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    s3_bucket: tuple[str, dict[str, object]]) -> None:
    # own_pool: the coordinator releases idle groups before the pipeline's tasks start
    uri, options = s3_bucket
    chunks = tmp_path / "chunks"
    write_synthetic_chunks(SYN, chunks, name="syn", rows_per_chunk=1, edges_per_chunk=5000)
    bucket = open_store(uri, options)
    upload_tree(chunks, bucket.child("chunks"))

    def whole_graph(self: ChunkedGraph) -> None:
        raise AssertionError("the coordinator loaded the whole chunked graph")

    monkeypatch.setattr(ChunkedGraph, "to_graph", whole_graph)
    remote = _cfg(tmp_path, {"source": "chunks", "path": f"{uri}/chunks", "storage_options": options}, "unused",
                  f"partition.root={uri}/pc", f"partition.storage_options={json.dumps(options)}")
    from_chunks = run_training(remote, progress=False)
    assert from_chunks["final"]["test_acc"] > 1.5 / CLASSES, from_chunks["final"]

    graph = generate(SYN, name="syn")
    from_memory = run_training(_cfg(tmp_path, {"source": "synthetic"}, "pm"), graph=graph, progress=False)

    # the same parts, byte for byte, from the pipeline on S3 and from the in-memory build
    (pm,) = list((tmp_path / "pm").iterdir())
    assert bucket.child("pc").names() == [pm.name]
    a = open_partition_set(f"{uri}/pc/{pm.name}", storage_options=options, scratch=tmp_path / "scratch")
    b = open_partition_set(pm)
    assert {f: e.sha256 for f, e in a.meta.files.items()} == {f: e.sha256 for f, e in b.meta.files.items()}
    got_indices = bucket.child("pc").child(pm.name).read_bytes("part-1/indices.npy")
    assert hashlib.sha256(got_indices).hexdigest() == sha256_file(pm / "part-1" / "indices.npy")
    # ... hence the same training, bit for bit (every rank's digest included)
    assert_same_state(final_state(from_chunks), final_state(from_memory), world=2)

    # the report of the chunked run, computed from the parts alone, agrees with the whole-graph one
    got = json.loads((Path(from_chunks["run_dir"]) / "partition.json").read_text())
    want = quality_report(graph, b.assignment(), num_parts=2, method="multilevel").model_dump(mode="json")
    for key in ("edge_cut", "random_edge_cut", "parts", "imbalance", "cut_matrix", "graph_hash", "num_edges"):
        assert got[key] == want[key], key
    assert got["imbalance"]["train"] <= 1.05


def test_chunks_refuse_single_process_and_whole_graph_methods(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks"
    write_synthetic_chunks(SyntheticConfig(nodes=200, avg_degree=4, features=4, classes=2), chunks, name="syn")
    ds = {"source": "chunks", "path": str(chunks)}
    with pytest.raises(ConfigError, match="drop --single-process"):
        run_training(_cfg(tmp_path, ds, "p"), single_process=True, progress=False)
    with pytest.raises(ConfigError, match=r"partition.method='metis' needs the whole graph"):
        run_training(_cfg(tmp_path, ds, "p", "partition.method=metis"), progress=False)
    assert not (tmp_path / "runs").exists() and not (tmp_path / "p").exists()  # refused before any work

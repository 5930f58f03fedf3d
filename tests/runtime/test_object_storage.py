"""A run whose partition set lives on object storage (an S3 server on 127.0.0.1): each
worker stages its own part and the run ends bit for bit where the local-directory run ends;
no secret of the storage options reaches the run directory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gnntrain.runtime.coordinator import run_training
from tests.conftest import make_graph
from tests.runtime.helpers import assert_same_state, final_state, tiny_cfg


def test_two_workers_from_s3_equal_the_local_run(ray_local: None, tmp_path: Path,
                                                 s3_bucket: tuple[str, dict[str, object]]) -> None:
    uri, options = s3_bucket
    g = make_graph(240, seed=3)
    scratch = tmp_path / "scratch"
    local = run_training(tiny_cfg(tmp_path / "local", workers=2), graph=g, progress=False)
    s3_cfg = tiny_cfg(tmp_path / "s3", f"partition.root={uri}/parts",
                      f"partition.storage_options={json.dumps(options)}",
                      f"cluster.scratch_dir={scratch}", workers=2)
    remote = run_training(s3_cfg, graph=g, progress=False)
    assert_same_state(final_state(remote), final_state(local), world=2)

    # both workers run on this one node: the scratch holds the set-level files and each
    # worker's own part, staged from the store
    (staged,) = scratch.iterdir()
    assert sorted(p.name for p in staged.iterdir() if p.is_dir()) == ["part-0", "part-1"]
    mtimes = {p: p.stat().st_mtime_ns for p in staged.rglob("*.npy")}
    # the summary says the same: each worker copied its own part, the coordinator none
    assert [sorted({f.split("/")[0] for f in w["fetched"] if f.startswith("part-")})
            for w in remote["staging"][0]["workers"]] == [["part-0"], ["part-1"]]
    assert not [f for f in remote["staging_coordinator"]["fetched"] if f.startswith("part-")]

    # no secret in what the run wrote; the endpoint (not a secret) is kept
    run_dir = Path(remote["run_dir"])
    for path in run_dir.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert str(options["secret"]).encode() not in data, path
            assert str(options["key"]).encode() not in data, path
    assert str(options["endpoint_url"]) in (run_dir / "config.yaml").read_text()

    # predictions with 2 Ray workers from the set in the store (the coordinator never loads
    # the graph: the run was given it in memory) equal the local run's
    from gnntrain.predict import predict, read_predictions

    want = read_predictions(predict(local["run_dir"], "logits", out=tmp_path / "p-local", progress=False))
    got = read_predictions(predict(remote["run_dir"], "logits", out=tmp_path / "p-s3", progress=False,
                                   storage_options=options))
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])

    # the next run reuses the set in the store and the staged copies on the node
    again = run_training(s3_cfg.with_overrides(["train.epochs=1"]), graph=g, progress=False)
    report = json.loads((Path(again["run_dir"]) / "partition.json").read_text())
    assert report["partition_path"].startswith(f"{uri}/parts/")
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes


def test_a_typed_set_in_s3_trains_two_workers_like_the_local_set(ray_local: None, tmp_path: Path,
                                                                 s3_bucket: tuple[str, dict[str, object]]) -> None:
    """A typed (format-2) set written straight to the store and trained from it: the same
    parameters as from a local set, each worker staged its own part and the set-level files
    (the in-degrees among them), the coordinator no part."""
    from partition import build_training_set
    from tests.runtime.test_typed_training import GRAPH, typed_cfg

    uri, options = s3_bucket
    local = run_training(typed_cfg(tmp_path / "local", workers=2), graph=GRAPH, progress=False)
    s3_cfg = typed_cfg(tmp_path / "s3", f"partition.root={uri}/parts", f"partition.storage_options={json.dumps(options)}",
                       f"cluster.scratch_dir={tmp_path / 'scratch'}", workers=2)
    remote = run_training(s3_cfg, graph=GRAPH, progress=False)
    assert_same_state(final_state(remote), final_state(local), world=2)
    assert [sorted({f.split("/")[0] for f in w["fetched"] if f.startswith("part-")})
            for w in remote["staging"][0]["workers"]] == [["part-0"], ["part-1"]]
    assert "global_degrees.npy" in remote["staging"][0]["workers"][0]["fetched"]
    assert not [f for f in remote["staging_coordinator"]["fetched"] if f.startswith("part-")]

    # the set in the store is reused; its in-degrees are the graph's, in the set's numbering
    pset = build_training_set(GRAPH, s3_cfg.partition)
    assert pset.reused and pset.location.startswith(f"{uri}/parts/")
    want = np.empty(GRAPH.num_nodes, dtype=np.int64)
    want[pset.new_id_map()] = GRAPH.in_degrees()
    np.testing.assert_array_equal(pset.global_degrees(), want)

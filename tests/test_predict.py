"""``gnntrain.predict``: distributed predictions equal single-process inference, every node
once, the on-disk layout its docstring draws, and bad input refused with nothing written."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import gnntrain.predict as gp
from gnntrain.config import ModelConfig
from gnntrain.models import BUILTIN
from gnntrain.predict import PredictError, predict, read_manifest, read_predictions
from gnntrain.runtime.coordinator import run_training
from partition.graph import Graph
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("GNNTRAIN_DATA", REPO.parent / "shared" / "datasets"))


@pytest.fixture(scope="module")
def two_worker_run(ray_local: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Graph]:
    """A tiny run trained by 2 Ray workers (METIS parts), with its graph."""
    tmp = tmp_path_factory.mktemp("predict")
    g = make_graph(300, seed=3)
    summary = run_training(tiny_cfg(tmp, "train.epochs=1", workers=2), graph=g, progress=False)
    return Path(summary["run_dir"]), g


@pytest.fixture(scope="module")
def dist_logits(two_worker_run: tuple[Path, Graph], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Logits of every node, written by the run's 2 Ray workers (read-only for tests)."""
    return predict(two_worker_run[0], "logits", out=tmp_path_factory.mktemp("dist") / "logits",
                   progress=False)


def _shard_ids(out: Path) -> np.ndarray:
    m = read_manifest(out)
    return np.concatenate([np.load(out / s.files["ids"].name) for s in m.shards])


# The largest group first: the kept group of its run then serves the smaller runs below
# (gnntrain.reuse_workers).
def test_four_workers_predict_a_typed_graph_as_one_process(ray_local: None, tmp_path: Path) -> None:
    """R-GCN on a typed graph trained and predicted by 4 Ray workers (the typed partition
    set): the logits of every node equal single-process inference."""
    from tests.runtime.test_typed_training import GRAPH, typed_cfg

    summary = run_training(typed_cfg(tmp_path, "train.epochs=1", workers=4), graph=GRAPH, progress=False)
    run = Path(summary["run_dir"])
    dist = predict(run, "logits", out=tmp_path / "logits", progress=False)
    ref = predict(run, "logits", out=tmp_path / "ref", single_process=True, graph=GRAPH, progress=False)
    m = read_manifest(dist)
    assert m.workers == 4 and len(m.shards) == 4 and all(s.rows > 0 for s in m.shards)
    d_ids, d_val = read_predictions(dist)
    r_ids, r_val = read_predictions(ref)
    np.testing.assert_array_equal(d_ids, np.arange(GRAPH.num_nodes))
    np.testing.assert_array_equal(d_ids, r_ids)
    np.testing.assert_allclose(d_val, r_val, rtol=0, atol=1e-5, err_msg="4 workers differ from one process")
    assert np.abs(r_val).max() > 1e-3


def test_two_workers_equal_single_process_and_write_every_node_once(
        two_worker_run: tuple[Path, Graph], dist_logits: Path, tmp_path: Path) -> None:
    run, g = two_worker_run
    for what, layer in (("logits", None), ("embeddings", 1)):
        dist = dist_logits if what == "logits" else predict(run, what, layer, tmp_path / what,
                                                            progress=False)
        ref = predict(run, what, layer, tmp_path / f"ref-{what}", single_process=True, graph=g,
                      progress=False)
        m = read_manifest(dist)
        assert m.workers == 2 and len(m.shards) == 2, "each of the 2 workers writes its own shard"
        assert all(s.rows > 0 for s in m.shards)
        ids = _shard_ids(dist)
        np.testing.assert_array_equal(np.sort(ids), np.arange(g.num_nodes),
                                      err_msg="not every original node id exactly once")
        d_ids, d_val = read_predictions(dist)
        r_ids, r_val = read_predictions(ref)
        np.testing.assert_array_equal(d_ids, r_ids)
        assert d_val.shape == r_val.shape == (g.num_nodes, 4 if what == "logits" else 16)
        np.testing.assert_allclose(d_val, r_val, rtol=0, atol=1e-5,
                                   err_msg=f"{what}: 2 workers differ from single-process inference")
        assert np.abs(r_val).max() > 1e-3, "all-zero outputs would compare equal trivially"


def test_probs_and_last_layer_embeddings_follow_from_logits(two_worker_run: tuple[Path, Graph],
                                                            tmp_path: Path) -> None:
    run, g = two_worker_run
    kw: dict[str, Any] = {"single_process": True, "graph": g, "progress": False}
    _, logits = read_predictions(predict(run, "logits", out=tmp_path / "l", **kw))
    _, probs = read_predictions(predict(run, "probs", out=tmp_path / "p", **kw))
    _, last = read_predictions(predict(run, "embeddings", 2, tmp_path / "e", **kw))
    np.testing.assert_allclose(probs, torch.softmax(torch.from_numpy(logits), 1).numpy(), atol=1e-6)
    np.testing.assert_array_equal(last, logits)
    assert read_manifest(tmp_path / "e").layer == 2


def test_layout_matches_the_docstring_tree(dist_logits: Path) -> None:
    out = dist_logits
    tree = gp.__doc__.split("<out>/", 1)[1].split("\n\n", 1)[0]
    drawn = set(re.findall(r"[└├]── (\S+)", tree))
    assert drawn == {p.name for p in out.iterdir()}
    m = json.loads((out / "manifest.json").read_text())
    bullets = re.findall(r"^\* (.+?) — ", gp.__doc__, re.M)
    documented = {k for b in bullets for k in re.findall(r"``(\w+)``", b)}
    assert documented == set(m), "manifest.json fields differ from the docstring's list"
    assert not [p for p in out.parent.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


def _main(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    rc = gp.main([str(a) for a in argv])
    return rc, capsys.readouterr().err.strip()


def test_bad_input_exits_2_with_one_line_and_writes_nothing(
        two_worker_run: tuple[Path, Graph], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = two_worker_run
    bare = tmp_path / "no-ckpt"
    bare.mkdir()
    for name in ("config.yaml", "partition.json"):
        shutil.copy(run / name, bare / name)
    rc, err = _main(bare, capsys=capsys)
    assert rc == 2 and err.startswith("error:") and "no checkpoint" in err and "\n" not in err
    assert not (bare / "predictions").exists()

    for bad in ("0", "3", "-1"):
        rc, err = _main(run, "--what", "embeddings", "--layer", bad, "--out", tmp_path / "x", capsys=capsys)
        assert rc == 2 and f"--layer {bad}" in err and "allowed 1..2" in err, err
        assert not (tmp_path / "x").exists()

    rc, err = _main(run, "--what", "logits", "--layer", "1", capsys=capsys)
    assert rc == 2 and "only --what embeddings" in err
    rc, err = _main(run, "--what", "colours", "--out", tmp_path / "y", capsys=capsys)
    assert rc == 2 and "'colours'" in err and "probs" in err and not (tmp_path / "y").exists()

    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    rc, err = _main(run, "--out", taken, capsys=capsys)
    assert rc == 2 and str(taken) in err and "--force" in err
    rc, err = _main(run, "--out", taken, "--force", capsys=capsys)
    assert rc == 2 and "not a prediction directory" in err
    assert [p.name for p in taken.iterdir()] == ["keep.txt"] and (taken / "keep.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


def test_force_replaces_an_earlier_prediction(two_worker_run: tuple[Path, Graph], tmp_path: Path) -> None:
    run, g = two_worker_run
    kw: dict[str, Any] = {"single_process": True, "graph": g, "progress": False}
    out = predict(run, "logits", out=tmp_path / "o", **kw)
    with pytest.raises(PredictError, match="exists"):
        predict(run, "probs", out=out, **kw)
    assert read_manifest(out).what == "logits"
    predict(run, "probs", out=out, force=True, **kw)
    assert read_manifest(out).what == "probs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


def test_two_workers_upload_their_shards_to_object_storage(two_worker_run: tuple[Path, Graph], dist_logits: Path,
                                                           s3_bucket: tuple[str, dict[str, object]]) -> None:
    """``out`` an S3 URI (a server on 127.0.0.1): each of the 2 Ray workers uploads its own
    shard, the manifest goes last; the objects are the local directory's, byte for byte, and
    read back from the URI; an existing URI is refused without ``force`` and replaced with
    it; a shard changed in the store is refused by the reader."""
    import s3fs

    run, g = two_worker_run
    uri, options = s3_bucket
    out = f"{uri}/predictions/logits"
    assert predict(run, "logits", out=out, storage_options=options, progress=False) == out
    fs, key = s3fs.S3FileSystem(**options), out.removeprefix("s3://")
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.find(key)) == sorted(p.name for p in dist_logits.iterdir())
    stored = json.loads(fs.cat_file(f"{key}/manifest.json"))
    assert stored["workers"] == 2 and [s["files"] for s in stored["shards"]] == \
        [s.model_dump()["files"] for s in read_manifest(dist_logits).shards]  # same bytes, shard by shard
    got, want = read_predictions(out, storage_options=options), read_predictions(dist_logits)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert not any(str(options["secret"]).encode() in fs.cat_file(p) for p in fs.find(key))

    with pytest.raises(PredictError, match="exists; pass --force"):
        predict(run, "probs", out=out, storage_options=options, progress=False)
    predict(run, "probs", out=out, storage_options=options, force=True, single_process=True, graph=g,
            progress=False)
    assert json.loads(fs.cat_file(f"{key}/manifest.json"))["what"] == "probs"
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.find(key)) == ["manifest.json", "part-0.ids.npy", "part-0.npy"]
    data = bytearray(fs.cat_file(f"{key}/part-0.npy"))
    data[-1] ^= 0xFF
    fs.pipe_file(f"{key}/part-0.npy", bytes(data))
    with pytest.raises(PredictError, match="part-0.npy: differs from manifest.json"):
        read_predictions(out, storage_options=options)


def _sage_without_layer(in_dim: int, out_dim: int, cfg: ModelConfig) -> torch.nn.Module:
    model = BUILTIN["sage"](in_dim, out_dim, cfg)
    model.layer = None  # same parameters, no layer-wise call
    return model


def test_model_without_layer_is_refused(two_worker_run: tuple[Path, Graph], tmp_path: Path) -> None:
    run, g = two_worker_run
    for what in ("embeddings", "logits"):
        with pytest.raises(PredictError, match=r"has no layer\(i, block, h\)"):
            predict(run, what, out=tmp_path / what, model=_sage_without_layer, single_process=True,
                    graph=g, progress=False)
        assert not (tmp_path / what).exists()


def test_reader_refuses_changed_or_duplicated_rows(dist_logits: Path, tmp_path: Path) -> None:
    out = Path(shutil.copytree(dist_logits, tmp_path / "o"))
    ids_file = out / read_manifest(out).shards[0].files["ids"].name
    ids = np.load(ids_file)
    ids[0] = ids[1]
    np.save(ids_file, ids)  # same size: only the checksum tells
    with pytest.raises(PredictError, match="SHA-256"):
        read_predictions(out)
    with pytest.raises(PredictError, match=f"node id {ids[1]} appears more than once"):
        read_predictions(out, verify=False)


def test_parquet_roundtrip_or_clear_error(two_worker_run: tuple[Path, Graph], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    run, g = two_worker_run
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        rc, err = _main(run, "--format", "parquet", "--out", tmp_path / "pq", capsys=capsys)
        assert rc == 2 and "pyarrow" in err and not (tmp_path / "pq").exists()
        return
    kw: dict[str, Any] = {"single_process": True, "graph": g, "progress": False}
    a = read_predictions(predict(run, "logits", out=tmp_path / "npy", **kw))
    b = read_predictions(predict(run, "logits", out=tmp_path / "pq", fmt="parquet", **kw))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.skipif(not (DATA / "planetoid" / "Cora" / "raw").is_dir(),
                    reason=f"Cora raw files not under {DATA}/planetoid/Cora/raw")
def test_export_embeddings_example_smoke(ray_local: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_examples import run_example

    out = run_example("export_embeddings.py", DATA, tmp_path, monkeypatch, capsys, "--root", str(tmp_path))
    acc = re.search(r"test accuracy: ([0-9.]+)", out)
    assert acc, out
    assert float(acc.group(1)) > 1 / 7 + 0.1, "embeddings no better than chance on Cora's 7 classes"


def test_prediction_reads_the_best_validation_checkpoint_unless_asked_for_the_last(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = make_graph(300, seed=5)  # validation accuracy peaks at epoch 5 of 8 (test_checkpoint.py)
    s = run_training(tiny_cfg(tmp_path, "train.epochs=8", "train.lr=0.05"), single_process=True, graph=g,
                     progress=False)
    run = Path(s["run_dir"])
    best = s["best_val"]["epoch"] + 1
    assert best < 8
    got = predict(run, "logits", out=tmp_path / "best", single_process=True, graph=g, progress=False)
    assert read_manifest(got).checkpoint_epoch == best
    predict(run, "logits", out=tmp_path / "last", single_process=True, graph=g, progress=False,
            checkpoint="last")
    assert read_manifest(tmp_path / "last").checkpoint_epoch == 8
    assert gp.parse_args([str(run), "--checkpoint", "last"]).checkpoint == "last"
    with pytest.raises(SystemExit) as exit_:
        gp.parse_args([str(run), "--checkpoint", "newest"])
    assert exit_.value.code == 2 and "invalid choice: 'newest'" in capsys.readouterr().err
    assert not np.array_equal(read_predictions(got)[1], read_predictions(tmp_path / "last")[1])

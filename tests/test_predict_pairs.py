"""``gnntrain.predict --pairs``: pair scores equal the run's own evaluation scores of the
same pairs; bad input is refused with one line before any work."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gnntrain.predict import PredictError, main, predict_pairs
from gnntrain.rundir import RunDir
from gnntrain.runtime.coordinator import run_training
from gnntrain.tasks import LinkPrediction, ranking
from partition.graph import Graph
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg

OPTS = '{"decoder": "mlp", "hits_k": 5}'


@pytest.fixture(scope="module")
def link_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Graph]:
    """A tiny link run with a learned (MLP) decoder, evaluated layer-wise, one process."""
    tmp = tmp_path_factory.mktemp("pairs")
    g = make_graph(240, seed=7)
    cfg = tiny_cfg(tmp, "task.kind=link", "model.arch=gnntrain.tasks.link:with_mlp_decoder",
                   f"task.options={OPTS}", "train.epochs=2", "train.eval=full")
    s = run_training(cfg, single_process=True, graph=g, progress=False)
    return Path(s["run_dir"]), g


def read_scores(path: Path) -> tuple[np.ndarray, np.ndarray]:
    raw = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return raw[:, :2].astype(np.int64), raw[:, 2]


def test_pair_scores_equal_the_runs_own_evaluation(link_run: tuple[Path, Graph],
                                                   tmp_path: Path) -> None:
    run, g = link_run
    rec = RunDir(run).metrics()[-1]
    assert rec["eval_mode"] == "full"
    task = LinkPrediction(decoder="mlp", hits_k=5)
    task.load_graph(tiny_cfg(tmp_path).dataset, g)
    assert task.split is not None
    pos, neg = task.split.val, task.split.val_neg
    pairs = np.concatenate([pos, neg])
    (tmp_path / "pairs.csv").write_text("src,dst\n" + "".join(f"{u},{v}\n" for u, v in pairs))
    out = predict_pairs(run, tmp_path / "pairs.csv", tmp_path / "s.csv", single_process=True,
                        graph=g, progress=False)
    got_pairs, s = read_scores(out)
    np.testing.assert_array_equal(got_pairs, pairs)  # input order
    sp, sn = s[:len(pos)], s[len(pos):]
    assert np.unique(s).size > len(s) // 2, "distinct scores, not a constant"
    # the run scored the same pairs during its last evaluation: the same figures
    assert ranking.auc(sp, sn) == pytest.approx(rec["val_auc"], abs=1e-9)
    assert ranking.mrr(sp, sn) == pytest.approx(rec["val_mrr"], abs=1e-9)
    assert ranking.hits_at_k(sp, sn, 5) == pytest.approx(rec["val_hits"], abs=1e-9)
    # the same pairs from a .npy [2, P] into a .npy of scores
    np.save(tmp_path / "pairs.npy", pairs.T)
    out2 = predict_pairs(run, tmp_path / "pairs.npy", tmp_path / "s.npy", single_process=True,
                         graph=g, progress=False)
    np.testing.assert_allclose(np.load(out2), s, rtol=1e-6, atol=0)


def test_pairs_and_scores_in_an_object_store(link_run: tuple[Path, Graph], tmp_path: Path,
                                             s3_bucket: tuple[str, dict[str, object]]) -> None:
    """Pairs read from an S3 object and scores written as one: the same bytes as the local
    files; an existing object is not replaced without --force."""
    from partition.storage import open_store

    run, g = link_run
    uri, options = s3_bucket
    (tmp_path / "pairs.csv").write_text("src,dst\n0,1\n5,7\n3,3\n")
    bucket = open_store(uri, options)
    bucket.put("in/pairs.csv", tmp_path / "pairs.csv")
    local = predict_pairs(run, tmp_path / "pairs.csv", tmp_path / "s.csv", single_process=True, graph=g,
                          progress=False)
    got = predict_pairs(run, f"{uri}/in/pairs.csv", f"{uri}/out/s.csv", single_process=True, graph=g,
                        progress=False, storage_options=options)
    assert got == f"{uri}/out/s.csv"
    assert bucket.read_bytes("out/s.csv") == Path(local).read_bytes()
    with pytest.raises(PredictError, match=r"--out 's3://.*/out/s.csv' exists; pass --force"):
        predict_pairs(run, f"{uri}/in/pairs.csv", f"{uri}/out/s.csv", single_process=True, graph=g,
                      storage_options=options)
    with pytest.raises(PredictError, match=r"--pairs 's3://.*/in/missing.csv': .*not found"):
        predict_pairs(run, f"{uri}/in/missing.csv", f"{uri}/out/t.csv", single_process=True, graph=g,
                      storage_options=options)


def test_bad_pairs_fail_with_one_line_before_work(link_run: tuple[Path, Graph], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run, g = link_run
    cases = {
        "range.csv": ("0 1\n3 240\n", r"pair 1 has dst id 240, outside \[0, 240\)"),
        "neg.csv": ("-1 5\n", r"pair 0 has src id -1, outside \[0, 240\)"),
        "words.tsv": ("src\tdst\n1\tx\n", r"line 2 is '1 x'; expected two integer ids"),
        "three.csv": ("1,2,3\n", "expected two integer ids"),
    }
    for name, (text, _) in cases.items():
        (tmp_path / name).write_text(text)
    np.save(tmp_path / "shape.npy", np.zeros((3, 4), np.int64))
    cases["shape.npy"] = ("", r"shape \(3, 4\), expected \[2, P\]")
    for name, (_, msg) in cases.items():
        out = tmp_path / f"{name}.out.csv"
        with pytest.raises(PredictError, match=msg):
            predict_pairs(run, tmp_path / name, out, single_process=True, graph=g, progress=False)
        assert not out.exists() and not list(tmp_path.glob(".tmp-*")), "nothing written"
    # the command line: exit status 2 and one line
    assert main([str(run), "--pairs", str(tmp_path / "shape.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("error: --pairs") and "expected [2, P]" in err, err


def test_pairs_of_a_node_run_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = run_training(tiny_cfg(tmp_path, "train.epochs=1"), single_process=True,
                     graph=make_graph(100, seed=1), progress=False)
    (tmp_path / "p.csv").write_text("0 1\n")
    capsys.readouterr()  # the training run's summary
    assert main([s["run_dir"], "--pairs", str(tmp_path / "p.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --pairs: the run's task.kind=") and err.count("\n") == 1, err
    assert "needs a link-prediction run" in err, err

"""Checkpoints and run directories: the last K kept, writes atomic even under SIGKILL,
a corrupt newest checkpoint falls back (and says so), no run reuses another's directory."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from gnntrain.checkpoint import list_checkpoints, load_latest, save_checkpoint, state_digest
from gnntrain.rundir import RunDir
from tests.conftest import REPO


def _state(v: float, n: int = 4) -> dict[str, torch.Tensor | dict]:
    return {"model": {"w": torch.full((n,), v)}, "opt": {"state": {}, "param_groups": [{"lr": 0.1}]}}


def test_keeps_the_last_k(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    for e in range(1, 7):
        save_checkpoint(run, e, _state(e), keep=3)
    assert [p.name for p in list_checkpoints(run)] == ["ckpt-00004.pt", "ckpt-00005.pt", "ckpt-00006.pt"]
    assert [p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".")] == []
    got = load_latest(run)
    assert got is not None and got["epochs_done"] == 6 and torch.equal(got["model"]["w"], torch.full((4,), 6.0))


def test_corrupt_newest_falls_back_and_says_so(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    for e in (1, 2, 3):
        save_checkpoint(run, e, _state(e), keep=5)
    newest = list_checkpoints(run)[-1]
    newest.write_bytes(b"not a checkpoint")
    said: list[str] = []
    got = load_latest(run, say=said.append)
    assert got is not None and got["epochs_done"] == 2
    assert len(said) == 1 and str(newest) in said[0] and "falling back to ckpt-00002.pt" in said[0], said
    for p in list_checkpoints(run):
        p.write_bytes(b"")
    said.clear()
    assert load_latest(run, say=said.append) is None
    assert len(said) == 3 and "no older checkpoint left" in said[-1]


def test_a_side_file_that_differs_from_its_record_makes_the_checkpoint_torn(tmp_path: Path) -> None:
    """The main file is the side files' manifest (size and SHA-256 of each): an altered or
    missing side file is refused before use, and the newest intact checkpoint is used."""
    run = RunDir(tmp_path)
    for e in (1, 2):
        save_checkpoint(run, e, _state(e), keep=5, parts=[{"rows": torch.full((3,), float(e + p))} for p in range(2)])
    side = tmp_path / "checkpoints" / "ckpt-00002.part-1.pt"
    data = bytearray(side.read_bytes())
    data[-30] ^= 0xFF  # same size, other bytes
    side.write_bytes(bytes(data))
    said: list[str] = []
    got = load_latest(run, say=said.append)
    assert got is not None and got["epochs_done"] == 1 and len(got["part_records"]) == 2
    assert len(said) == 1 and "ckpt-00002.part-1.pt differs" in said[0] and "sha256" in said[0], said
    side.unlink()
    said.clear()
    assert load_latest(run, say=said.append)["epochs_done"] == 1  # type: ignore[index]
    assert "are missing" in said[0]


def test_state_digest_sees_every_tensor(tmp_path: Path) -> None:
    a = _state(1.0)
    b = _state(1.0)
    assert state_digest(a) == state_digest(b)
    b["model"]["w"][2] = torch.nextafter(torch.tensor(1.0), torch.tensor(2.0))  # one ulp
    assert state_digest(a) != state_digest(b)
    c = _state(1.0)
    c["opt"]["state"] = {0: {"exp_avg": torch.zeros(4)}}
    assert state_digest(a) != state_digest(c)


_WRITER = """
import sys, torch
from pathlib import Path
from gnntrain.checkpoint import save_checkpoint
from gnntrain.rundir import RunDir
run = RunDir(Path(sys.argv[1]))
for e in range(1, 10**6):
    save_checkpoint(run, e, {"model": {"w": torch.full((4_000_000,), float(e))}, "opt": {}}, keep=2)
    print(e, flush=True)
"""


def test_checkpoint_writes_are_atomic_under_sigkill(tmp_path: Path) -> None:
    """SIGKILL a process that writes 16 MB checkpoints in a loop, several times at
    different moments: every ``ckpt-*.pt`` left is complete and holds its own epoch."""
    for delay in (0.2, 0.6):
        d = tmp_path / f"run-{delay}"
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(d)], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        try:
            proc.stdout.readline()  # the first checkpoint is written: the loop is running
            time.sleep(delay)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        kept = list_checkpoints(RunDir(d))
        assert kept, "no checkpoint survived"
        for p in kept:
            ck = torch.load(p, map_location="cpu", weights_only=False)
            assert torch.equal(ck["model"]["w"], torch.full((4_000_000,), float(ck["epochs_done"]))), p


def test_a_run_never_reuses_another_runs_directory(tmp_path: Path) -> None:
    runs = [RunDir.create(tmp_path, "same") for _ in range(3)]  # same name, same second
    assert len({r.path for r in runs}) == 3
    stamp = runs[0].path.name
    (tmp_path / f"{stamp}-7").mkdir()  # a directory another run already holds
    more = [RunDir.create(tmp_path, "same") for _ in range(6)]
    assert all(r.path.name != f"{stamp}-7" for r in more)
    assert len({r.path for r in runs + more}) == 9
    for r in runs + more:
        assert list(r.path.iterdir()) == [], "a new run directory must be empty"


def test_unwritable_run_root_names_the_field(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError, match="train.run_root"):
        RunDir.create(blocker / "runs", "r")


def test_best_checkpoint_is_the_best_validation_epoch_and_what_prediction_reads(tmp_path: Path) -> None:
    """``train.keep_best`` writes ``best.pt`` at every new best ``val_acc`` (the first epoch
    that reaches the maximum): it equals the rotating checkpoint of that epoch, survives
    the rotation, and ``gnntrain.load`` reads it by default (``checkpoint='last'``: the
    newest)."""
    import gnntrain
    from gnntrain.checkpoint import load_trained
    from gnntrain.runtime.coordinator import run_training
    from tests.conftest import make_graph
    from tests.runtime.helpers import tiny_cfg

    graph = make_graph(300, seed=5)
    cfg = tiny_cfg(tmp_path, "train.epochs=8", "train.checkpoint_every=1", "train.keep_checkpoints=8",
                   "train.lr=0.05")
    s = run_training(cfg, single_process=True, graph=graph, progress=False)
    run = RunDir(Path(s["run_dir"]))
    vals = [r["val_acc"] for r in run.metrics()]
    best_epoch = vals.index(max(vals))  # the first epoch at the maximum
    assert best_epoch < 7, f"validation peaks at the last epoch: {vals}; best and last would agree"
    assert s["best_val"]["epoch"] == best_epoch
    best = load_trained(run, "best")
    assert best is not None and best["epochs_done"] == best_epoch + 1
    same = torch.load(run.path / "checkpoints" / f"ckpt-{best_epoch + 1:05d}.pt", weights_only=True)
    assert state_digest(best) == state_digest(same)
    assert gnntrain.load(run.path).epochs_done == best_epoch + 1
    assert gnntrain.load(run.path, checkpoint="last").epochs_done == 8
    for old in list_checkpoints(run)[:-1]:  # rotation never removes best.pt
        old.unlink()
    assert load_trained(run, "best")["epochs_done"] == best_epoch + 1  # type: ignore[index]
    with pytest.raises(ValueError, match="checkpoint='newest': expected one of best, last"):
        load_trained(run, "newest")

    off = run_training(tiny_cfg(tmp_path / "off", "train.epochs=2", "train.keep_best=false"),
                       single_process=True, graph=graph, progress=False)
    assert not (Path(off["run_dir"]) / "checkpoints" / "best.pt").exists()
    assert load_trained(RunDir(Path(off["run_dir"])), "best")["epochs_done"] == 2  # type: ignore[index]


def test_a_resumed_run_keeps_the_best_of_the_epochs_before_it(tmp_path: Path) -> None:
    """Validation peaks at epoch 1 of the first 4 (the graph and schedule of the test
    above); resumed to 5 epochs, epoch 4's lower accuracy must not replace ``best.pt``."""
    from gnntrain.checkpoint import load_trained
    from gnntrain.config import load_config
    from gnntrain.runtime.coordinator import run_training
    from tests.conftest import make_graph
    from tests.runtime.helpers import tiny_cfg

    graph = make_graph(300, seed=5)
    first = run_training(tiny_cfg(tmp_path, "train.epochs=4", "train.lr=0.05"), single_process=True,
                         graph=graph, progress=False)
    run = RunDir(Path(first["run_dir"]))
    vals = [r["val_acc"] for r in run.metrics()]
    assert vals.index(max(vals)) == 1
    assert load_trained(run, "best")["epochs_done"] == 2  # type: ignore[index]
    (run.path / "config.yaml").write_text((run.path / "config.yaml").read_text()
                                          .replace("epochs: 4", "epochs: 5"))
    resumed = run_training(load_config(raw=run.read_config_raw()), single_process=True, graph=graph,
                           resume=run, progress=False)
    assert resumed["epochs"] == 5 and run.metrics()[4]["val_acc"] < max(vals)
    assert load_trained(run, "best")["epochs_done"] == 2  # type: ignore[index]


def test_patience_stops_after_that_many_evaluations_without_a_better_validation_metric(tmp_path: Path) -> None:
    """``train.patience``: the run of the graph and schedule above (validation peaks early)
    ends at the first evaluation that makes ``patience`` in a row without a new best, with
    the epochs of the uninterrupted run up to there, a final checkpoint of that epoch, the
    best epoch in best.pt and the stop in the summary; counted in evaluations
    (``eval_every``); a resumed stopped run trains nothing more."""
    from gnntrain.checkpoint import load_trained
    from gnntrain.config import load_config
    from gnntrain.runtime.coordinator import run_training
    from gnntrain.runtime.driver import best_so_far
    from tests.conftest import make_graph
    from tests.runtime.helpers import tiny_cfg

    graph = make_graph(300, seed=5)
    base = ("train.epochs=8", "train.lr=0.05")
    full = RunDir(Path(run_training(tiny_cfg(tmp_path / "full", *base), single_process=True, graph=graph,
                                    progress=False)["run_dir"])).metrics()
    for every, patience in ((1, 2), (2, 1)):
        evals = [r for r in full if (r["epoch"] + 1) % every == 0]
        stop = next(r["epoch"] for i, r in enumerate(evals)
                    if best_so_far(evals[:i + 1], "val_acc")[1] >= patience)
        assert stop < 7, "the schedule must give early stopping something to stop"
        s = run_training(tiny_cfg(tmp_path / f"p{every}{patience}", *base, f"train.eval_every={every}",
                                  f"train.patience={patience}"), single_process=True, graph=graph, progress=False)
        run = RunDir(Path(s["run_dir"]))
        got = run.metrics()
        assert s["epochs"] == stop + 1 and [r["loss"] for r in got] == [r["loss"] for r in full[:stop + 1]]
        assert s["stopped_early"] == {"patience": patience, "best": max(r["val_acc"] for r in evals[:stop // every + 1])}
        assert load_trained(run, "last")["epochs_done"] == stop + 1  # type: ignore[index]
        assert load_trained(run, "best")["epochs_done"] == s["best_val"]["epoch"] + 1  # type: ignore[index]
    again = run_training(load_config(raw=run.read_config_raw()), single_process=True, graph=graph, resume=run,
                         progress=False)
    assert again["epochs"] == stop + 1 and len(run.metrics()) == stop + 1

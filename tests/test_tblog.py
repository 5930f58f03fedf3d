"""TensorBoard logging: the scalars of a real metrics record, a no-op without the package,
and event files that TensorBoard reads back (including epochs redone after a restart)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gnntrain.tblog import EVENT_FILE, TensorBoardLog, scalars, tensorboard_available
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real (tiny, single-process, 2-epoch) run."""
    from rich.console import Console

    from gnntrain.runtime.coordinator import run_training

    tmp = tmp_path_factory.mktemp("tb-run")
    s = run_training(tiny_cfg(tmp, "train.epochs=2"), single_process=True, graph=make_graph(300),
                     progress=False, console=Console(file=io.StringIO()))
    return Path(s["run_dir"])


@pytest.fixture(scope="module")
def record(run_dir: Path) -> dict[str, Any]:
    """The last metrics.jsonl line of that run."""
    return dict(json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[-1]))


def test_scalars_of_a_real_record(record: dict[str, Any]) -> None:
    sc = scalars(record)
    assert sc["train/loss"] == record["loss"]
    assert sc["acc/test"] == record["test_acc"] and sc["acc/val"] == record["val_acc"]
    assert sc["time/epoch_s"] == record["epoch_s"]
    assert sc["time/wait_s"] == record["time"]["wait_s"]
    for cat, v in record["comm"]["by_category"].items():
        assert sc[f"bytes/{cat}"] == v
    assert sc["bytes/total"] == record["comm"]["total_bytes"]
    assert record["cache_hit_rate"] is None and "cache/hit_rate" not in sc  # no cache: skipped
    assert all(isinstance(v, float) for v in sc.values())


def test_scalars_skip_missing_and_non_numeric_fields() -> None:
    sc = scalars({"epoch": 0, "loss": 1.5, "val_acc": None, "cache_hit_rate": 0.25,
                  "time": {"wait_s": 0.1, "note": "x"}, "comm": {"by_category": {"feature": 10}}})
    assert sc == {"train/loss": 1.5, "cache/hit_rate": 0.25, "time/wait_s": 0.1, "bytes/feature": 10.0}


def test_no_op_without_tensorboard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   record: dict[str, Any]) -> None:
    # a None entry makes the import raise ImportError, also for submodules imported earlier
    for name in ["tensorboard", *[m for m in sys.modules if m.startswith("tensorboard.")]]:
        monkeypatch.setitem(sys.modules, name, None)
    assert not tensorboard_available()
    log = TensorBoardLog(tmp_path)
    assert log.log_epoch(record) == 0
    assert not (tmp_path / "tb").exists()


@pytest.mark.parametrize("epoch", [None, -1, 1.0, True])
def test_record_needs_an_integer_epoch(tmp_path: Path, epoch: Any) -> None:
    with pytest.raises(ValueError, match=r"rec\['epoch'\]"):
        TensorBoardLog(tmp_path).log_epoch({"epoch": epoch, "loss": 1.0})


def _read(path: Path) -> Any:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(path))
    acc.Reload()
    return acc


def test_event_file_reads_back_in_tensorboard(tmp_path: Path, record: dict[str, Any]) -> None:
    pytest.importorskip("tensorboard", reason="optional dependency (the 'tensorboard' extra)")
    log = TensorBoardLog(tmp_path)
    for epoch in range(3):
        assert log.log_epoch({**record, "epoch": epoch, "loss": 3.0 - epoch}) == len(scalars(record))
    assert [p.name for p in (tmp_path / "tb").iterdir()] == [EVENT_FILE]
    acc = _read(tmp_path / "tb")
    assert set(acc.Tags()["scalars"]) == set(scalars(record))
    assert [(e.step, e.value) for e in acc.Scalars("train/loss")] == [(0, 3.0), (1, 2.0), (2, 1.0)]
    [b] = [e.value for e in acc.Scalars("bytes/total")][:1]
    assert b == pytest.approx(record["comm"]["total_bytes"])


def test_redone_epochs_replace_the_old_points(tmp_path: Path, record: dict[str, Any]) -> None:
    """After a restart from the checkpoint of epoch 1, epochs 1.. are logged again."""
    pytest.importorskip("tensorboard", reason="optional dependency (the 'tensorboard' extra)")
    log = TensorBoardLog(tmp_path)
    for epoch, loss in [(0, 3.0), (1, 2.0), (2, 1.0), (1, 2.5), (2, 1.5), (3, 0.5)]:
        log.log_epoch({"epoch": epoch, "loss": loss})
    points = [(e.step, e.value) for e in _read(tmp_path / "tb").Scalars("train/loss")]
    assert points == [(0, 3.0), (1, 2.5), (2, 1.5), (3, 0.5)]


def test_a_run_logs_every_epoch(run_dir: Path) -> None:
    """The coordinator's loop calls TensorBoardLog once per epoch (gnntrain/runtime/driver.py)."""
    pytest.importorskip("tensorboard", reason="optional dependency (the 'tensorboard' extra)")
    metrics = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    acc = _read(run_dir / "tb")
    assert [(e.step, e.value) for e in acc.Scalars("train/loss")] == \
        [(m["epoch"], pytest.approx(m["loss"])) for m in metrics]
    assert [e.step for e in acc.Scalars("acc/val")] == [m["epoch"] for m in metrics if "val_acc" in m]

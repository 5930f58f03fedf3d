"""`python -m gnntrain.report` re-renders a finished run and compares runs side by side;
``summary.json`` records the gnntrain version that trained the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gnntrain
from gnntrain import report
from gnntrain.runtime.coordinator import run_training
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg


def test_report_rerenders_and_compares(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = run_training(tiny_cfg(tmp_path, "train.epochs=2"), single_process=True, graph=make_graph(200),
                     progress=False)
    run = Path(s["run_dir"])
    assert json.loads((run / "summary.json").read_text())["version"] == gnntrain.__version__
    assert not list(run.glob("*.png"))  # train.plots off (tiny_cfg): the run drew nothing
    assert report.main([str(run)]) == 0
    assert {p.name for p in run.glob("*.png")} >= {"accuracy.png", "bytes.png", "heatmap.png"}
    assert report.main([str(run), str(run), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "runs side by side" in out and f"{100 * s['final']['test_acc']:.2f}%" in out


def test_report_refuses_a_directory_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        report.main([str(tmp_path)])

"""The runnable examples, each at smoke size as a user runs it: its ``main`` with
``--smoke``, from a directory of its own, on the test session's Ray (the example's
workers are the session's kept ones, as a script joined to a running cluster gets)."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture
def cora_data(data_root: Path) -> Path:
    if not (data_root / "planetoid" / "Cora" / "raw").is_dir():
        pytest.skip(f"Cora raw files not found under {data_root / 'planetoid'}")
    return data_root


def run_example(name: str, data_root: Path, cwd: Path, monkeypatch: pytest.MonkeyPatch,
                capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``examples/NAME``'s ``main(["--smoke", *args])`` from ``cwd``: what it printed."""
    monkeypatch.setenv("GNNTRAIN_DATA", str(data_root))
    monkeypatch.chdir(cwd)
    example = runpy.run_path(str(REPO / "examples" / name), run_name=f"example_{Path(name).stem}")
    capsys.readouterr()
    example["main"](["--smoke", *args])
    return capsys.readouterr().out


def test_custom_pyg_model(ray_local: None, cora_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example("custom_pyg_model.py", cora_data, tmp_path, monkeypatch, capsys)
    m = re.search(r"on Cora, (\d+) workers: test accuracy (\d\.\d+)", out)
    assert m, out
    assert int(m.group(1)) == 2 and 0.0 <= float(m.group(2)) <= 1.0
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "GraphConvJK" in (run_dir / "model.json").read_text()
    # the model has layer(): evaluation was exact layer-wise inference
    assert '"eval_mode": "full"' in (run_dir / "metrics.jsonl").read_text()


def test_custom_loss(ray_local: None, cora_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    out = run_example("custom_loss.py", cora_data, tmp_path, monkeypatch, capsys)
    m = re.search(r"on Cora, (\d+) workers: test accuracy (\d\.\d+) \(train loss (\d+\.\d+)\)", out)
    assert m, out
    assert int(m.group(1)) == 2 and 0.0 <= float(m.group(2)) <= 1.0

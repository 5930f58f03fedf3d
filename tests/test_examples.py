"""The runnable examples, each at smoke size as a user runs it (a subprocess from a
directory of its own), joined to the test session's Ray through ``RAY_ADDRESS``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture
def cora_data(data_root: Path) -> Path:
    if not (data_root / "planetoid" / "Cora" / "raw").is_dir():
        pytest.skip(f"Cora raw files not found under {data_root / 'planetoid'}")
    return data_root


def run_example(name: str, data_root: Path, cwd: Path, env: dict[str, str], *args: str) -> str:
    """``python examples/NAME --smoke`` from ``cwd``, joined to the session's Ray."""
    env = {**env, "GNNTRAIN_DATA": str(data_root)}
    out = subprocess.run([sys.executable, str(REPO / "examples" / name), "--smoke", *args],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"{name} failed:\n{out.stderr[-4000:]}"
    return out.stdout


def test_custom_pyg_model(cora_data: Path, tmp_path: Path, joined_env: dict[str, str]) -> None:
    out = run_example("custom_pyg_model.py", cora_data, tmp_path, joined_env)
    m = re.search(r"on Cora, (\d+) workers: test accuracy (\d\.\d+)", out)
    assert m, out
    assert int(m.group(1)) == 2 and 0.0 <= float(m.group(2)) <= 1.0
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "GraphConvJK" in (run_dir / "model.json").read_text()
    # the model has layer(): evaluation was exact layer-wise inference
    assert '"eval_mode": "full"' in (run_dir / "metrics.jsonl").read_text()


def test_custom_loss(cora_data: Path, tmp_path: Path, joined_env: dict[str, str]) -> None:
    out = run_example("custom_loss.py", cora_data, tmp_path, joined_env)
    m = re.search(r"on Cora, (\d+) workers: test accuracy (\d\.\d+) \(train loss (\d+\.\d+)\)", out)
    assert m, out
    assert int(m.group(1)) == 2 and 0.0 <= float(m.group(2)) <= 1.0

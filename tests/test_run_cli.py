"""`python -m gnntrain.run` on bad input: exit 2, one line `error: ...` naming the field,
nothing started or written (like `python -m partition`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gnntrain.run import main
from gnntrain.rundir import RunDir
from tests.conftest import REPO

TINY = str(REPO / "datasets" / "synthetic-tiny.yaml")


def _args(tmp_path: Path, *extra: str) -> list[str]:
    return ["--config", TINY, "--no-progress", "--set", f"train.run_root={tmp_path / 'runs'}",
            "--set", f"partition.root={tmp_path / 'parts'}", *extra]


def _run_dir_without_checkpoint(tmp_path: Path) -> Path:
    from gnntrain.config import load_config

    run = RunDir.create(tmp_path / "old", "tiny")
    run.write_config(load_config(TINY))
    return run.path


CASES = {
    "zero workers": (["--workers", "0"], "--workers=0"),
    "parts != workers": (["--set", "partition.parts=3", "--set", "cluster.workers=2"], "partition.parts=3"),
    "resume a non-run": (["--resume", "{tmp}"], "not a run directory"),
    "resume without checkpoint": (["--resume", "{norun}"], "no checkpoint"),
    "malformed address": (["--address", "head-node"], "cluster.address='head-node'"),
    "address port out of range": (["--set", "cluster.address=10.0.0.1:99999"], "cluster.address"),
    "more CPUs than the machine": (["--set", "cluster.cpus_per_worker=4096"], "cluster.cpus_per_worker"),
    "unwritable run root": (["--set", "train.run_root={tmp}/file/runs"], "train.run_root"),
    "cuda without a GPU": (["--set", "train.device=cuda"], "train.device='cuda'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_exits_2_with_one_line(tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    if case == "cuda without a GPU" and torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the error under test cannot occur")
    extra, needle = CASES[case]
    (tmp_path / "file").write_text("not a directory")
    fill = {"tmp": str(tmp_path), "norun": str(_run_dir_without_checkpoint(tmp_path))
            if "{norun}" in extra else ""}
    argv = [a.format(**fill) for a in extra]
    rc = main(_args(tmp_path, *argv) if "--resume" not in argv else ["--no-progress", *argv])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert not (tmp_path / "parts").exists(), "nothing may be partitioned on bad input"
    runs = tmp_path / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "no run directory may be made on bad input"


def test_the_process_exits_2(tmp_path: Path) -> None:
    """The same through a real process: its exit status and its stderr, nothing else."""
    done = subprocess.run([sys.executable, "-m", "gnntrain.run", *_args(tmp_path, "--workers", "0")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: --workers=0: must be >= 1", done.stderr


def test_version_prints_pyprojects_version(capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"gnntrain {version}"

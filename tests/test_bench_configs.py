"""bench.configs without running anything: which configs are templates, which data is
absent (resolved as the loaders resolve it), the CLI line it runs, and the report rows
and checks it builds from a run's outcome."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench.configs import (
    DATASETS,
    OUT,
    RUNS,
    Plan,
    checks,
    command,
    is_template,
    plan,
    read_run,
    row,
)
from bench.harness.runs import Finished, run_limited
from bench.smoke import MODULES


def test_the_ogbn_configs_are_the_templates_and_ogbl_ddi_is_not() -> None:
    templates = sorted(p.stem for p in DATASETS.glob("*.yaml") if is_template(p))
    assert templates == ["ogbn-arxiv", "ogbn-papers100M", "ogbn-products"]
    assert not is_template(DATASETS / "ogbl-ddi.yaml")


def test_absent_data_is_named_at_the_path_the_loaders_resolve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNNTRAIN_DATA", str(tmp_path))
    arxiv = plan(DATASETS / "ogbn-arxiv.yaml", None)
    assert arxiv.template and arxiv.missing == (str(tmp_path / "ogbn_arxiv"),)
    email = plan(DATASETS / "email-eu-core.yaml", None)  # csv: edges and labels both count
    assert not email.template and email.missing == (
        str(tmp_path / "snap/email-Eu-core/email-Eu-core.txt"),
        str(tmp_path / "snap/email-Eu-core/email-Eu-core-department-labels.txt"))
    (tmp_path / "ogbn_arxiv").mkdir()
    assert plan(DATASETS / "ogbn-arxiv.yaml", 3) == Plan(stem="ogbn-arxiv", template=True, epochs=3, missing=())
    assert plan(DATASETS / "synthetic-tiny.yaml", None).missing == ()  # generated, no data path


def test_with_the_real_datasets_only_the_templates_lack_their_data(data_root: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GNNTRAIN_DATA", str(data_root))
    absent = sorted(p.stem for p in DATASETS.glob("*.yaml") if plan(p, None).missing)
    assert absent == ["ogbn-arxiv", "ogbn-papers100M", "ogbn-products"]


def test_the_command_is_the_cli_a_user_types_with_the_bench_dirs() -> None:
    assert command("cora", 4, None) == [
        sys.executable, "-m", "gnntrain.run", "--config", "datasets/cora.yaml", "--workers", "4",
        "--no-progress", "--set", f"train.run_root={RUNS / 'cora'}", "--set", f"partition.root={OUT / 'partitions'}"]
    assert command("cora", 2, 3)[-2:] == ["--set", "train.epochs=3"]


def fake_run(root: Path, summary: dict[str, object] | None, lines: int) -> None:
    run = root / "cora-20261201-120000"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps({"epoch": i}) + "\n" for i in range(lines)))
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))


def test_a_row_reports_the_summarys_metric_and_the_run(tmp_path: Path) -> None:
    fake_run(tmp_path, {"epochs": 2, "metric": "hits", "final": {"loss": 0.5, "val_hits": 0.3, "test_hits": 0.25}}, 2)
    summary, epochs = read_run(tmp_path)
    p = Plan(stem="ogbl-ddi", template=False, epochs=2, missing=())
    r = row(p, Finished(rc=0, seconds=12.34, peak_rss=3 * 2**30, left=0, workers=4), summary, epochs, 60.0,
            (1.0, 2.5))
    assert (r["status"], r["wall_s"], r["epochs"], r["metric"], r["val"], r["test"], r["loss"], r["peak_rss_mib"]) == (
        "ok", 12.3, 2, "hits", 0.3, 0.25, 0.5, 3072)
    assert (r["loadavg_before"], r["loadavg_after"], r["workers_seen"], r["workers_left"]) == (1.0, 2.5, 4, 0)
    assert checks([r])[0].ok and all(c.ok for c in checks([r]))


def test_a_timed_out_or_failed_run_fails_the_check_and_counts_its_metric_lines(tmp_path: Path) -> None:
    fake_run(tmp_path, None, 1)  # killed during epoch 2: no summary, one metrics line
    summary, epochs = read_run(tmp_path)
    assert summary is None and epochs == 1
    p = Plan(stem="cora", template=False, epochs=40, missing=())
    timed_out = row(p, Finished(rc=None, seconds=61.0, peak_rss=0, left=2), summary, epochs, 60.0, (0.0, 0.0))
    failed = row(p, Finished(rc=2, seconds=5.0, peak_rss=0, left=0), None, 0, 60.0, (0.0, 0.0))
    assert timed_out["status"] == "timed out (over 1 min)" and failed["status"] == "failed rc 2"
    ran, left, skipped = checks([timed_out, failed])
    assert not ran.ok and "cora (timed out" in ran.detail and "1/40 epochs" in ran.detail
    assert not left.ok and left.detail == "cora: 2"
    assert skipped.ok


def test_a_skipped_template_passes_but_a_skipped_config_with_absent_data_fails() -> None:
    template = row(Plan(stem="ogbn-arxiv", template=True, epochs=20, missing=("/d/ogbn_arxiv",)),
                   None, None, 0, 60.0, (0.0, 0.0))
    assert template["status"] == "skipped: template, data not prepared here: /d/ogbn_arxiv"
    cora = row(Plan(stem="cora", template=False, epochs=40, missing=("/d/planetoid",)), None, None, 0, 60.0, (0.0, 0.0))
    assert cora["status"] == "skipped: data absent: /d/planetoid"
    ok = row(Plan(stem="synthetic-tiny", template=False, epochs=2, missing=()),
             Finished(rc=0, seconds=1.0, peak_rss=0, left=0), {"epochs": 2, "final": {}}, 2, 60.0, (0.0, 0.0))
    assert [c.ok for c in checks([template, ok])] == [True, True, True]
    assert [c.ok for c in checks([template, cora, ok])] == [True, True, False]


def test_bench_smoke_runs_the_configs_smoke() -> None:
    assert "configs" in MODULES


def test_past_its_limit_a_run_is_killed_with_every_process_of_its_tree(tmp_path: Path) -> None:
    # the grandchild leaves the process group (as Ray's workers do): killing the group misses
    # it. A shell starts it (milliseconds even on a loaded machine, where a Python child may
    # not reach its first line within the limit): `setsid` in a non-interactive shell's
    # background job is no group leader, so it runs `sleep` in a new session without forking
    pid_file = tmp_path / "grandchild.pid"
    script = f"setsid sleep 60 & echo $! > {shlex.quote(str(pid_file))}; sleep 60"
    done = run_limited(["sh", "-c", script], limit_s=1.5, sample_s=0.2)
    assert done.rc is None and done.seconds > 1.5 and done.peak_rss > 0  # killed at its limit, not exited
    pid = int(pid_file.read_text())
    assert gone_within(pid, 5.0), f"the grandchild {pid} outlived the run's limit"


def gone_within(pid: int, seconds: float) -> bool:
    """Whether ``pid`` is gone (or a zombie: dead, waiting to be reaped) within ``seconds``."""
    end = time.monotonic() + seconds
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.1)

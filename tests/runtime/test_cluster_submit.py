"""The README's cluster recipe, end to end: `ray start --head`, `ray job submit`, stop it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from tests.conftest import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_head(temp_dir: str, head: subprocess.Popen[str]) -> None:
    """Stop only the processes of the head this test started (never a bare `ray stop`)."""
    try:
        os.killpg(head.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        head.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(head.pid, signal.SIGKILL)
    for p in psutil.process_iter(["cmdline"]):
        try:
            if temp_dir in " ".join(p.info["cmdline"] or []):
                p.kill()
        except psutil.Error:
            continue


def test_ray_job_submit_runs_and_writes_report(tmp_path: Path) -> None:
    ray_bin = str(Path(sys.executable).parent / "ray")
    temp_dir = tempfile.mkdtemp(prefix="rh-", dir="/tmp")
    gcs, dash, agent, agent_grpc, env_agent, client, metrics = (_free_port() for _ in range(7))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled",
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    env.pop("RAY_ADDRESS", None)
    head = subprocess.Popen(
        [ray_bin, "start", "--head", "--block", f"--port={gcs}", "--num-cpus=2",
         "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", f"--temp-dir={temp_dir}",
         "--include-dashboard=true", "--disable-usage-stats",
         # every port of its own: the session's other Ray instance holds the defaults
         f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
         f"--runtime-env-agent-port={env_agent}", f"--ray-client-server-port={client}",
         f"--metrics-export-port={metrics}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    runs = tmp_path / "runs"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", dash), timeout=1):
                    break
            except OSError:
                assert head.poll() is None, "ray start --head exited"
                time.sleep(1)
        submit = (
            [ray_bin, "job", "submit", "--address", f"http://127.0.0.1:{dash}", "--working-dir", str(REPO),
             "--", sys.executable, "-m", "gnntrain.run", "--config", "datasets/synthetic-tiny.yaml",
             "--workers", "2", "--address", "auto", "--no-progress", "--set", "train.epochs=1",
             "--set", f"train.run_root={runs}", "--set", f"partition.root={tmp_path / 'parts'}"])
        for _ in range(30):  # the dashboard answers before its job agent registers
            job = subprocess.run(submit, env=env, capture_output=True, text=True, timeout=240, cwd=REPO)
            if "No available agent" not in job.stdout + job.stderr:
                break
            time.sleep(2)
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
        assert "succeeded" in (job.stdout + job.stderr)
        run_dirs = list(runs.iterdir())
        assert len(run_dirs) == 1
        for name in ("summary.json", "comm.json", "metrics.jsonl", "partition.json"):
            assert (run_dirs[0] / name).is_file()
    finally:
        _stop_head(temp_dir, head)
        shutil.rmtree(temp_dir, ignore_errors=True)

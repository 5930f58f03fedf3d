"""The README's cluster recipe, end to end, locked: a head started with token
authentication (``RAY_AUTH_MODE=token`` and a token from ``ray get-auth-token --generate``),
its dashboard on 127.0.0.1; a job submitted without the token is refused and never runs,
the same job with the token succeeds and writes its report; only that head is stopped.
And the embedded instance of a plain run, locked with a token of the process's own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from gnntrain.runtime.cluster import AUTH_ENV, embedded_auth
from tests.conftest import REPO

RAY_BIN = str(Path(sys.executable).parent / "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_head(temp_dir: str, head: subprocess.Popen[str]) -> None:
    """Stop only the processes of the head this test started (never a bare `ray stop`):
    SIGTERM to ``ray start --block``, which stops its raylet, GCS and dashboard and exits
    within seconds (SIGTERM to the whole process group instead leaves it waiting on its
    children for about half a minute); what is left after 20 s is killed."""
    head.terminate()
    try:
        head.wait(timeout=20)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in psutil.process_iter(["cmdline"]):
        try:
            if temp_dir in " ".join(p.info["cmdline"] or []):
                p.kill()
        except psutil.Error:
            continue


def _base_env() -> dict[str, str]:
    """This environment without any Ray auth setting or address of its own."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS" and k not in AUTH_ENV}
    return {**env, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO),
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}


def _generate_token(home: Path) -> Path:
    """``ray get-auth-token --generate`` with ``HOME=home``: the token file it writes."""
    out = subprocess.run([RAY_BIN, "get-auth-token", "--generate"], env={**_base_env(), "HOME": str(home)},
                         capture_output=True, text=True, timeout=60, check=True)
    path = home / ".ray" / "auth_token"
    assert out.stdout.strip() == path.read_text().strip() and len(out.stdout.strip()) >= 32
    return path


def _start_head(env: dict[str, str], temp_dir: str) -> tuple[subprocess.Popen[str], int]:
    """``ray start --head`` on free ports of its own, the dashboard on 127.0.0.1; retried on
    fresh ports when a port was taken in between. Returns the head and its dashboard port."""
    for _attempt in range(3):
        gcs, dash, agent, agent_grpc, env_agent, client, metrics = (_free_port() for _ in range(7))
        head = subprocess.Popen(
            [RAY_BIN, "start", "--head", "--block", f"--port={gcs}", "--num-cpus=2",
             "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}", f"--temp-dir={temp_dir}",
             "--include-dashboard=true", "--disable-usage-stats",
             # every port of its own: the session's other Ray instance holds the defaults
             f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
             f"--runtime-env-agent-port={env_agent}", f"--ray-client-server-port={client}",
             f"--metrics-export-port={metrics}"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and head.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", dash), timeout=1):
                    return head, dash
            except OSError:
                time.sleep(1)
        assert head.poll() is not None, f"the dashboard did not answer on 127.0.0.1:{dash} within 120 s"
        _stop_head(temp_dir, head)  # it exited: most likely a port was taken; new ports
    raise AssertionError("ray start --head exited three times (see the logs under its --temp-dir)")


def _post_job(dash: int, headers: dict[str, str], marker: Path) -> int:
    """POST a job to the Jobs API as any HTTP client can; the HTTP status."""
    body = json.dumps({"entrypoint": f"touch {marker}"}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{dash}/api/jobs/", data=body, method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_token_locked_head_refuses_strangers_and_runs_the_owners_job(tmp_path: Path) -> None:
    temp_dir = tempfile.mkdtemp(prefix="rh-", dir="/tmp")  # short: Ray's socket paths are limited
    admin_home, stranger_home = tmp_path / "admin", tmp_path / "stranger"
    stranger_home.mkdir()
    token_file = _generate_token(admin_home)
    token = token_file.read_text().strip()
    owner = {**_base_env(), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file)}
    stranger = {**_base_env(), "HOME": str(stranger_home)}  # no token anywhere
    head, dash = _start_head(owner, temp_dir)
    runs, marker = tmp_path / "runs", tmp_path / "stranger-ran"
    try:
        job_cmd = ["--", sys.executable, "-m", "gnntrain.run", "--config", "datasets/synthetic-tiny.yaml",
                   "--workers", "1", "--address", "auto", "--no-progress", "--set", "train.epochs=1",
                   "--set", f"train.run_root={runs}", "--set", f"partition.root={tmp_path / 'parts'}"]
        submit = [RAY_BIN, "job", "submit", "--address", f"http://127.0.0.1:{dash}", "--working-dir", str(REPO)]

        # strangers: no token, a wrong token, the ray CLI without a token
        assert _post_job(dash, {}, marker) == 401
        assert _post_job(dash, {"Authorization": "Bearer " + "0" * len(token)}, marker) == 403
        refused = subprocess.run([*submit, "--", "touch", str(marker)], env=stranger, capture_output=True,
                                 text=True, timeout=120, cwd=REPO)
        assert refused.returncode != 0
        assert "Authentication required" in refused.stdout + refused.stderr, refused.stderr[-2000:]

        # the owner, with the token
        for _ in range(30):  # the dashboard answers before its job agent registers
            job = subprocess.run([*submit, *job_cmd], env=owner, capture_output=True, text=True,
                                 timeout=300, cwd=REPO)
            if "No available agent" not in job.stdout + job.stderr:
                break
            time.sleep(2)
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:]
        assert "succeeded" in (job.stdout + job.stderr)
        run_dirs = list(runs.iterdir())
        assert len(run_dirs) == 1
        for name in ("summary.json", "comm.json", "metrics.jsonl", "partition.json"):
            assert (run_dirs[0] / name).is_file()
        assert not marker.exists()  # none of the strangers' jobs ever ran
    finally:
        _stop_head(temp_dir, head)
        shutil.rmtree(temp_dir, ignore_errors=True)


EMBEDDED = """
import json, os, subprocess, sys
import ray
from gnntrain.config import ClusterConfig
from gnntrain.runtime.cluster import ray_session

out = {}
for session in range(2):  # the second instance reuses the process's token (Ray caches it)
    with ray_session(ClusterConfig(num_cpus=1), 1):
        out[f"mode{session}"] = os.environ.get("RAY_AUTH_MODE")
        out[f"worker{session}"] = ray.get(ray.remote(lambda: os.environ.get("RAY_AUTH_MODE")).remote())
        if session == 0:
            # no token; one connection try (Ray retries a refused GCS connection for 20 s)
            env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
            env["RAY_gcs_server_port_wait_time_s"] = "1"
            gcs = ray.get_runtime_context().gcs_address
            joined = subprocess.run([sys.executable, "-c", f"import ray; ray.init(address={gcs!r}); print('JOINED')"],
                                    env=env, capture_output=True, text=True, timeout=120)
            out["stranger"] = [joined.returncode, "JOINED" in joined.stdout, joined.stderr[-3000:]]
out["after"] = [os.environ.get("RAY_AUTH_MODE"), os.environ.get("RAY_AUTH_TOKEN")]
print(json.dumps(out))
"""


def test_embedded_ray_is_locked_with_a_token_of_its_own(tmp_path: Path) -> None:
    """A plain run's Ray listens on every interface: a process without the run's token is
    refused, the run's own workers work, two instances in one process both start, nothing is
    written to ``~/.ray`` and the environment is as it was afterwards."""
    home = tmp_path / "home"
    home.mkdir()
    got = subprocess.run([sys.executable, "-c", EMBEDDED], env={**_base_env(), "HOME": str(home)},
                         capture_output=True, text=True, timeout=400, cwd=REPO)
    assert got.returncode == 0, got.stderr[-3000:]
    out = json.loads(got.stdout.strip().splitlines()[-1])
    assert [out["mode0"], out["worker0"], out["mode1"], out["worker1"]] == ["token"] * 4
    code, joined, err = out["stranger"]
    assert code != 0 and not joined
    assert "Authentication token is missing or incorrect" in err, err
    assert out["after"] == [None, None]
    assert not (home / ".ray").exists()


def test_an_auth_mode_the_user_set_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    with embedded_auth():
        assert os.environ["RAY_AUTH_MODE"] == "disabled" and "RAY_AUTH_TOKEN" not in os.environ

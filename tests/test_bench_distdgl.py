"""bench.distdgl's measuring parts: time to an accuracy, and the peak-RSS poller that tells
DistDGL servers and trainers (and gnntrain workers) apart among this process's children."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from bench.distdgl import PEER, peak_rss, time_to

# a child that holds ~200 MiB for a while; the trailing argument puts the peer's file name
# in its command line, as the DistDGL processes have it
HOLD = ("import time; b = bytearray(200 * 2**20); b[::4096] = b'x' * len(b[::4096]); "
        "time.sleep(3)")


def test_time_to_sums_epochs_up_to_the_first_that_reaches_the_target() -> None:
    assert time_to([2.0, 1.0, 1.5, 1.0], [0.5, 0.7, 0.9, 0.95], 0.9) == 4.5
    assert time_to([2.0, 1.0], [0.5, 0.91], 0.9) == 3.0
    assert time_to([2.0, 1.0], [0.5, 0.6], 0.9) is None


def test_peak_rss_names_dgl_roles_and_sees_their_peak() -> None:
    env_server = {**os.environ, "DGL_ROLE": "server", "DGL_SERVER_ID": "1"}
    env_trainer = {**os.environ, "DGL_ROLE": "client", "RANK": "0"}
    with peak_rss(every_s=0.1) as seen:
        procs = [
            subprocess.Popen([sys.executable, "-c", HOLD, PEER.name], env=env_server),
            subprocess.Popen([sys.executable, "-c", HOLD, PEER.name], env=env_trainer),
            subprocess.Popen([sys.executable, "-c", HOLD], env=env_server)]  # not a peer: ignored
        for p in procs:
            p.wait(timeout=60)
        time.sleep(0.3)
    roles = {seen[p.pid][0]: seen[p.pid][1] for p in procs if p.pid in seen}
    assert set(roles) == {"dgl:server:1", "dgl:trainer:0"}
    assert procs[2].pid not in seen
    assert all(kib >= 200 * 1024 for kib in roles.values()), roles

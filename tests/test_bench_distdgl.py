"""bench.distdgl's measuring parts: time to an accuracy, and the peak-RSS poller that tells
DistDGL servers and trainers (and gnntrain workers) apart among this process's children."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.distdgl import PEER, seed_summary, separability, time_to
from bench.harness.memory import peak_rss
from gnntrain.config import SyntheticConfig
from gnntrain.data import generate

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
    roles = {seen.by_pid[p.pid][0]: seen.peak(p.pid) for p in procs if p.pid in seen.by_pid}
    assert set(roles) == {"dgl:server:1", "dgl:trainer:0"}
    assert procs[2].pid not in seen.by_pid
    assert all(b >= 200 * 2**20 for b in roles.values()), roles


def test_seed_summary_gives_each_seed_and_the_mean_against_distdgl() -> None:
    def r(label: str, acc: float) -> dict[str, object]:
        return {"label": label, "test_acc": acc, "epoch_s": 1.0}

    s = seed_summary({0: {"distdgl": r("D", 0.55), "fp32": r("G", 0.47)},
                      1: {"distdgl": r("D", 0.60), "fp32": r("G", 0.70)}})
    assert s["distdgl"]["test_acc"] == [0.55, 0.60]
    assert "acc_points_vs_distdgl" not in s["distdgl"]
    assert s["fp32"]["acc_points_vs_distdgl"] == pytest.approx([-8.0, 10.0])
    assert s["fp32"]["acc_points_vs_distdgl_mean"] == pytest.approx(1.0)
    assert (s["fp32"]["min"], s["fp32"]["max"]) == (0.47, 0.70)
    assert s["fp32"]["mean"] == pytest.approx(0.585)


def test_separability_reads_the_classes_off_features_and_neighbours() -> None:
    exact = separability(generate(SyntheticConfig(nodes=2000, classes=4, feature_noise=0.0,
                                                  feature_mismatch=0.0)))
    assert exact["own_features"] == 1.0  # every row is its class's centroid
    mixed = separability(generate(SyntheticConfig(nodes=2000, classes=4, feature_noise=0.0,
                                                  feature_mismatch=0.5, homophily=0.9)))
    assert 0.4 < mixed["own_features"] < 0.7 < mixed["hop1_mean"]

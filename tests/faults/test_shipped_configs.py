"""Every shipped config starts with ``--workers 4``: it resolves, passes the start-up
checks of an embedded Ray on this machine, and no wall-clock limit can cut a long phase
short (only stall detection, by progress, can end a phase)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnntrain.api import check_startable, resolve_config

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "datasets").glob("*.yaml"))


def test_the_shipped_configs_are_found() -> None:
    assert len(CONFIGS) >= 5, CONFIGS


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_starts_with_four_workers(path: Path, tmp_path: Path) -> None:
    cfg, _ = resolve_config(str(path), [f"train.run_root={tmp_path / 'runs'}"], workers=4)
    check_startable(cfg, single_process=False)
    cc = cfg.cluster
    assert cc.workers == 4 and cfg.partition.parts == 4
    assert cc.epoch_timeout_s is None, f"{path.name}: a hard epoch limit ({cc.epoch_timeout_s} s) cuts long epochs"
    assert cc.stall_timeout_s >= 120, f"{path.name}: stall limit {cc.stall_timeout_s} s is short for a loaded machine"

"""``faults.schedule``: several faults, one per attempt of the run.

Entry i fires on attempt i only (the attempt after i recoveries), at its (epoch, step)
on its rank. These tests check which hook each (attempt, rank) gets and every refusal;
the run of a schedule of four faults of two kinds on Ray, ending in the undisturbed run's
final state, is tests/faults/test_recovery.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gnntrain.config import ConfigError, RunConfig
from gnntrain.runtime.faults import FaultInjector
from tests.runtime.helpers import tiny_cfg

TWO = "faults.schedule=[{kind: raise, rank: 0, epoch: 1, step: 2}, {kind: exit, rank: 1, epoch: 2, step: 1}]"


def two_faults(tmp_path: Path, *extra: str) -> RunConfig:
    return tiny_cfg(tmp_path, "train.max_failures=2", TWO, *extra, workers=2)


def test_hooks_pick_the_entry_of_the_attempt_on_its_rank(tmp_path: Path) -> None:
    faults = two_faults(tmp_path).faults
    picked = {(attempt, rank): [(h.cfg.kind, h.cfg.epoch, h.cfg.step) for h in
                                FaultInjector.hooks(faults, rank, attempt)]
              for attempt in range(3) for rank in range(2)}
    assert picked == {(0, 0): [("raise", 1, 2)], (0, 1): [],
                      (1, 0): [], (1, 1): [("exit", 2, 1)],
                      (2, 0): [], (2, 1): []}  # the schedule is spent: no fault


def test_a_scheduled_hook_fires_at_its_point_on_its_attempt(tmp_path: Path) -> None:
    [hook] = FaultInjector.hooks(two_faults(tmp_path).faults, rank=0, attempt=0)
    hook(1, 1)
    hook(2, 2)  # a later point: nothing
    with pytest.raises(RuntimeError, match="injected fault: worker 0 raises at epoch 1 step 2"):
        hook(1, 2)


def test_the_single_fault_is_served_as_before(tmp_path: Path) -> None:
    faults = tiny_cfg(tmp_path, "faults.kind=raise", "faults.rank=1", "faults.times=2", workers=2).faults
    assert [len(FaultInjector.hooks(faults, r, a)) for a in range(3) for r in range(2)] == [0, 1, 0, 1, 0, 1]
    [hook] = FaultInjector.hooks(faults, 1, 2)
    hook(0, 0)  # attempt 2 is past `times`: the hook stays quiet


@pytest.mark.parametrize(("extra", "message"), [
    (("faults.kind=exit",), r"faults.kind='exit' together with faults.schedule \(2 entries\)"),
    (("faults.schedule=[{kind: raise, epoch: 2}, {kind: exit, epoch: 2}]",),
     r"faults.schedule\[1\].epoch=2 after faults.schedule\[0\].epoch=2: epochs must strictly increase"),
    (("faults.schedule=[{kind: stall, rank: 2, epoch: 1}]",),
     r"faults.schedule\[0\].rank=2 but cluster.workers=2: .*rank 0..1"),
    (("train.max_failures=1",),
     r"train.max_failures=1 but faults.schedule has 2 entries: each entry is one failure"),
    (("faults.schedule=[{kind: slow, epoch: 1}]",), r"faults.schedule.0.kind"),
])
def test_a_bad_schedule_is_refused_before_any_work(tmp_path: Path, extra: tuple[str, ...],
                                                   message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        two_faults(tmp_path, *extra)


def test_the_single_fault_must_strike_a_worker_that_exists(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"faults.rank=2 but cluster.workers=2"):
        tiny_cfg(tmp_path, "faults.kind=exit", "faults.rank=2", workers=2)
    tiny_cfg(tmp_path, "faults.rank=5", workers=2)  # kind none: the rank is never used

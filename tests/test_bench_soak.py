"""bench.soak's plan: the fault schedule it builds is one the config accepts."""

from __future__ import annotations

from pathlib import Path

from bench.soak import group_growth, plan, soak_config
from gnntrain.api import override_items


def test_the_plan_rotates_kinds_and_ranks_every_few_epochs() -> None:
    epochs, faults = plan(epoch_s=6.0, minutes=3, every_min=1, workers=4)
    assert epochs == 30
    assert [(f["kind"], f["rank"], f["epoch"], f["step"]) for f in faults] == [
        ("raise", 0, 10, 1), ("exit", 1, 20, 1)]
    epochs, faults = plan(epoch_s=1.0, minutes=0.25, every_min=0.05, workers=4)
    assert epochs == 15 and [f["epoch"] for f in faults] == [3, 6]  # the last 7 epochs undisturbed
    assert [f["kind"] for f in faults] == ["raise", "exit"]
    assert [f["rank"] for f in faults] == [0, 1]
    epochs, faults = plan(epoch_s=1.0, minutes=11 / 60, every_min=2 / 60, workers=2)  # the smoke's plan
    assert epochs == 11 and [f["epoch"] for f in faults] == [2, 4]


def test_the_planned_schedule_is_a_valid_config() -> None:
    epochs, faults = plan(epoch_s=1.0, minutes=0.25, every_min=0.05, workers=4)
    cfg = soak_config("synthetic-tiny.yaml", 4, "test").with_overrides(override_items(
        {"faults.schedule": faults, "train.epochs": epochs, "train.max_failures": len(faults)}))
    assert [f.epoch for f in cfg.faults.schedule] == [3, 6]


def test_group_growth_measures_each_set_of_worker_processes_apart() -> None:
    # faults at 0-based epochs 7 and 9: groups are 1-based epochs 1-7, 8-9, 10-16
    mean = [50, 80, 90, 100, 120, 120, 120, 60, 70, 50, 80, 90, 100, 100, 104, 105]
    rows = [{"epoch": e, "rss_avg_mib": v} for e, v in enumerate(mean, start=1)]
    faults = [{"epoch": 7}, {"epoch": 9}]
    # each measured group from its fourth epoch; the 2-epoch group is not measured
    assert group_growth(rows, faults) == [1.2, (100 + 104 + 105) / 3 / 100]
    assert group_growth(rows[:15], faults) == [1.2]  # the last group, 6 epochs so far, is too short
    assert group_growth(rows[:7], []) == [1.2]  # no fault: the whole run is one group


def test_watch_averages_the_samples_each_epoch_ran(tmp_path: Path) -> None:
    """The epoch's figure is the mean over its samples, not the last one before its line."""
    from bench.soak import MIB, Watch

    w = Watch(tmp_path)
    done = w.tick({1: 100 * MIB, 2: 300 * MIB}, {}, 0, 0)      # epoch 1 running: mean 200
    done = w.tick({1: 400 * MIB, 2: 400 * MIB}, {1: 100 * MIB, 2: 300 * MIB}, done, 0)  # 400
    done = w.tick({1: 900 * MIB}, {1: 400 * MIB, 2: 400 * MIB}, done, 1)  # epoch 1's line seen
    assert done == 1
    e1 = w.epochs[1]
    assert (e1["rss_avg_mib"], e1["rss_mean_mib"], e1["live_workers"]) == (300, 400, 2)
    w.tick({1: 700 * MIB}, {1: 900 * MIB}, done, 2)                      # epoch 2: one sample, 900
    assert w.epochs[2]["rss_avg_mib"] == 900

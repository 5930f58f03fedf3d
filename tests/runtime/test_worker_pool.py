"""Worker actors kept between runs (:func:`gnntrain.reuse_workers`): a kept worker trains
bit for bit like a fresh one, a group of another shape frees the resources idle ones
hold, a failed group is never kept, and nothing is kept outside the block."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.ray_group import WorkerFailure
from gnntrain.runtime.worker_pool import POOL, reuse_workers
from tests.conftest import SESSION_CPUS, make_graph
from tests.runtime.helpers import assert_same_state, final_state, tiny_cfg
from tests.runtime.test_failures import assert_nothing_left, wait_dead

GRAPH = make_graph(200, seed=3)


def test_kept_worker_trains_like_a_fresh_one_and_gives_way_to_another_shape(own_pool: float,
                                                                            tmp_path: Path) -> None:
    """A 1-worker run with seed 1 leaves its worker; the next 1-worker run (seed 0) takes
    that process, loads its own config and ends bit for bit where one process does
    (1 Ray worker = one process). A 2-worker run that needs every CPU the groups held aside
    leave (the idle worker's included) then starts: the idle worker is killed to make room,
    and the 2-worker group is kept instead."""
    first = run_training(tiny_cfg(tmp_path / "a", "train.seed=1"), graph=GRAPH, progress=False)
    [kept] = POOL.idle
    again = run_training(tiny_cfg(tmp_path / "b"), graph=GRAPH, progress=False)
    [still] = POOL.idle
    assert still.pids == kept.pids, "the second run started a new worker process"
    alone = run_training(tiny_cfg(tmp_path / "c"), single_process=True, graph=GRAPH, progress=False)
    assert_same_state(final_state(again), final_state(alone), world=1)
    assert final_state(first)["rank_digests"] != final_state(again)["rank_digests"], \
        "seeds 1 and 0 ended at the same state: the kept worker did not take the new config"
    half = (SESSION_CPUS - own_pool) / 2
    run_training(tiny_cfg(tmp_path / "d", f"cluster.cpus_per_worker={half}", workers=2), graph=GRAPH,
                 progress=False)
    [two] = POOL.idle
    assert two.key[2:4] == (2, (half, half))
    assert wait_dead(set(kept.pids)) == set(), "the idle 1-worker group outlived its release"


def test_failed_group_is_never_kept(own_pool: float, tmp_path: Path) -> None:
    cfg = tiny_cfg(tmp_path, "faults.kind=raise", "faults.rank=1", "faults.epoch=0", "faults.step=1",
                   workers=2)
    with pytest.raises(WorkerFailure):
        run_training(cfg, graph=GRAPH, progress=False)
    assert POOL.idle == []
    assert_nothing_left()


def test_nothing_kept_outside_the_block(own_pool: float, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(POOL, "depth", 0)  # as if the session fixture had not opened a block
    run_training(tiny_cfg(tmp_path), graph=GRAPH, progress=False)
    assert POOL.idle == []
    assert_nothing_left()
    monkeypatch.undo()
    with reuse_workers() as pool:
        assert pool.depth == 2
    assert pool.depth == 1, "leaving an inner block must keep the outer one open"

"""Worker actors kept between runs (:func:`gnntrain.reuse_workers`): a kept worker trains
bit for bit like a fresh one, a run of fewer workers runs in a larger kept group, a group
of another shape frees the resources idle ones hold, a failed run's sound workers are kept
(with a hole the next run fills), and nothing is kept outside the block."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.ray_group import WorkerFailure
from gnntrain.runtime.worker_pool import POOL, reuse_workers
from tests.conftest import SESSION_CPUS, make_graph
from tests.runtime.helpers import assert_same_state, final_state, tiny_cfg, worker_actors_started
from tests.runtime.test_failures import assert_nothing_left, wait_dead

GRAPH = make_graph(200, seed=3)


def test_kept_worker_trains_like_a_fresh_one_and_gives_way_to_another_shape(own_pool: float,
                                                                            tmp_path: Path) -> None:
    """A 2-worker run with seed 1 leaves its group; a 1-worker run (seed 0) takes that group
    and runs in its first rank, loads its own config and ends bit for bit where one process
    does (1 Ray worker = one process); the group goes back whole, and the next 2-worker run
    takes the same two processes. A 2-worker run that needs every CPU the groups held aside
    leave then starts: the idle group is killed to make room, and the new group is kept
    instead."""
    started = worker_actors_started()
    first = run_training(tiny_cfg(tmp_path / "a", "train.seed=1", workers=2), graph=GRAPH, progress=False)
    [kept] = POOL.idle
    one = run_training(tiny_cfg(tmp_path / "b"), graph=GRAPH, progress=False)
    [still] = POOL.idle
    assert (still.key, still.pids) == (kept.key, kept.pids), "the 1-worker run did not go back into the group"
    alone = run_training(tiny_cfg(tmp_path / "c"), single_process=True, graph=GRAPH, progress=False)
    assert_same_state(final_state(one), final_state(alone), world=1)
    again = run_training(tiny_cfg(tmp_path / "d", workers=2), graph=GRAPH, progress=False)
    [still] = POOL.idle
    assert still.pids == kept.pids, "the second 2-worker run started new worker processes"
    assert worker_actors_started() - started == 2
    assert final_state(first)["rank_digests"] != final_state(again)["rank_digests"], \
        "seeds 1 and 0 ended at the same state: the kept workers did not take the new config"
    half = (SESSION_CPUS - own_pool) / 2
    run_training(tiny_cfg(tmp_path / "e", f"cluster.cpus_per_worker={half}", workers=2), graph=GRAPH,
                 progress=False)
    [two] = POOL.idle
    assert two.key[2:4] == (2, (half, half))
    assert wait_dead({p for p in kept.pids if p is not None}) == set(), "the idle group outlived its release"


def test_recovery_and_failure_in_a_larger_group_keep_its_sound_workers(own_pool: float,
                                                                        tmp_path: Path) -> None:
    """A 2-worker run in the first ranks of a kept 3-worker group loses worker 1 (killed
    from outside in its second epoch) and recovers: only rank 1 starts anew, and the group
    goes back whole (rank 0's and the waiting rank 2's processes the same). A drill in the
    same group whose worker 1 raises fails for good: worker 1 is killed and the group goes
    back with a hole at rank 1, ranks 0 and 2 the same processes. The next 2-worker run
    starts one worker, in the hole, and ends bit for bit where the recovered run did (a
    recovery ends where an undisturbed run does); the group goes back whole."""
    run_training(tiny_cfg(tmp_path / "a", workers=3), graph=GRAPH, progress=False)
    [three] = POOL.idle
    runs, victim = tmp_path / "b" / "runs", three.pids[1]
    assert victim is not None

    def kill_rank_1_in_epoch_1() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not list(runs.glob("*/metrics.jsonl")):
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)

    killer = threading.Thread(target=kill_rank_1_in_epoch_1, daemon=True)
    killer.start()
    # every step of rank 1 takes half a second more: the run is still training at the kill
    recovered = run_training(tiny_cfg(tmp_path / "b", "faults.kind=slow", "faults.rank=1", "faults.seconds=0.5",
                                      "train.epochs=3", "train.max_failures=1", workers=2),
                             graph=GRAPH, progress=False)
    killer.join(timeout=5)
    assert [f["restarted_ranks"] for f in recovered["failures"]] == [[1]], recovered["failures"]
    [back] = POOL.idle
    assert back.key == three.key
    assert (back.pids[0], back.pids[2]) == (three.pids[0], three.pids[2]) and back.pids[1] != three.pids[1]
    fault = ("faults.kind=raise", "faults.rank=1", "faults.epoch=0", "faults.step=1")
    with pytest.raises(WorkerFailure):
        run_training(tiny_cfg(tmp_path / "c", *fault, workers=2), graph=GRAPH, progress=False)
    [holed] = POOL.idle
    assert holed.key == three.key and holed.pids == [back.pids[0], None, back.pids[2]], holed.pids
    assert wait_dead({p for p in back.pids if p is not None} - set(holed.pids)) == set(), "worker 1 outlived the drill"
    assert_nothing_left()
    started = worker_actors_started()
    filled = run_training(tiny_cfg(tmp_path / "d", "train.epochs=3", workers=2), graph=GRAPH, progress=False)
    assert worker_actors_started() - started == 1, "a run in a group with a hole starts only the hole's worker"
    [whole] = POOL.idle
    assert None not in whole.pids and (whole.pids[0], whole.pids[2]) == (back.pids[0], back.pids[2])
    assert_same_state(final_state(filled), final_state(recovered), world=2)


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

"""Evaluation shows progress: the sampled evaluation counts its batches in the worker's
progress state (the one the stall detection polls), and the coordinator's bar is fed
from those answers."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from tqdm import tqdm

from gnntrain.runtime.driver import batch_watch
from gnntrain.runtime.group import LocalGroup
from gnntrain.runtime.part_access import Progress
from gnntrain.tasks import build_task
from partition import Part
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg


class Recording(Progress):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[dict[str, Any]] = []

    def set(self, phase: str, **where: int) -> None:
        super().set(phase, **where)
        self.seen.append(dict(self.state))


def test_sampled_evaluation_counts_every_batch_of_both_splits(tmp_path: Path) -> None:
    cfg = tiny_cfg(tmp_path, "sampler.batch_size=8", "train.eval=sampled")
    graph = make_graph(200, seed=1)
    task = build_task(cfg.task.kind, dict(cfg.task.options))
    group = LocalGroup(cfg, graph, cfg.model.arch, task)
    rec = Recording()
    group.worker.access.progress = rec
    group.call("eval_sampled", 0, phase="evaluation")
    part = Part.whole_graph(graph)
    want = sum(len(task.eval_batches(part, s, 8)) for s in ("val", "test"))
    counts = [s for s in rec.seen if "total" in s]
    assert want > 2 and [s["total"] for s in counts] == [want] * want
    assert [s["done"] for s in counts] == list(range(want))  # one per batch, in order
    assert rec.seen[-1]["phase"] == "idle"


def test_the_bar_sums_the_workers_counters() -> None:
    bar = tqdm(total=None, file=io.StringIO(), disable=False)
    watch = batch_watch(bar)
    watch([{"rank": 0, "phase": "eval", "done": 3, "total": 10}, {"rank": 1, "phase": "starting"}])
    assert (bar.n, bar.total) == (3, 10)
    watch([{"rank": 0, "phase": "eval", "done": 7, "total": 10},
           {"rank": 1, "phase": "eval", "done": 2, "total": 5}])
    assert (bar.n, bar.total) == (9, 15)
    watch([{"rank": 1, "phase": "not answering"}])  # a silent worker keeps its last count
    assert (bar.n, bar.total) == (9, 15)

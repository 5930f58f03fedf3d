"""A worker's training role: the model, its optimizer, and one epoch of synchronous steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from gnntrain.engine import AllReduce, locality_order, make_optimizer, mix_seed, run_epoch
from gnntrain.models import block_needs
from gnntrain.precision import resolve_precision
from gnntrain.runtime.part_access import PartAccess
from gnntrain.tasks import SeedBatch, Task

StepHook = Callable[[int, int], None]
"""Called after every step with (epoch, step); e.g. fault injection in drills and tests."""


class Trainer:
    """Trains ``model`` for ``task`` over one worker's part; gradients summed by ``allreduce``."""

    def __init__(self, access: PartAccess, model: torch.nn.Module, task: Task,
                 allreduce: AllReduce, step_hooks: Sequence[StepHook] = ()) -> None:
        self.access = access
        self.cfg = access.cfg
        self.model = model
        self.task = task
        self._allreduce = allreduce
        self.step_hooks = list(step_hooks)
        t = self.cfg.train
        self.opt = make_optimizer(model, t.optimizer, t.lr, t.weight_decay)
        self.precision = resolve_precision(t.precision, access.device)
        self._order: np.ndarray | None = None

    def allreduce(self, t: torch.Tensor) -> torch.Tensor:
        self.access.comm.add_gradient(int(t.numel() * t.element_size()))
        return self._allreduce(t)

    def epoch_plan(self, epoch: int, steps: int) -> tuple[list[SeedBatch], list[int]]:
        """This worker's seed batches and sampling keys for ``epoch`` (same in every mode)."""
        a, seed = self.access, self.cfg.train.seed
        if self.cfg.sampler.seed_order == "locality" and self._order is None:
            train = np.asarray(self.task.eval_seeds(a.part, "train"), dtype=np.int64)
            self._order = locality_order(a.part.indptr, a.part.indices, a.start, train)
        batches = self.task.epoch_batches(a.part, steps, seed=seed, epoch=epoch, rank=a.rank,
                                          shuffle=self.cfg.sampler.shuffle, order=self._order)
        if len(batches) != steps:
            raise RuntimeError(f"task {self.task.name!r} made {len(batches)} batches for epoch "
                               f"{epoch}; every worker must run exactly {steps} steps")
        return batches, [mix_seed(seed, "sample", epoch, step) for step in range(steps)]

    def train_epoch(self, epoch: int, steps: int) -> dict[str, Any]:
        """Run exactly ``steps`` synchronous steps over this part's training examples."""
        a = self.access
        torch.manual_seed(mix_seed(self.cfg.train.seed, "dropout", epoch, a.rank))
        add_io = a.io_counters()  # before the prefetch thread starts sampling
        pipe = a.pipeline(self.task, *self.epoch_plan(epoch, steps), needs=block_needs(self.model))
        a.progress.set("train", epoch=epoch, step=0)

        def step_done(step: int) -> None:
            for hook in self.step_hooks:
                hook(epoch, step)
            a.progress.set("train", epoch=epoch, step=step + 1)

        stats = run_epoch(self.model, self.opt, self.task, pipe, self.allreduce, epoch,
                          on_step=step_done, device=a.device, table=a.embedding,
                          precision=self.precision, clip_norm=self.cfg.train.grad_clip_norm)
        a.progress.set("idle", epoch=epoch, step=steps)
        add_io(stats)
        return {"stats": stats.to_dict(), "comm": a.comm.take()}

    def state(self) -> dict[str, Any]:
        """Model and optimizer state on the CPU (checkpoints load on any device)."""
        model = {k: v.cpu() for k, v in self.model.state_dict().items()}
        opt = self.opt.state_dict()
        opt["state"] = {k: {n: (t.cpu() if torch.is_tensor(t) else t) for n, t in st.items()}
                        for k, st in opt["state"].items()}
        return {"model": model, "opt": opt}

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore a checkpoint's model and optimizer; one written for another model (a
        changed ``model.*`` width, depth or ``model.node_embedding.dim``) is refused by name."""
        have, saved = self.model.state_dict(), state["model"]
        misfits = [f"{k} {tuple(saved[k].shape)} vs {tuple(v.shape)}" for k, v in have.items()
                   if k in saved and saved[k].shape != v.shape]
        unmatched = sorted(set(have) ^ set(saved))
        if unmatched:
            misfits.append(f"only in one of them: {unmatched[:3]}")
        if misfits:
            raise ValueError(f"the checkpoint's model does not fit the configured model "
                             f"({'; '.join(misfits[:4])}): model.* (hidden, layers, arch, "
                             "node_embedding.dim) differs from the run that wrote it; resume with "
                             "the run's own config")
        self.model.load_state_dict(saved)
        self.opt.load_state_dict(state["opt"])

"""One worker, free of Ray: a part, and the roles that work on it.

:class:`Worker` is the same object in the single-process reference trainer (one part
that is the whole graph, no peers, a no-op all-reduce), in the in-process loopback
group, and inside every Ray worker actor (its own part, peers reached through Ray,
gloo/NCCL all-reduce). Keeping one code path is what makes "1 worker equals single
process" hold exactly. Its roles: :class:`~gnntrain.runtime.part_access.PartAccess`
(sampler, features, cache, bytes), :class:`~gnntrain.runtime.trainer.Trainer`,
:class:`~gnntrain.runtime.evaluator.Evaluator`, :class:`~gnntrain.runtime.server.PeerServer`.

:data:`CALLS` and :data:`SERVE_CALLS` are the only list of what a coordinator and a peer
may ask of a worker; every group dispatches through :meth:`Worker.call` /
:meth:`Worker.serve` by name.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnntrain.checkpoint import state_digest
from gnntrain.config import RunConfig
from gnntrain.engine import AllReduce
from gnntrain.models import ModelSpec, build_model, has_layerwise
from gnntrain.runtime.evaluator import Evaluator
from gnntrain.runtime.part_access import PartAccess
from gnntrain.runtime.routing import PEER_CATEGORIES, Peers
from gnntrain.runtime.server import PeerServer
from gnntrain.runtime.trainer import StepHook, Trainer
from gnntrain.tasks import Task

if TYPE_CHECKING:
    from partition import Part

CALLS: dict[str, tuple[str, str]] = {
    "setup_cache": ("", "setup_cache"),
    "train_epoch": ("trainer", "train_epoch"),
    "eval_sampled": ("evaluator", "sampled"),
    "eval_begin": ("evaluator", "begin"),
    "eval_layer": ("evaluator", "layer"),
    "eval_results": ("evaluator", "results"),
    "export": ("evaluator", "export"),
    "comm_snapshot": ("access", "comm_snapshot"),
    "state": ("trainer", "state"),
    "state_digest": ("", "state_digest"),
    "part_state": ("", "part_state"),
    "load_part_state": ("", "load_part_state"),
    "load_state": ("trainer", "load_state"),
}
"""Coordinator calls: name -> (role attribute, or "" for the worker itself; method). They
run on the worker's one training thread."""

SERVE_CALLS: dict[str, tuple[str, str]] = {name: ("server", name) for name in PEER_CATEGORIES}
"""Peer calls: name -> (role attribute, method), one for each call a peer may make
(:data:`~gnntrain.runtime.routing.PEER_CATEGORIES`). Run on the worker's serving threads."""


class _NoPeers(Peers):
    def _none(self, *_: Any) -> dict[int, Any]:
        raise RuntimeError("a single worker has no peers to ask")

    sample = features = hidden = embedding_rows = embedding_grads = _none  # type: ignore[assignment]


@dataclass(frozen=True)
class WorkerInfo:
    """What the coordinator learns from a worker at start-up."""

    train_examples: int
    layerwise: bool
    num_layers: int
    threads: int = 1
    """torch's intra-op threads in the worker's process."""
    owned_nodes: int = 0
    """Nodes of the worker's part."""
    staging: dict[str, Any] | None = None
    """What staging the worker's part from object storage did
    (:meth:`partition.staging.Staged.to_dict`: the files it copied and their bytes, the
    files it found staged on its node); None for a set on a local or shared directory."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Worker:
    """One worker's roles over its part; see the module docstring."""

    def __init__(self, cfg: RunConfig, part: Part, *, rank: int, world: int, degrees: np.ndarray,
                 num_classes: int, peers: Peers | None, allreduce: AllReduce, model: ModelSpec,
                 task: Task, step_hooks: list[StepHook] | None = None,
                 node_types: np.ndarray | None = None) -> None:
        device = torch.device(cfg.train.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"train.device='cuda' but worker {rank} sees no CUDA device")
        self.cfg = cfg
        self.rank = rank
        self.task = task
        self.access = PartAccess(cfg, part, rank=rank, world=world, degrees=degrees,
                                 peers=peers or _NoPeers(), device=device, node_types=node_types)
        out_dim = task.out_dim(num_classes, cfg.model.hidden)
        in_dim = cfg.model.input_dim(int(part.x.shape[1]))
        self.model = build_model(model, cfg.model, in_dim, out_dim, cfg.train.seed).to(device)
        self.trainer = Trainer(self.access, self.model, task, allreduce, step_hooks or [])
        self.evaluator = Evaluator(self.access, self.model, task)
        self.server = PeerServer(self.access, self.evaluator)

    @property
    def info(self) -> WorkerInfo:
        layerwise = has_layerwise(self.model)
        return WorkerInfo(self.task.num_train_examples(self.access.part), layerwise,
                          int(self.model.num_layers) if layerwise else 0,  # type: ignore[arg-type]
                          torch.get_num_threads(), self.access.n_owned)

    def setup_cache(self) -> dict[str, Any]:
        return self.access.setup_cache(self.task)

    def part_state(self) -> dict[str, Any]:
        """What only this worker holds: its part of the node embedding table and that
        part's optimizer state (empty without ``model.node_embedding``)."""
        emb = self.access.embedding
        return {} if emb is None else {"embedding": emb.shard.state_dict()}

    def load_part_state(self, state: dict[str, Any]) -> None:
        emb = self.access.embedding
        if emb is None or "embedding" not in state:
            raise ValueError(f"worker {self.rank}: the checkpoint's per-part state "
                             f"({sorted(state)}) does not match model.node_embedding="
                             f"{self.cfg.model.node_embedding}")
        emb.shard.load_state_dict(state["embedding"], self.rank)

    def state_digest(self) -> str:
        """SHA-256 of this worker's model and optimizer state (equal on every replica)."""
        return state_digest(self.trainer.state())

    def call(self, name: str, *args: Any) -> Any:
        """Run coordinator call ``name`` (one of :data:`CALLS`)."""
        role, method = CALLS[name]
        return getattr(getattr(self, role) if role else self, method)(*args)

    def serve(self, name: str, *args: Any) -> Any:
        """Answer peer request ``name`` (one of :data:`SERVE_CALLS`)."""
        role, method = SERVE_CALLS[name]
        return getattr(getattr(self, role), method)(*args)

    @property
    def progress(self) -> dict[str, Any]:
        return dict(self.access.progress.state)

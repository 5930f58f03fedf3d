"""What one worker does, free of Ray: own a part, sample, fetch, train, evaluate, serve.

:class:`WorkerCore` is the same object in the single-process reference trainer (one
part that is the whole graph, no peers, a no-op all-reduce) and inside every Ray worker
actor (its own part, peers reached through Ray, gloo all-reduce). Keeping one code path
is what makes "1 worker equals single-process" hold exactly.
"""

from __future__ import annotations

import os
import time
from typing import Any, Protocol

import numpy as np
import torch

from gnntrain.config import RunConfig
from gnntrain.engine import (
    AllReduce,
    BatchPipeline,
    EpochStats,
    epoch_batches,
    layer_forward,
    locality_order,
    mix_seed,
    run_epoch,
)
from gnntrain.models import BlockGNN, build_model
from gnntrain.runtime.codec import Encoded, encode
from gnntrain.runtime.comm import CommCounter, wire_bytes
from gnntrain.runtime.dist_source import (
    DistFeatureReader,
    DistGraphSource,
    Peers,
    group_by_owner,
    owners_of,
)
from samplers import (
    CSRSource,
    FeatureCache,
    FIFOCache,
    LRUCache,
    NeighborSampler,
    StaticCache,
    count_accesses,
    degree_cache_ids,
    presample_ids,
    resolve_capacity,
)


class PartLike(Protocol):
    """The arrays a worker needs of its part (``partition.Part`` has them)."""

    @property
    def part_id(self) -> int: ...
    @property
    def offsets(self) -> np.ndarray: ...
    @property
    def indptr(self) -> np.ndarray: ...
    @property
    def indices(self) -> np.ndarray: ...
    @property
    def x(self) -> np.ndarray: ...
    @property
    def y(self) -> np.ndarray: ...
    @property
    def train_idx(self) -> np.ndarray: ...
    @property
    def val_idx(self) -> np.ndarray: ...
    @property
    def test_idx(self) -> np.ndarray: ...
    @property
    def halo_ids(self) -> np.ndarray: ...


def make_optimizer(model: torch.nn.Module, cfg: RunConfig) -> torch.optim.Optimizer:
    t = cfg.train
    if t.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)
    return torch.optim.Adam(model.parameters(), lr=t.lr, weight_decay=t.weight_decay)


class _NoPeers(Peers):
    def _none(self, *_: Any) -> dict[int, Any]:
        raise RuntimeError("a single worker has no peers to ask")

    sample = features = hidden = _none  # type: ignore[assignment]


class WorkerCore:
    """One worker's state and steps; every public method is one coordinator call."""

    def __init__(self, cfg: RunConfig, part: PartLike, *, rank: int, world: int,
                 degrees: np.ndarray, num_classes: int, peers: Peers | None,
                 allreduce: AllReduce) -> None:
        self.cfg = cfg
        self.part = part
        self.rank = rank
        self.world = world
        self.offsets = np.asarray(part.offsets, dtype=np.int64)
        self.start = int(self.offsets[rank])
        self.num_nodes = int(self.offsets[-1])
        self.n_owned = int(part.indptr.shape[0] - 1)
        self.comm = CommCounter(rank, world)
        self.peers = peers or _NoPeers()
        self._allreduce = allreduce
        self.degrees = degrees
        self.local = CSRSource(part.indptr, part.indices, part.x, row_offset=self.start,
                               num_nodes=self.num_nodes)
        self.source = DistGraphSource(self.local, self.offsets, rank, self.peers, self.comm,
                                      part.x)
        self.reader = DistFeatureReader(part.x, self.start, self.offsets, rank, self.peers,
                                        self.comm, degrees, dtype=cfg.train.feature_dtype)
        sc = cfg.sampler
        self.sampler = NeighborSampler(self.source, list(sc.fanouts), replace=sc.replace,
                                       weighted=sc.weighted)
        self.num_classes = num_classes
        self.device = torch.device(cfg.train.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"train.device='cuda' but worker {rank} sees no CUDA device")
        self.model: BlockGNN = build_model(cfg.model, part.x.shape[1], num_classes,
                                           cfg.train.seed).to(self.device)
        self.opt = make_optimizer(self.model, cfg)
        self.attempt = 0  # which restart of the run this is (fault injection counts it)
        self._hidden: dict[int, np.ndarray] = {}
        self._halo_local: np.ndarray | None = None
        self.cache_info: dict[str, Any] = {"policy": "none", "capacity": 0}
        self._order: np.ndarray | None = None
        self.progress: dict[str, Any] = {"epoch": -1, "step": 0, "phase": "setup"}

    # -- collectives ---------------------------------------------------------------
    def allreduce(self, t: torch.Tensor) -> torch.Tensor:
        self.comm.add_gradient(int(t.numel() * t.element_size()))
        return self._allreduce(t)

    # -- cache ----------------------------------------------------------------------
    def setup_cache(self) -> dict[str, Any]:
        """Build the remote-feature cache the config asks for; returns what it did."""
        cc = self.cfg.sampler.cache
        remote_rows = self.num_nodes - self.n_owned
        if cc.policy == "none" or self.world == 1 or remote_rows == 0:
            return self.cache_info
        dim = self.part.x.shape[1]
        cap = resolve_capacity(cc.size, remote_rows, dim * 4)
        cache: FeatureCache
        t0 = time.perf_counter()
        if cc.policy in ("degree", "presample"):
            if cc.policy == "degree":
                remote = np.concatenate([np.arange(0, self.start), np.arange(self.start + self.n_owned, self.num_nodes)]).astype(np.int64)
                ids = degree_cache_ids(remote, self.degrees[remote], cap)
            else:
                train = np.asarray(self.part.train_idx, dtype=np.int64)
                acc_ids, acc_counts = count_accesses(
                    self.sampler, train, self.cfg.sampler.batch_size, cc.presample_epochs,
                    mix_seed(self.cfg.train.seed, "presample", self.rank),
                    only=lambda v: (v < self.start) | (v >= self.start + self.n_owned))
                ids = presample_ids((acc_ids, acc_counts), cap)
            ids = np.sort(ids)
            rows = self.reader.fetch(ids)
            cache = StaticCache(ids, rows)
        elif cc.policy == "lru":
            cache = LRUCache(cap, dim)
        else:
            cache = FIFOCache(cap, dim)
        self.reader.cache = cache
        self.cache_info = {"policy": cc.policy, "capacity": int(cap), "remote_rows": int(remote_rows),
                           "setup_s": time.perf_counter() - t0}
        return self.cache_info

    # -- training -------------------------------------------------------------------
    def train_epoch(self, epoch: int, steps: int) -> dict[str, Any]:
        """Run exactly ``steps`` synchronous steps over this part's training nodes."""
        seed = self.cfg.train.seed
        torch.manual_seed(mix_seed(seed, "dropout", epoch, self.rank))
        src0, rd0 = self._counters()  # before the prefetch thread starts sampling
        pipe = self._pipeline(*self._epoch_plan(epoch, steps))
        self.progress = {"epoch": epoch, "step": 0, "phase": "train"}
        stats = run_epoch(self.model, self.opt, pipe, self.allreduce, epoch,
                          on_step=lambda step: self._step_done(epoch, step), device=self.device)
        self.progress = {"epoch": epoch, "step": steps, "phase": "idle"}
        self._add_io_stats(stats, src0, rd0)
        return {"stats": stats.to_dict(), "comm": self.comm.take()}

    def _epoch_plan(self, epoch: int, steps: int) -> tuple[list[np.ndarray], list[int]]:
        """This worker's seed batches and sampling keys for ``epoch`` (same in every mode)."""
        seed = self.cfg.train.seed
        train = np.asarray(self.part.train_idx, dtype=np.int64)
        if self.cfg.sampler.seed_order == "locality" and self._order is None:
            self._order = locality_order(self.part.indptr, self.part.indices, self.start, train)
        batches = epoch_batches(train, steps, seed=seed, epoch=epoch, rank=self.rank,
                                shuffle=self.cfg.sampler.shuffle, locality_order=self._order)
        return batches, [mix_seed(seed, "sample", epoch, step) for step in range(steps)]

    def simulate_epoch(self, epoch: int, steps: int) -> dict[str, Any]:
        """Sample and fetch exactly as :meth:`train_epoch` does, without training.

        Gradient traffic is added per step from the ring formula, as training would
        count it, so the bytes equal a real epoch's (the scale simulator's basis).
        """
        src0, rd0 = self._counters()
        pipe = self._pipeline(*self._epoch_plan(epoch, steps), prefetch=0)
        stats = EpochStats(epoch=epoch)
        grad_bytes = 4 * (sum(p.numel() for p in self.model.parameters()) + 3)
        for item in pipe:
            stats.steps += 1
            stats.examples += int(item.batch.y.shape[0]) if item.batch is not None else 0
            stats.sample_s += item.sample_s
            stats.fetch_s += item.fetch_s
            stats.input_nodes += item.num_input
            stats.sampled_edges += item.num_edges
            self.comm.add_gradient(grad_bytes)
        self._add_io_stats(stats, src0, rd0)
        # no comm snapshot here: peers simulated after this one still ask it for rows
        return {"stats": stats.to_dict()}

    def _pipeline(self, batches: list[np.ndarray], keys: list[int],
                  prefetch: int | None = None) -> BatchPipeline:
        y = self.part.y

        def labels(ids: np.ndarray) -> np.ndarray:
            return np.asarray(y[ids - self.start], dtype=np.int64)

        return BatchPipeline(self.sampler, self.reader, labels, batches, keys,
                             prefetch=self.cfg.sampler.prefetch if prefetch is None else prefetch,
                             need_deg=self.cfg.model.arch == "gcn", pin=self.device.type == "cuda")

    def _counters(self) -> tuple[dict[str, int], dict[str, int]]:
        return dict(vars(self.source.stats)), dict(vars(self.reader.stats))

    def _add_io_stats(self, stats: EpochStats, src0: dict[str, int], rd0: dict[str, int]) -> None:
        src = {k: v - src0[k] for k, v in vars(self.source.stats).items()}
        rd = {k: v - rd0[k] for k, v in vars(self.reader.stats).items()}
        stats.extra.update({f"sample_{k}": v for k, v in src.items()})
        stats.extra.update({f"feat_{k}": v for k, v in rd.items()})

    def _step_done(self, epoch: int, step: int) -> None:
        self._maybe_fail(epoch, step)
        self.progress = {"epoch": epoch, "step": step + 1, "phase": "train"}

    def _maybe_fail(self, epoch: int, step: int) -> None:
        """Injected faults (``faults:`` config section), for tests and failure drills."""
        f = self.cfg.faults
        if (f.kind == "none" or f.rank != self.rank or (f.epoch, f.step) != (epoch, step)
                or self.attempt >= f.times):
            return
        if f.kind == "raise":
            raise RuntimeError(f"injected fault: worker {self.rank} raises at epoch {epoch} step {step}")
        if f.kind == "exit":
            os._exit(17)
        time.sleep(10**6)  # stall: never answers again

    # -- serving peers (called on Ray's serving threads) ---------------------------
    def serve_sample(self, ids: np.ndarray, fanout: int, replace: bool, key: int,
                     requester: int) -> tuple[np.ndarray, np.ndarray]:
        res = self.local.sample_neighbors(ids, fanout, replace=replace, key=key)
        reply = (res.counts, res.nbrs)
        self.comm.add("sample", requester, wire_bytes(reply))
        return reply

    def serve_features(self, ids: np.ndarray, dtype: str, requester: int) -> Encoded:
        enc = encode(self.part.x[ids - self.start], dtype)
        self.comm.add("feature", requester, wire_bytes(enc))
        return enc

    def serve_hidden(self, ids: np.ndarray, layer: int, requester: int) -> np.ndarray:
        rows = np.ascontiguousarray(self._hidden[layer][ids - self.start])
        self.comm.add("eval", requester, wire_bytes(rows))
        return rows

    # -- evaluation -----------------------------------------------------------------
    def _local_indices(self) -> np.ndarray:
        """Neighbour ids renumbered: owned rows first, then the halo in sorted order."""
        if self._halo_local is None:
            ind = np.asarray(self.part.indices, dtype=np.int64)
            owned = (ind >= self.start) & (ind < self.start + self.n_owned)
            halo = np.asarray(self.part.halo_ids, dtype=np.int64)
            loc = np.empty_like(ind)
            loc[owned] = ind[owned] - self.start
            loc[~owned] = self.n_owned + np.searchsorted(halo, ind[~owned])
            self._halo_local = loc
        return self._halo_local

    def eval_begin(self) -> None:
        self._hidden = {0: np.array(self.part.x, dtype=np.float32)}  # writable copy of the mmap

    def eval_layer(self, layer: int) -> None:
        """Full-neighbour layer ``layer`` for every owned node (DGL's layer-wise inference).

        Reads the previous layer's rows of the halo from their owners; the coordinator
        runs layer ``l`` on every worker before any starts ``l + 1``.
        """
        h_owned = self._hidden[layer]
        halo = np.asarray(self.part.halo_ids, dtype=np.int64)
        if halo.size:
            _, groups = group_by_owner(owners_of(self.offsets, halo), self.rank)
            requests = {o: halo[p] for o, p in groups.items()}
            for o, req in requests.items():
                self.comm.add("eval", o, wire_bytes(req, layer, self.rank))  # serve_hidden's arguments
            replies = self.peers.hidden(requests, layer)
            h_halo = np.empty((halo.size, h_owned.shape[1]), dtype=np.float32)
            for o, p in groups.items():
                h_halo[p] = replies[o]
            h_all = np.concatenate([h_owned, h_halo])
        else:
            h_all = h_owned
        deg = None
        if self.cfg.model.arch == "gcn":
            ids = np.concatenate([np.arange(self.start, self.start + self.n_owned), halo])
            deg = torch.from_numpy(self.degrees[ids].astype(np.float32))
        out = layer_forward(self.model, layer, torch.from_numpy(h_all), self.part.indptr,
                            self._local_indices(), deg)
        self._hidden[layer + 1] = out.numpy()

    def eval_counts(self) -> dict[str, Any]:
        """Exact correct/total counts on this part's train/val/test nodes, and its loss."""
        logits = torch.from_numpy(self._hidden[self.model.num_layers])
        y = torch.from_numpy(np.array(self.part.y, dtype=np.int64))
        out: dict[str, Any] = {}
        for split in ("train", "val", "test"):
            idx = torch.from_numpy(np.asarray(getattr(self.part, f"{split}_idx"), dtype=np.int64) - self.start)
            out[split] = [int((logits[idx].argmax(1) == y[idx]).sum()), int(idx.numel())]
        self._hidden = {}
        return out

    @torch.no_grad()
    def eval_sampled(self, epoch: int) -> dict[str, Any]:
        """Accuracy with the training fanouts (cheaper than full inference)."""
        self.model.eval()
        out: dict[str, Any] = {}
        bs = self.cfg.sampler.batch_size
        for split in ("val", "test"):
            ids = np.asarray(getattr(self.part, f"{split}_idx"), dtype=np.int64)
            steps = max(1, -(-ids.size // bs))
            batches = [b for b in np.array_split(ids, steps)]
            keys = [mix_seed(self.cfg.train.seed, "eval", split, epoch, i) for i in range(steps)]
            pipe = self._pipeline(batches, keys)
            correct = total = 0
            try:
                for item in pipe:
                    if item.batch is None:
                        continue
                    b = item.batch.to(self.device, non_blocking=True)
                    deg = item.deg.to(self.device) if item.deg is not None else None
                    pred = self.model(b.x, b.blocks, deg).argmax(1)
                    correct += int((pred == b.y).sum())
                    total += int(b.y.shape[0])
            finally:
                pipe.close()
            out[split] = [correct, total]
        return out

    # -- checkpoints ----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Model and optimizer state on the CPU (checkpoints load on any device)."""
        model = {k: v.cpu() for k, v in self.model.state_dict().items()}
        opt = self.opt.state_dict()
        opt["state"] = {k: {n: (t.cpu() if torch.is_tensor(t) else t) for n, t in st.items()}
                        for k, st in opt["state"].items()}
        return {"model": model, "opt": opt}

    def load_state(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])

    def comm_snapshot(self) -> dict[str, Any]:
        return self.comm.take()


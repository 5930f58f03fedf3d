"""A worker's evaluation role: exact layer-wise full-graph inference, or sampled inference.

Layer-wise (DGL's way, for models with ``layer(i, block, h)``): the coordinator runs
layer ``l`` on every worker before any starts ``l + 1``; each worker computes layer ``l``
for every node it owns over **all** in-neighbours, reading the previous layer's rows of
its halo from their owners (:meth:`Evaluator.layer`). Sampled: the split's seeds in
batches with the training fanouts. Both return the task's metric state per split.

After the layers, :meth:`Evaluator.export` writes this worker's own rows (the rows after
any layer, or the task's predictions from the last one) as one shard of a prediction
directory, keyed by original node ids; the layout is documented in :mod:`gnntrain.predict`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import scipy.sparse
import torch
from torch import Tensor

from gnntrain.engine import layer_forward, mix_seed
from gnntrain.models import (
    SPARSE_INPUT_DENSITY,
    Encoder,
    accepts_sparse_input,
    block_needs,
    input_encoder,
)
from gnntrain.precision import resolve_precision
from gnntrain.predict.format import export_shard
from gnntrain.runtime.codec import decode
from gnntrain.runtime.part_access import PartAccess
from gnntrain.tasks import SPLITS, Task
from partition.feature_rows import TypedRows


class Evaluator:
    """Inference over one worker's part; holds the layer outputs peers ask for."""

    def __init__(self, access: PartAccess, model: torch.nn.Module, task: Task) -> None:
        self.access = access
        self.model = model
        self.task = task
        self.precision = resolve_precision(access.cfg.train.precision, access.device)
        self.hidden: dict[int, np.ndarray] = {}
        self._halo_local: np.ndarray | None = None
        self._sparse_inputs: dict[int, Tensor | None] = {}

    def _local_indices(self) -> np.ndarray:
        """Neighbour ids renumbered: owned rows first, then the halo in sorted order."""
        if self._halo_local is None:
            a = self.access
            ind = np.asarray(a.part.indices, dtype=np.int64)
            owned = a.owned(ind)
            halo = np.asarray(a.part.halo_ids, dtype=np.int64)
            loc = np.empty_like(ind)
            loc[owned] = ind[owned] - a.start
            loc[~owned] = a.n_owned + np.searchsorted(halo, ind[~owned])
            self._halo_local = loc
        return self._halo_local

    def begin(self) -> None:
        """Layer 0's rows of every owned node: the features, combined with the node
        embedding's rows where the model has one, and encoded by the model's input encoder
        (``encode``) where it has one."""
        encode = input_encoder(self.model)
        x = self.access.part.x
        if encode is not None and isinstance(x, TypedRows) and self.access.embedding is None:
            self.hidden = {0: self._encode_by_type(encode, x)}
            return
        x = np.array(x, dtype=np.float32)  # writable padded copy (of the mmap or per-type rows)
        emb = self.access.embedding
        if emb is not None:
            x = emb.combine(torch.from_numpy(x), torch.from_numpy(emb.shard.table)).numpy()
        if encode is not None:
            a = self.access
            types = torch.from_numpy(a.reader.node_types(np.arange(a.start, a.start + a.n_owned)))
            x = self._encode(encode, torch.from_numpy(x), types)
        self.hidden = {0: x}

    def _encode(self, encode: Encoder, x: Tensor, types: Tensor) -> np.ndarray:
        """``encode(x, types)`` in eval mode, without gradients, under the run's precision;
        float32 rows."""
        self.model.eval()
        device = next(self.model.parameters()).device
        with torch.no_grad(), self.precision.autocast():
            out = encode(x.to(device), types.to(device))
        return np.ascontiguousarray(out.to("cpu", torch.float32).numpy())

    def _encode_by_type(self, encode: Encoder, x: TypedRows) -> np.ndarray:
        """The encoded rows of every owned node, each type's rows read at the type's own
        width (as a sparse CSR tensor where the type is sparse and the model takes it): no
        row padded to the widest type is built."""
        out: np.ndarray | None = None
        for t, table in enumerate(x.tables):
            rows = np.flatnonzero(x.row_type == t)
            if not rows.size:
                continue
            enc = self._encode(encode, self._type_input(t, table),  # the type's rows in row order
                               torch.full((rows.size,), t, dtype=torch.int64))
            if out is None:
                out = np.empty((len(x), enc.shape[1]), dtype=np.float32)
            out[rows] = enc
        if out is None:
            raise ValueError("Evaluator: the part has no rows to encode")
        return out

    def _type_input(self, t: int, table: np.ndarray) -> Tensor:
        """Type ``t``'s rows as the encoder reads them: a sparse CSR tensor (built once, the
        part's features do not change) when at most :data:`SPARSE_INPUT_DENSITY` of them is
        nonzero and the model takes sparse rows, else dense."""
        if t not in self._sparse_inputs:
            sparse = None
            if accepts_sparse_input(self.model) and table.size and \
                    np.count_nonzero(table) <= SPARSE_INPUT_DENSITY * table.size:
                csr = scipy.sparse.csr_array(table)  # new arrays: the table may be a read-only map
                with warnings.catch_warnings():  # torch calls its CSR tensors beta, once a process
                    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
                    sparse = torch.sparse_csr_tensor(
                        torch.from_numpy(csr.indptr.astype(np.int64)), torch.from_numpy(csr.indices.astype(np.int64)),
                        torch.from_numpy(csr.data), size=table.shape, check_invariants=True)
            self._sparse_inputs[t] = sparse
        cached = self._sparse_inputs[t]
        return cached if cached is not None else torch.from_numpy(np.array(table, dtype=np.float32))

    def layer(self, layer: int) -> None:
        """Layer ``layer`` over all in-neighbours for every owned node."""
        a = self.access
        a.progress.set("eval", layer=layer)
        h_owned = self.hidden[layer]
        halo = np.asarray(a.part.halo_ids, dtype=np.int64)
        h_all = np.concatenate([h_owned, self._ask_hidden(halo, layer)]) if halo.size else h_owned
        needs = block_needs(self.model)
        deg = types = None
        if needs.degrees or needs.node_types:
            ids = np.concatenate([np.arange(a.start, a.start + a.n_owned), halo])
            deg = torch.from_numpy(a.degrees[ids].astype(np.float32)) if needs.degrees else None
            types = torch.from_numpy(a.reader.node_types(ids)) if needs.node_types else None
        out = layer_forward(self.model, layer, torch.from_numpy(h_all), a.part.indptr,
                            self._local_indices(), deg, type_all=types, rel=a.part.edge_rel,
                            precision=self.precision)
        self.hidden[layer + 1] = out.numpy()

    def _ask_hidden(self, ids: np.ndarray, layer: int) -> np.ndarray:
        """Rows after ``layer`` of other parts' nodes ``ids`` (sorted), one request per
        owner (``eval`` bytes)."""
        policy = self.access.policy
        out = np.empty((ids.size, self.hidden[layer].shape[1]), dtype=np.float32)
        return policy.fetch(policy.route(ids, presorted=True), out, None, "hidden", layer,
                            receive=lambda _ids, enc: decode(enc, "float32"))

    def hidden_rows(self, ids: np.ndarray, layer: int) -> np.ndarray:
        return np.ascontiguousarray(self.hidden[layer][self.access.policy.to_local(ids)])

    def results(self) -> dict[str, Any]:
        """The task's metric state per split from the last layer's outputs (plus the rows
        of other parts' nodes the task asks for, :meth:`Task.extra_rows`, one request per
        owner); frees the inner layers. The last stays until the next :meth:`begin`, since
        peers may still be reading it for their own results."""
        a = self.access
        out_layer = max(self.hidden)
        outputs = self.hidden[out_layer]
        extra = self.task.extra_rows(a.part)
        if extra.size:
            outputs = np.concatenate([outputs, self._ask_hidden(extra, out_layer)])
        res = {s: self.task.to_json(self.task.eval_state(a.part, torch.from_numpy(outputs), s,
                                                             model=self.model))
               for s in SPLITS}
        self.hidden = {out_layer: self.hidden[out_layer]}
        a.progress.set("idle")
        return res

    def _release(self) -> None:
        self.hidden = {}
        self.access.progress.set("idle")

    def rows(self, what: str, layer: int) -> np.ndarray:
        """What ``gnntrain.predict --what WHAT`` writes for every owned node (row ``i`` =
        local node ``i``): ``embeddings`` are the rows after layer ``layer`` (layer 0: the
        model's input rows, with a node embedding, after its input encoder), ``node_embedding`` the learned table's
        rows; anything else goes through :meth:`Task.predict` on the last layer's outputs."""
        emb = self.access.embedding
        if what == "node_embedding":
            if emb is None:
                raise ValueError("--what node_embedding: the run has no model.node_embedding")
            return np.ascontiguousarray(emb.shard.table)
        if what == "embeddings":
            if layer not in self.hidden or (layer == 0 and emb is None):
                raise ValueError(f"layer={layer}: embeddings are the rows after a layer that ran "
                                 f"(1..{max(self.hidden, default=0)})")
            return self.hidden[layer]
        out = self.task.predict(torch.from_numpy(self.hidden[max(self.hidden)]), what)
        return np.ascontiguousarray(out.detach().cpu().numpy())

    def export(self, out_dir: str, what: str, layer: int, fmt: str,
               storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Write this worker's rows of ``what`` into ``out_dir`` as shard ``part-<p>``
        (see :func:`~gnntrain.predict.format.export_shard`) and free the layer outputs;
        returns the shard's manifest entry. ``out_dir`` is an object-store URI (reached with
        ``storage_options``) or a directory every worker can write (one machine, or a
        shared file system on a cluster)."""
        part = self.access.part
        self.access.progress.set("export")
        try:
            values = self.rows(what, layer)
            return export_shard(out_dir, part.part_id, np.asarray(part.orig_ids, dtype=np.int64), values, fmt,
                                storage_options)
        finally:
            self._release()

    @torch.no_grad()
    def sampled(self, epoch: int) -> dict[str, Any]:
        """Metric states of val and test with the training fanouts (any model)."""
        a = self.access
        self.model.eval()
        out: dict[str, Any] = {}
        plan = {split: self.task.eval_batches(a.part, split, self.cfg_batch_size) for split in ("val", "test")}
        total, done = sum(len(b) for b in plan.values()), 0  # the coordinator's progress bar
        for split, batches in plan.items():
            keys = [mix_seed(a.cfg.train.seed, "eval", split, epoch, i) for i in range(len(batches))]
            pipe = a.pipeline(self.task, batches, keys, needs=block_needs(self.model))
            states = []
            try:
                for i, item in enumerate(pipe):
                    a.progress.set("eval", step=i, done=done, total=total)
                    done += 1
                    if item.batch is None:
                        continue
                    b = item.batch.to(a.device, non_blocking=True)
                    if a.embedding is not None:
                        assert item.input_nodes is not None
                        b, _ = a.embedding.attach(b, item.input_nodes, grad=False)
                    with self.precision.autocast():
                        states.append(self.task.eval_step(self.model, b))
            finally:
                pipe.close()
            out[split] = self.task.to_json(self.task.merge(states))
        a.progress.set("idle")
        return out

    @property
    def cfg_batch_size(self) -> int:
        return self.access.cfg.sampler.batch_size

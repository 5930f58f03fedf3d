"""A worker's serving role: answer peers' sampling, feature and hidden-row requests.

Runs on the actor's ``serve`` threads while the training thread works; every reply is
counted by category and requester where it is sent.
"""

from __future__ import annotations

import numpy as np

from gnntrain.runtime.codec import Encoded, TypedReply, encode
from gnntrain.runtime.comm import wire_bytes
from gnntrain.runtime.dist_embedding import DistEmbedding
from gnntrain.runtime.evaluator import Evaluator
from gnntrain.runtime.part_access import PartAccess
from partition.book import value_groups
from partition.feature_rows import TypedRows
from samplers.base import Fanout


class PeerServer:
    def __init__(self, access: PartAccess, evaluator: Evaluator) -> None:
        self.access = access
        self.evaluator = evaluator

    def sample(self, ids: np.ndarray, fanout: Fanout, replace: bool, key: int,
               requester: int) -> tuple[np.ndarray, ...]:
        """``(counts, nbrs)``, plus ``rels`` (each edge's relation id) on a typed graph."""
        res = self.access.local.sample_neighbors(ids, fanout, replace=replace, key=key)
        reply = (res.counts, res.nbrs) if res.rels is None else (res.counts, res.nbrs, res.rels)
        self.access.comm.add("sample", requester, wire_bytes(reply), ids=ids)
        return reply

    def features(self, ids: np.ndarray, dtype: str | tuple[str, ...],
                 requester: int) -> Encoded | TypedReply:
        """Rows of owned ``ids`` at ``dtype``; on a typed graph one group per node type,
        each at the type's width and dtype ``dtype[t]``."""
        a = self.access
        sparse = a.cfg.train.sparse_feature_transfer
        x, local = a.part.x, ids - a.start
        if not isinstance(x, TypedRows):
            if not isinstance(dtype, str):
                raise ValueError(f"feature request with a dtype per node type {dtype} on an untyped part")
            enc = encode(x[local], dtype, sparse=sparse)
            a.comm.add("feature", requester, wire_bytes(enc), ids=ids)
            return enc
        if isinstance(dtype, str):
            raise ValueError(f"feature request with one dtype {dtype!r} on a typed part: expected one per node type")
        groups: list[Encoded] = []
        weights = np.zeros(len(x.tables), dtype=np.int64)  # the by-type split: encoded bytes
        for t, pos in value_groups(x.row_type[local]):
            groups.append(encode(x.type_rows(t, local[pos]), dtype[t], sparse=sparse))
            weights[t] = groups[-1].nbytes
        reply = tuple(groups)
        a.comm.add("feature", requester, wire_bytes(reply), ids=ids, type_weights=weights)
        return reply

    def embedding_rows(self, ids: np.ndarray, version: int | None, requester: int) -> np.ndarray:
        return self._embedding().serve_rows(ids, version, requester)

    def embedding_grads(self, ids: np.ndarray, grads: np.ndarray, step: int, requester: int) -> None:
        self._embedding().serve_grads(ids, grads, step, requester)

    def _embedding(self) -> DistEmbedding:
        if self.access.embedding is None:
            raise RuntimeError(f"worker {self.access.rank} has no node embedding table "
                               "(model.node_embedding is not set)")
        return self.access.embedding

    def hidden(self, ids: np.ndarray, layer: int, requester: int) -> Encoded:
        """Rows after ``layer``, exact float32 (as CSR where that halves them: layer 0's rows
        are the features)."""
        a = self.access
        enc = encode(self.evaluator.hidden_rows(ids, layer), "float32",
                     sparse=a.cfg.train.sparse_feature_transfer)
        a.comm.add("eval", requester, wire_bytes(enc))
        return enc

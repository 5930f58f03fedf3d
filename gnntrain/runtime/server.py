"""A worker's serving role: answer peers' sampling, feature and hidden-row requests.

Runs on the actor's ``serve`` threads while the training thread works; every reply is
counted by category and requester where it is sent.
"""

from __future__ import annotations

import numpy as np

from gnntrain.runtime.codec import Encoded, encode
from gnntrain.runtime.comm import wire_bytes
from gnntrain.runtime.evaluator import Evaluator
from gnntrain.runtime.part_access import PartAccess


class PeerServer:
    def __init__(self, access: PartAccess, evaluator: Evaluator) -> None:
        self.access = access
        self.evaluator = evaluator

    def sample(self, ids: np.ndarray, fanout: int, replace: bool, key: int,
               requester: int) -> tuple[np.ndarray, np.ndarray]:
        res = self.access.local.sample_neighbors(ids, fanout, replace=replace, key=key)
        reply = (res.counts, res.nbrs)
        self.access.comm.add("sample", requester, wire_bytes(reply))
        return reply

    def features(self, ids: np.ndarray, dtype: str, requester: int) -> Encoded:
        a = self.access
        enc = encode(a.part.x[ids - a.start], dtype)
        a.comm.add("feature", requester, wire_bytes(enc))
        return enc

    def hidden(self, ids: np.ndarray, layer: int, requester: int) -> np.ndarray:
        rows = self.evaluator.hidden_rows(ids, layer)
        self.access.comm.add("eval", requester, wire_bytes(rows))
        return rows

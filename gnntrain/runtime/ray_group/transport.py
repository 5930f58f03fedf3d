"""Peer requests over Ray: one concurrent call per owner to its ``serve`` group, with the
per-message timeout (``cluster.call_timeout_s``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError

from gnntrain.runtime.codec import Encoded, TypedReply
from gnntrain.runtime.routing import Peers
from samplers import Neighbors
from samplers.base import Fanout

__all__ = ["RayPeers"]


class RayPeers(Peers):
    """Peer requests as concurrent Ray calls, one per owner, with a timeout."""

    def __init__(self, handles: list[Any], rank: int, timeout_s: float) -> None:
        self.handles = handles
        self.rank = rank
        self.timeout_s = timeout_s

    def _gather(self, refs: dict[int, Any], what: str) -> dict[int, Any]:
        try:
            values = ray.get(list(refs.values()), timeout=self.timeout_s)
        except GetTimeoutError:
            raise TimeoutError(f"worker {self.rank}: {what} request to workers {sorted(refs)} "
                               f"got no reply within {self.timeout_s:.0f}s") from None
        return dict(zip(refs, values, strict=True))

    def sample(self, requests: dict[int, np.ndarray], fanout: Fanout, replace: bool,
               key: int) -> dict[int, Neighbors]:
        refs = {o: self.handles[o].serve.remote("sample", ids, fanout, replace, key, self.rank)
                for o, ids in requests.items()}
        return {o: Neighbors(*reply) for o, reply in self._gather(refs, "sample").items()}

    def features(self, requests: dict[int, np.ndarray],
                 dtype: str | tuple[str, ...]) -> dict[int, Encoded | TypedReply]:
        refs = {o: self.handles[o].serve.remote("features", ids, dtype, self.rank)
                for o, ids in requests.items()}
        return self._gather(refs, "feature")

    def hidden(self, requests: dict[int, np.ndarray], layer: int) -> dict[int, Encoded]:
        refs = {o: self.handles[o].serve.remote("hidden", ids, layer, self.rank)
                for o, ids in requests.items()}
        return self._gather(refs, "hidden-row")

    def embedding_rows(self, requests: dict[int, np.ndarray],
                       version: int | None) -> dict[int, np.ndarray]:
        refs = {o: self.handles[o].serve.remote("embedding_rows", ids, version, self.rank)
                for o, ids in requests.items()}
        return self._gather(refs, "embedding-row")

    def embedding_grads(self, requests: dict[int, tuple[np.ndarray, np.ndarray]], step: int) -> None:
        refs = {o: self.handles[o].serve.remote("embedding_grads", ids, grads, step, self.rank)
                for o, (ids, grads) in requests.items()}
        self._gather(refs, "embedding-gradient")

"""Owner routing (:class:`PartitionPolicy`) and the feature reader over it, without Ray.

Routing groups ids by owner with positions that put every result back in the caller's
order; every remote group is one request to its owner, counted as Ray serialises it. The
feature reader is the one way features are read: owned rows from the part's table, remote
rows through the cache, misses from their owners.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gnntrain.runtime.codec import Encoded, TypedReply, decode, encode
from gnntrain.runtime.comm import CATEGORIES, CommCounter, wire_bytes
from gnntrain.runtime.dist_source import DistFeatureReader
from gnntrain.runtime.routing import PartitionPolicy, Peers
from partition import PartitionBook
from partition.book import value_groups
from samplers import (
    CSRSource,
    FeatureCache,
    FIFOCache,
    LRUCache,
    Neighbors,
    NeighborSampler,
    StaticCache,
    count_accesses,
    presample_ids,
    resolve_capacity,
)
from samplers.base import Fanout
from tests.conftest import make_graph
from tests.samplers.conftest import make_hub_graph


class TablePeers(Peers):
    """Owners that answer feature and hidden-row requests from one global table, and
    record every request they get: ``(call, owner, ids)``."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table
        self.asked: list[tuple[str, int, np.ndarray]] = []

    def _rows(self, call: str, requests: dict[int, np.ndarray]) -> dict[int, Encoded]:
        self.asked += [(call, o, ids) for o, ids in requests.items()]
        return {o: encode(self.table[ids], "float32") for o, ids in requests.items()}

    def features(self, requests: dict[int, np.ndarray],
                 dtype: str | tuple[str, ...]) -> dict[int, Encoded | TypedReply]:
        return dict(self._rows("features", requests))

    def hidden(self, requests: dict[int, np.ndarray], layer: int) -> dict[int, Encoded]:
        return self._rows("hidden", requests)

    def sample(self, requests: dict[int, np.ndarray], fanout: Fanout, replace: bool,
               key: int) -> dict[int, Neighbors]:
        raise NotImplementedError

    def embedding_rows(self, requests: dict[int, np.ndarray], version: int | None) -> dict[int, np.ndarray]:
        raise NotImplementedError

    def embedding_grads(self, requests: dict[int, tuple[np.ndarray, np.ndarray]], step: int) -> None:
        raise NotImplementedError


def policy_over(offsets: list[int], rank: int, peers: Peers | None = None) -> PartitionPolicy:
    book = PartitionBook(offsets)
    return PartitionPolicy(book, rank, peers or TablePeers(np.zeros((book.num_nodes, 1), np.float32)),
                           CommCounter(rank, book.num_parts))


OFFSETS = [0, 50, 50, 120, 200]  # part 1 owns nothing


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_route_groups_ids_by_owner_and_its_positions_cover_the_input(rank: int) -> None:
    policy = policy_over(OFFSETS, rank)
    ids = np.random.default_rng(rank).integers(0, 200, 500)
    route = policy.route(ids)
    owners = policy.book.owner(ids)
    groups = dict(value_groups(owners))  # the reference grouping: ascending owners, stable
    np.testing.assert_array_equal(route.local, groups.pop(rank, np.empty(0, np.int64)))
    assert list(route.remote) == sorted(groups)
    for q, pos in route.remote.items():
        np.testing.assert_array_equal(pos, groups[q])
    everything = np.concatenate([route.local, route.remote_positions()])
    np.testing.assert_array_equal(np.sort(everything), np.arange(ids.size))
    for q, asked in route.requests().items():
        assert np.all(policy.book.owner(asked) == q)
    sorted_ids = np.unique(ids)
    a, b = policy.route(sorted_ids), policy.route(sorted_ids, presorted=True)
    np.testing.assert_array_equal(a.local, b.local)
    assert a.remote.keys() == b.remote.keys()
    assert all(np.array_equal(a.remote[q], b.remote[q]) for q in a.remote)


def test_fetch_scatters_rows_back_and_counts_one_request_per_owner() -> None:
    table = np.random.default_rng(1).normal(size=(200, 5)).astype(np.float32)
    peers = TablePeers(table)
    policy = policy_over(OFFSETS, 2, peers)
    ids = np.random.default_rng(2).integers(0, 200, 300)
    out = np.full((ids.size + 3, 5), np.nan, dtype=np.float32)
    at = np.arange(ids.size) + 3
    got = policy.fetch(policy.route(ids), out, lambda own: table[own] * 2, "hidden", 7,
                       receive=lambda _ids, enc: decode(enc, "float32"), at=at)
    owned = policy.owned(ids)
    np.testing.assert_array_equal(got[3:][owned], table[ids[owned]] * 2)  # local rows: local_fn
    np.testing.assert_array_equal(got[3:][~owned], table[ids[~owned]])
    assert np.isnan(got[:3]).all()
    assert sorted(o for _, o, _ in peers.asked) == [0, 3]  # one request per owner, none to empty part 1
    sent = policy.comm.take()["bytes"][CATEGORIES.index("eval")]
    for _, o, asked in peers.asked:
        assert sent[o] == wire_bytes("hidden", asked, 7, 2)  # the call, its arguments, the rank
    assert sent[1] == sent[2] == 0
    policy.fetch(policy.route(np.empty(0, np.int64)), out, None, "hidden", 7)  # nothing to ask
    assert len(peers.asked) == 2 and not any(map(any, policy.comm.take()["messages"]))


def test_rows_of_owned_ids_are_never_asked_of_peers() -> None:
    policy = policy_over(OFFSETS, 0)
    with pytest.raises(ValueError, match="hidden of ids it owns"):
        policy.fetch(policy.route(np.array([3, 60])), np.empty((2, 1), np.float32), None, "hidden", 0)


@pytest.mark.parametrize("device", [None, "cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA device"))])
@pytest.mark.parametrize("policy", ["lru", "fifo", "presample"])
def test_reader_reads_exact_rows_through_its_cache(policy: str, device: str | None) -> None:
    """Owned rows from the table, remote rows via the cache, misses from their owner: the
    result is always x[ids], every remote read is looked up once, and only misses are asked.
    With a device (``sampler.backend: torch``) the owned rows come from the table there, the
    cache's hits from its copy of the rows there (a dynamic cache's updated by each insert),
    and the answer is a tensor there."""
    g = make_hub_graph()
    peers = TablePeers(g.x)
    routing = policy_over([0, 300, 600], 0, peers)
    sampler = NeighborSampler(CSRSource.from_graph(g), [4, 3])
    cap = resolve_capacity(0.2, 300, 32)
    cache: FeatureCache
    if policy == "presample":
        acc = count_accesses(sampler, g.train_idx, 50, 1, key=99, exclude=(0, 300))
        ids = presample_ids(acc, cap)
        cache = StaticCache(ids, g.x[ids])
    else:
        cache = (LRUCache if policy == "lru" else FIFOCache)(cap, 8)
    reader = DistFeatureReader(g.x[:300], routing, g.in_degrees(), cache=cache,
                               device=None if device is None else torch.device(device))
    assert (reader.table is None) == (device is None)
    total_remote = 0
    for b in sampler.iter_batches(g.train_idx, 50, key=1):
        got = reader.read(b.input_nodes)
        assert isinstance(got, np.ndarray if device is None else torch.Tensor)
        np.testing.assert_array_equal(got.cpu().numpy() if isinstance(got, torch.Tensor) else got,
                                      g.x[b.input_nodes])
        total_remote += int((b.input_nodes >= 300).sum())
    # the hits were gathered from the cache's rows on the device
    assert list(cache._on_device) == ([] if device is None else [torch.device(device)])
    if device is not None:
        np.testing.assert_array_equal(cache._on_device[torch.device(device)].cpu().numpy(), cache._rows)
    st = cache.stats
    assert st.lookups == total_remote == reader.stats.remote
    assert sum(ids.size for _, _, ids in peers.asked) == st.misses == reader.stats.fetched
    assert st.hits > 0 and st.bytes_served == st.hits * 32


def test_a_single_worker_reads_every_row_itself() -> None:
    g = make_graph(50)
    peers = TablePeers(g.x)
    reader = DistFeatureReader(g.x, policy_over([0, 50], 0, peers), g.in_degrees())
    ids = np.array([49, 0, 7, 7])
    np.testing.assert_array_equal(reader.read(ids), g.x[ids])
    assert not peers.asked and reader.stats.owned == 4

"""Feature caches: exact rows, eviction order against reference models, counters, builders."""

from __future__ import annotations

from collections import OrderedDict, deque

import numpy as np
import pytest

from partition.graph import Graph
from samplers import (
    CSRSource,
    FeatureCache,
    FIFOCache,
    LRUCache,
    NeighborSampler,
    StaticCache,
    count_accesses,
    degree_cache_ids,
    oracle_hit_rate,
    out_degrees,
    presample_ids,
    resolve_capacity,
)

TABLE = np.random.default_rng(0).normal(size=(500, 6)).astype(np.float32)


def _check_rows(cache: FeatureCache, ids: np.ndarray) -> np.ndarray:
    hit, rows = cache.lookup(ids)
    assert hit.dtype == bool and hit.shape == ids.shape
    assert rows.dtype == np.float32 and rows.shape == (int(hit.sum()), TABLE.shape[1])
    np.testing.assert_array_equal(rows, TABLE[ids[hit]])  # exactly the table's rows
    return hit


def test_static_cache_returns_exactly_its_rows() -> None:
    held = np.array([3, 99, 400, 7, 250])
    c = StaticCache(held, TABLE[held])
    ids = np.array([7, 8, 3, 3, 499, 250, 0])
    hit = _check_rows(c, ids)
    assert hit.tolist() == [True, False, True, True, False, True, False]
    assert (c.stats.hits, c.stats.misses, c.stats.lookups) == (4, 3, 7)
    assert c.stats.bytes_served == 4 * 6 * 4 and c.stats.bytes_missed == 3 * 6 * 4
    c.insert(np.array([8]), TABLE[[8]])  # static: ignored
    assert not c.lookup(np.array([8]))[0][0] and len(c) == 5


class _RefLRU:
    def __init__(self, cap: int) -> None:
        self.cap, self.d = cap, OrderedDict[int, None]()

    def lookup(self, ids: list[int]) -> list[bool]:
        out = []
        for i in ids:
            out.append(i in self.d)
            if i in self.d:
                self.d.move_to_end(i)
        return out

    def insert(self, ids: list[int]) -> None:
        for i in ids:
            if i in self.d:
                self.d.move_to_end(i)
                continue
            if self.cap == 0:
                continue
            if len(self.d) >= self.cap:
                self.d.popitem(last=False)
            self.d[i] = None


class _RefFIFO:
    def __init__(self, cap: int) -> None:
        self.cap, self.q, self.s = cap, deque[int](), set[int]()

    def lookup(self, ids: list[int]) -> list[bool]:
        return [i in self.s for i in ids]

    def insert(self, ids: list[int]) -> None:
        for i in ids:
            if i in self.s or self.cap == 0:
                continue
            if len(self.q) >= self.cap:
                self.s.discard(self.q.popleft())
            self.q.append(i)
            self.s.add(i)


@pytest.mark.parametrize("cap", [0, 1, 7, 64])
@pytest.mark.parametrize("policy", ["lru", "fifo"])
def test_dynamic_cache_matches_reference_model(cap: int, policy: str) -> None:
    """Random skewed traffic; hit pattern and content equal an OrderedDict / deque model."""
    rng = np.random.default_rng(cap)
    cache: FeatureCache = LRUCache(cap, 6) if policy == "lru" else FIFOCache(cap, 6)
    ref = _RefLRU(cap) if policy == "lru" else _RefFIFO(cap)
    for _ in range(60):
        ids = np.unique(np.minimum(rng.zipf(1.4, size=30), 500) - 1)
        rng.shuffle(ids)
        hit = _check_rows(cache, ids)
        assert hit.tolist() == ref.lookup(ids.tolist())
        miss = ids[~hit]
        cache.insert(miss, TABLE[miss])
        ref.insert(miss.tolist())
    held = cache.ids()  # type: ignore[attr-defined]
    want = list(ref.d) if isinstance(ref, _RefLRU) else list(ref.q)
    assert held.tolist() == want  # same content, same eviction order
    assert len(cache) == min(cap, len(want)) == len(want)


def test_insert_with_repeats_and_updates() -> None:
    c = LRUCache(3, 6)
    c.insert(np.array([1, 2, 1, 3, 4]), TABLE[[1, 2, 1, 3, 4]])
    assert c.ids().tolist() == [1, 3, 4]  # 2 was least recently used when 4 came
    new_row = np.full((1, 6), 9.0, dtype=np.float32)
    c.insert(np.array([3]), new_row)
    hit, rows = c.lookup(np.array([3]))
    assert hit[0] and np.array_equal(rows, new_row)


@pytest.mark.parametrize("policy", ["lru", "fifo", "static"])
def test_state_dict_round_trip(policy: str) -> None:
    rng = np.random.default_rng(1)
    if policy == "static":
        a: FeatureCache = StaticCache(np.arange(0, 40, 2), TABLE[0:40:2])
        b: FeatureCache = StaticCache(np.array([1]), TABLE[[1]])
    else:
        cls = LRUCache if policy == "lru" else FIFOCache
        a, b = cls(16, 6), cls(2, 6)
    for _ in range(10):
        ids = np.unique(rng.integers(0, 60, 12))
        hit, _ = a.lookup(ids)
        a.insert(ids[~hit], TABLE[ids[~hit]])
    b.load_state_dict(a.state_dict())
    assert b.stats == a.stats and b.capacity == a.capacity and len(b) == len(a)
    probe = rng.permutation(60)
    for _ in range(3):  # identical behaviour from here on, evictions included
        ha, _ = a.lookup(probe[:20])
        hb, rows = b.lookup(probe[:20])
        assert np.array_equal(ha, hb)
        np.testing.assert_array_equal(rows, TABLE[probe[:20][hb]])
        a.insert(probe[:20][~ha], TABLE[probe[:20][~ha]])
        b.insert(probe[:20][~hb], TABLE[probe[:20][~hb]])
        probe = np.roll(probe, 7)
    with pytest.raises(ValueError, match="does not match|expected 'static'"):
        (FIFOCache(4, 6) if policy != "fifo" else LRUCache(4, 6)).load_state_dict(a.state_dict())


def test_degree_and_presample_choose_the_top() -> None:
    cand = np.array([10, 11, 12, 13, 14])
    deg = np.array([5, 9, 1, 9, 0])
    assert degree_cache_ids(cand, deg, 3).tolist() == [11, 13, 10]  # ties -> smaller id
    assert degree_cache_ids(cand, deg, 99).tolist() == [11, 13, 10, 12, 14]
    with pytest.raises(ValueError, match="one degree per candidate"):
        degree_cache_ids(cand, deg[:2], 2)
    acc = np.array([4, 4, 4, 2, 2, 7])
    assert presample_ids(acc, 2).tolist() == [4, 2]
    assert presample_ids((np.array([1, 2, 3]), np.array([0, 5, 1])), 5).tolist() == [2, 3]
    assert out_degrees(np.array([0, 0, 2]), 4).tolist() == [2, 0, 1, 0]


def test_oracle_hit_rate() -> None:
    acc = np.array([1] * 6 + [2] * 3 + [3])
    assert oracle_hit_rate(acc, 0) == 0.0
    assert oracle_hit_rate(acc, 1) == pytest.approx(0.6)
    assert oracle_hit_rate(acc, 2) == pytest.approx(0.9)
    assert oracle_hit_rate((np.array([1, 2, 3]), np.array([6, 3, 1])), 10) == 1.0
    # no static cache of that size does better on these accesses
    for ids in ([1, 2], [1, 3], [2, 3]):
        c = StaticCache(np.array(ids), TABLE[ids])
        c.lookup(acc)
        assert c.stats.hit_rate <= oracle_hit_rate(acc, 2) + 1e-12


def test_resolve_capacity() -> None:
    assert resolve_capacity(0.1, 1000, 64) == 100
    assert resolve_capacity(250, 1000, 64) == 250
    assert resolve_capacity(6400, 1000, 64, unit="bytes") == 100
    assert resolve_capacity(1, 1000, 64, unit="rows") == 1
    assert resolve_capacity(1.0, 1000, 64) == 1000


def test_count_accesses_matches_brute_force(hub_graph: Graph, hub_source: CSRSource) -> None:
    s = NeighborSampler(hub_source, [4, 3])
    seeds = hub_graph.train_idx
    from samplers._kernels import mix_key

    want = np.concatenate([b.input_nodes for e in range(2)
                           for b in s.iter_batches(seeds, 50, mix_key(7, e))])
    got = count_accesses(s, seeds, 50, 2, key=7)
    ids, counts = np.unique(want, return_counts=True)
    assert np.array_equal(got.ids, ids) and np.array_equal(got.counts, counts)
    owned = count_accesses(s, seeds, 50, 2, key=7, exclude=(0, 300))
    assert owned.ids.min() >= 300 and np.array_equal(owned.counts, counts[ids >= 300])
    odd = count_accesses(s, seeds, 50, 2, key=7, only=lambda v: v % 2 == 1)
    assert np.array_equal(odd.ids, ids[ids % 2 == 1])


def test_build_cache_from_config(hub_graph: Graph, hub_source: CSRSource) -> None:
    from samplers import CacheConfig, build_cache

    def read(v: np.ndarray) -> np.ndarray:
        return hub_graph.x[v]

    assert build_cache(CacheConfig(policy="none"), dim=8, num_remote_rows=300) is None
    lru = build_cache(CacheConfig(policy="lru", size=0.1), dim=8, num_remote_rows=300)
    assert isinstance(lru, LRUCache) and lru.capacity == 30
    fifo = build_cache(CacheConfig(policy="fifo", size=64, unit="bytes"), dim=8, num_remote_rows=300)
    assert isinstance(fifo, FIFOCache) and fifo.capacity == 2
    cand = np.arange(300, 600)
    deg = out_degrees(hub_graph.indices, 600)[cand]
    c = build_cache(CacheConfig(policy="degree", size=10), dim=8, num_remote_rows=300,
                    read_rows=read, candidates=cand, degrees=deg)
    assert isinstance(c, StaticCache) and len(c) == 10
    hit, rows = c.lookup(cand[np.argsort(-deg, kind="stable")[:3]])
    assert hit.all() and np.array_equal(rows, read(cand[np.argsort(-deg, kind="stable")[:3]]))
    acc = count_accesses(NeighborSampler(hub_source, [3]), np.arange(0, 300), 64, 1, key=0,
                         exclude=(0, 300))
    p = build_cache(CacheConfig(policy="presample", size=0.05), dim=8, num_remote_rows=300,
                    read_rows=read, access_counts=acc)
    assert isinstance(p, StaticCache) and set(p.ids().tolist()) == set(presample_ids(acc, 15).tolist())
    with pytest.raises(ValueError, match="needs access_counts"):
        build_cache(CacheConfig(policy="presample", size=0.05), dim=8, num_remote_rows=300,
                    read_rows=read)


# ---- typed graphs: one cache per node type at the type's width

TYPES = np.repeat(np.arange(3), [200, 200, 100])  # 500 nodes: types 0, 1, 2
WIDTHS = (6, 2, 0)  # type 2 is featureless


def _typed_rows(ids: np.ndarray) -> np.ndarray:
    """Padded rows: each type's values in its own columns, zeros beyond."""
    out = TABLE[ids].copy()
    for t, w in enumerate(WIDTHS):
        out[TYPES[ids] == t, w:] = 0.0
    return out


def test_typed_cache_holds_each_type_at_its_width_and_reads_padded_rows() -> None:
    from samplers import CacheConfig, build_cache
    from samplers.cache import TypedFeatureCache

    remote = np.arange(100, 500)  # 100 of type 0, 200 of type 1, 100 of type 2
    c = build_cache(CacheConfig(policy="lru", size=0.5), dim=6, num_remote_rows=400,
                    candidates=remote, node_types=TYPES, type_widths=WIDTHS)
    assert isinstance(c, TypedFeatureCache)
    assert [x.capacity if x is not None else None for x in c.caches] == [50, 100, None]
    assert c.nbytes == 4 * (50 * 6 + 100 * 2)  # a padded cache of 150 rows would take 3,600
    ids = np.array([100, 300, 450, 120, 310])
    c.insert(ids, _typed_rows(ids))
    hit, rows = c.lookup(np.array([450, 310, 100, 101]))
    assert hit.tolist() == [False, True, True, False]  # the featureless type is not cached
    np.testing.assert_array_equal(rows, _typed_rows(np.array([310, 100])))
    assert (c.stats.hits, c.stats.misses) == (2, 2)
    assert c.stats.bytes_served == 4 * (2 + 6)
    # a checkpoint rebuilds it exactly
    again = build_cache(CacheConfig(policy="lru", size=0.5), dim=6, num_remote_rows=400,
                        candidates=remote, node_types=TYPES, type_widths=WIDTHS)
    assert isinstance(again, TypedFeatureCache)
    again.load_state_dict(c.state_dict())
    probe = np.array([100, 120, 300, 310, 450])
    assert again.lookup(probe)[0].tolist() == c.lookup(probe)[0].tolist()
    assert again.stats == c.stats
    with pytest.raises(ValueError, match="does not match this typed cache"):
        again.load_state_dict(LRUCache(4, 6).state_dict())


@pytest.mark.parametrize("policy", ["degree", "lru"])
def test_typed_cache_reads_hits_on_a_device_as_on_the_host(policy: str) -> None:
    """``lookup_on`` (``sampler.backend: torch``): the same hits and padded rows as
    ``lookup``, counted the same; a static policy's per-type caches serve them from their
    rows on the device, a dynamic one's are copied in."""
    import torch

    from samplers import CacheConfig, build_cache
    from samplers.cache import StaticCache, TypedFeatureCache

    remote = np.arange(100, 500)

    def make() -> TypedFeatureCache:
        c = build_cache(CacheConfig(policy=policy, size=0.5), dim=6, num_remote_rows=400, candidates=remote,
                        degrees=remote % 17, read_rows=_typed_rows, node_types=TYPES, type_widths=WIDTHS)
        assert isinstance(c, TypedFeatureCache)
        c.insert(remote, _typed_rows(remote))  # a dynamic cache keeps the last rows of each type
        return c

    host, dev = make(), make()
    probe = np.array([450, 310, 100, 101, 499, 250, 120, 310])
    want_hit, want_rows = host.lookup(probe)
    hit, rows = dev.lookup_on(probe, torch.device("cpu"))
    assert isinstance(rows, torch.Tensor) and want_hit.any() and not want_hit.all()
    assert hit.tolist() == want_hit.tolist()
    np.testing.assert_array_equal(rows.numpy(), want_rows)
    assert dev.stats == host.stats
    statics = [c for c in dev.caches if isinstance(c, StaticCache)]
    assert len(statics) == (2 if policy == "degree" else 0)
    assert all(list(c._on_device) == [torch.device("cpu")] for c in statics)


def test_typed_cache_sizes_give_every_type_the_same_share() -> None:
    from samplers import CacheConfig, build_cache
    from samplers.cache import TypedFeatureCache

    remote = np.arange(100, 500)
    remote_bytes = 4 * (100 * 6 + 200 * 2)  # type 2 has no columns
    # half of the 300 remote rows with features (type 2's 100 have none), in rows or in bytes
    for cfg, want in ((CacheConfig(policy="fifo", size=150), [50, 100]),
                      (CacheConfig(policy="fifo", size=remote_bytes / 2, unit="bytes"), [50, 100])):
        c = build_cache(cfg, dim=6, num_remote_rows=400, candidates=remote, node_types=TYPES,
                        type_widths=WIDTHS)
        assert isinstance(c, TypedFeatureCache)
        assert [x.capacity for x in c.caches[:2] if x is not None] == want
        assert c.caches[2] is None
    # a static policy picks each type's rows among that type's, one read for all of them
    deg = np.arange(remote.size)[::-1].astype(np.int64)  # smaller id, higher degree
    reads: list[np.ndarray] = []

    def read(v: np.ndarray) -> np.ndarray:
        reads.append(v)
        return _typed_rows(v)

    d = build_cache(CacheConfig(policy="degree", size=0.1), dim=6, num_remote_rows=400, read_rows=read,
                    candidates=remote, degrees=deg, node_types=TYPES, type_widths=WIDTHS)
    assert isinstance(d, TypedFeatureCache) and len(reads) == 1
    assert d.caches[0] is not None and d.caches[1] is not None
    assert sorted(d.caches[0].ids().tolist()) == list(range(100, 110))
    assert sorted(d.caches[1].ids().tolist()) == list(range(200, 220))
    with pytest.raises(ValueError, match="one width per node type"):
        build_cache(CacheConfig(policy="lru", size=0.5), dim=6, num_remote_rows=400,
                    candidates=remote, node_types=TYPES, type_widths=(6, 2))


def test_typed_cache_size_per_type() -> None:
    from samplers import CacheConfig, build_cache
    from samplers.cache import TypedFeatureCache

    remote = np.arange(100, 500)  # 100 of type 0, 200 of type 1, 100 (featureless) of type 2
    names = ("paper", "author", "field")
    for size, unit, want in (({"paper": 0.5, "author": 10}, "auto", [50, 10]),
                             ({"author": 0.25}, "auto", [None, 50]),
                             ({"paper": 24 * 7, "author": 8 * 7}, "bytes", [7, 7])):
        c = build_cache(CacheConfig(policy="lru", size=size, unit=unit), dim=6, num_remote_rows=400,
                        candidates=remote, node_types=TYPES, type_widths=WIDTHS, type_names=names)
        assert isinstance(c, TypedFeatureCache)
        assert [x.capacity if x is not None else None for x in c.caches] == [*want, None], size
    with pytest.raises(ValueError, match=r"\['venue'\] are not node types.*'paper', 'author', 'field'"):
        build_cache(CacheConfig(policy="lru", size={"venue": 0.5}), dim=6, num_remote_rows=400,
                    candidates=remote, node_types=TYPES, type_widths=WIDTHS, type_names=names)
    with pytest.raises(ValueError, match="needs a typed graph"):
        build_cache(CacheConfig(policy="lru", size={"paper": 0.5}), dim=6, num_remote_rows=400)
    with pytest.raises(ValueError, match=r"size.paper=-1.0: must be >= 0"):
        CacheConfig(policy="lru", size={"paper": -1.0})

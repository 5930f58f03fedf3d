"""Correctness of the neighbour sampler: sampled edges, fanouts, block contract, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from partition.graph import Graph
from samplers import CSRSource, NeighborSampler, SampledBatch
from tests.samplers.conftest import edge_set

FANOUTS = [6, 4, 3]


def _check_batch(b: SampledBatch, g: Graph, fanouts: list[int], replace: bool) -> None:
    """Every invariant of the SampledBatch / Block contract, against the graph."""
    edges = edge_set(g.indptr, g.indices)
    deg = g.in_degrees()
    B = b.seeds.size
    assert np.array_equal(b.input_nodes[:B], b.seeds)
    assert np.unique(b.input_nodes).size == b.input_nodes.size
    assert len(b.blocks) == len(fanouts)
    assert b.blocks[-1].num_dst == B
    assert b.blocks[0].num_src == b.input_nodes.size
    for lo, hi in zip(b.blocks[:-1], b.blocks[1:], strict=True):
        assert lo.num_dst == hi.num_src
    total = 0
    # blocks[-1] was built with fanouts[0]
    for blk, fanout in zip(b.blocks, fanouts[::-1], strict=True):
        ei = blk.edge_index.numpy()
        assert ei.dtype == np.int64 and ei.shape[0] == 2
        src, dst = ei
        assert (src >= 0).all() and (src < blk.num_src).all()
        assert (dst >= 0).all() and (dst < blk.num_dst).all()
        gsrc, gdst = b.input_nodes[src], b.input_nodes[dst]
        assert all((int(u), int(v)) in edges for u, v in zip(gsrc, gdst, strict=True))
        got = np.bincount(dst, minlength=blk.num_dst)
        want_deg = deg[b.input_nodes[:blk.num_dst]]
        if fanout == -1:
            assert np.array_equal(got, want_deg)
        elif replace:
            assert np.array_equal(got, np.where(want_deg > 0, fanout, 0))
        else:
            assert np.array_equal(got, np.minimum(want_deg, fanout))
            # no duplicate (src, dst) pair within a block
            assert np.unique(src * blk.num_src + dst).size == src.size
        # every src node beyond the dst prefix was reached by some edge of this block
        assert set(range(blk.num_dst, blk.num_src)) <= set(src.tolist())
        total += src.size
    assert total == b.num_sampled_edges


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("relabel", ["dense", "hash"])
def test_batch_invariants(hub_graph: Graph, hub_source: CSRSource, replace: bool,
                          relabel: str) -> None:
    s = NeighborSampler(hub_source, FANOUTS, replace=replace, relabel=relabel)  # type: ignore[arg-type]
    seeds = np.random.default_rng(0).choice(hub_graph.num_nodes, 40, replace=False)
    _check_batch(s.sample(seeds, key=3), hub_graph, FANOUTS, replace)


def test_fanout_at_least_degree_takes_all(hub_graph: Graph, hub_source: CSRSource) -> None:
    big = int(hub_graph.in_degrees().max())
    for fanouts in ([big, big], [-1, -1]):
        s = NeighborSampler(hub_source, fanouts)
        b = s.sample(np.arange(0, 600, 7), key=1)
        _check_batch(b, hub_graph, [-1, -1], replace=False)


def test_large_fanout_path_has_no_duplicates(hub_graph: Graph, hub_source: CSRSource) -> None:
    """Fanouts above 32 use Floyd's algorithm with a hash set instead of a linear scan."""
    s = NeighborSampler(hub_source, [40, 50])
    hubs = np.argsort(hub_graph.in_degrees())[-20:]
    _check_batch(s.sample(hubs, key=9), hub_graph, [40, 50], replace=False)


def test_same_key_same_batch_and_keys_differ(hub_source: CSRSource) -> None:
    s = NeighborSampler(hub_source, FANOUTS)
    seeds = np.arange(10, 60)
    a, b, c = s.sample(seeds, 5), s.sample(seeds, 5), s.sample(seeds, 6)
    assert np.array_equal(a.input_nodes, b.input_nodes)
    for x, y in zip(a.blocks, b.blocks, strict=True):
        assert np.array_equal(x.edge_index.numpy(), y.edge_index.numpy())
    assert not np.array_equal(a.input_nodes, c.input_nodes)


def _per_node(seeds: np.ndarray, counts: np.ndarray, nbrs: np.ndarray) -> dict[int, list[int]]:
    off = np.concatenate([[0], np.cumsum(counts)])
    return {int(v): nbrs[off[i]:off[i + 1]].tolist() for i, v in enumerate(seeds)}


@pytest.mark.parametrize("replace", [False, True])
def test_draw_depends_only_on_key_and_node(hub_source: CSRSource, replace: bool) -> None:
    """The distributed-equivalence contract: order and grouping of seeds do not matter."""
    seeds = np.random.default_rng(1).permutation(600)[:300]
    whole = _per_node(seeds, *_nb(hub_source.sample_neighbors(seeds, 5, replace=replace, key=11)))
    rev = seeds[::-1].copy()
    assert _per_node(rev, *_nb(hub_source.sample_neighbors(rev, 5, replace=replace, key=11))) == whole
    parts: dict[int, list[int]] = {}
    for chunk in np.array_split(seeds, 7):
        parts.update(_per_node(chunk, *_nb(hub_source.sample_neighbors(chunk, 5, replace=replace,
                                                                       key=11))))
    assert parts == whole


def _nb(n):  # type: ignore[no-untyped-def]
    return n.counts, n.nbrs


def test_partition_source_matches_whole_graph(hub_graph: Graph, hub_source: CSRSource) -> None:
    """A CSRSource over one contiguous slice of rows samples exactly what the whole graph does."""
    lo, hi = 200, 450
    part = CSRSource(hub_graph.indptr[lo:hi + 1] - hub_graph.indptr[lo],
                     hub_graph.indices[hub_graph.indptr[lo]:hub_graph.indptr[hi]],
                     row_offset=lo, num_nodes=hub_graph.num_nodes)
    seeds = np.arange(lo, hi, 3)
    for replace in (False, True):
        a = part.sample_neighbors(seeds, 4, replace=replace, key=2)
        b = hub_source.sample_neighbors(seeds, 4, replace=replace, key=2)
        assert np.array_equal(a.counts, b.counts) and np.array_equal(a.nbrs, b.nbrs)


def test_threaded_epoch_equals_sequential(hub_graph: Graph, hub_source: CSRSource) -> None:
    s = NeighborSampler(hub_source, FANOUTS)
    seq = list(s.iter_batches(hub_graph.train_idx, 64, key=4))
    par = list(s.iter_batches(hub_graph.train_idx, 64, key=4, num_threads=2))
    assert len(seq) == len(par) == -(-hub_graph.train_idx.size // 64)
    for a, b in zip(seq, par, strict=True):
        assert np.array_equal(a.input_nodes, b.input_nodes)
        assert all(np.array_equal(x.edge_index.numpy(), y.edge_index.numpy())
                   for x, y in zip(a.blocks, b.blocks, strict=True))
    covered = np.sort(np.concatenate([b.seeds for b in seq]))
    assert np.array_equal(covered, hub_graph.train_idx)  # one epoch visits every seed once
    assert len(list(s.iter_batches(hub_graph.train_idx, 64, key=4, drop_last=True))) == \
        hub_graph.train_idx.size // 64


def test_isolated_seeds_and_empty_batch() -> None:
    indptr = np.array([0, 0, 1, 1], dtype=np.int64)  # node 1 <- node 0; nodes 0, 2 isolated
    src = CSRSource(indptr, np.array([0], dtype=np.int64))
    s = NeighborSampler(src, [3, 3])
    b = s.sample(np.array([2, 0]), key=0)
    assert b.num_sampled_edges == 0 and b.input_nodes.tolist() == [2, 0]
    b = s.sample(np.array([1]), key=0)
    assert b.input_nodes.tolist() == [1, 0] and b.blocks[-1].edge_index.tolist() == [[1], [0]]
    empty = s.sample(np.array([], dtype=np.int64), key=0)
    assert empty.input_nodes.size == 0 and all(blk.num_edges == 0 for blk in empty.blocks)
    # the scratch map is clean again after every batch, including after a failure
    with pytest.raises(ValueError):
        s.sample(np.array([1, 1]), key=0)
    assert s.sample(np.array([1]), key=0).input_nodes.tolist() == [1, 0]


def test_weighted_never_draws_zero_weight(hub_graph: Graph) -> None:
    w = np.random.default_rng(0).random(hub_graph.num_edges)
    w[::3] = 0.0
    src = CSRSource.from_graph(hub_graph, edge_weight=w)
    zero = {(int(u), int(v)) for u, v in zip(
        hub_graph.indices[w == 0], np.repeat(np.arange(600), hub_graph.in_degrees())[w == 0],
        strict=True)}
    pos_deg = np.bincount(np.repeat(np.arange(600), hub_graph.in_degrees())[w > 0], minlength=600)
    for replace in (False, True):
        s = NeighborSampler(src, [5, -1], weighted=True, replace=replace)
        b = s.sample(np.arange(0, 600, 5), key=1)
        for blk, f in zip(b.blocks, [-1, 5], strict=True):
            gs, gd = b.input_nodes[blk.edge_index.numpy()]
            assert not ({(int(u), int(v)) for u, v in zip(gs, gd, strict=True)} & zero)
            got = np.bincount(blk.edge_index[1].numpy(), minlength=blk.num_dst)
            pd = pos_deg[b.input_nodes[:blk.num_dst]]
            if f == -1:
                assert np.array_equal(got, pd)
            elif replace:
                assert np.array_equal(got, np.where(pd > 0, f, 0))
            else:
                assert np.array_equal(got, np.minimum(pd, f))


def test_from_config(hub_source: CSRSource) -> None:
    from samplers import SamplerConfig

    s = NeighborSampler.from_config(hub_source, SamplerConfig(fanouts=[4, -1], replace=True))
    assert s.fanouts == [4, -1] and s.replace and not s.weighted


SETTLED = """
import numpy as np
import numba.core.typing.typeof as typing
from samplers.local import CSRSource
registered = len(typing.typeof_impl.registry)
CSRSource(np.array([0, 2, 3, 3]), np.array([1, 2, 0])).sample_neighbors(np.arange(3), 2, replace=False, key=1)
print(registered, len(typing.typeof_impl.registry))
"""


def test_importing_the_sampler_settles_numba_before_any_thread_samples() -> None:
    """Numba's first kernel call registers argument types with a dispatcher that is not
    thread-safe while it changes; importing the sampler must have done that already, so two
    threads' first samples cannot meet it (a fresh process, as a worker is)."""
    import subprocess
    import sys

    from tests.conftest import REPO

    got = subprocess.run([sys.executable, "-c", SETTLED], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert got.returncode == 0, got.stderr[-2000:]
    before, after = got.stdout.split()
    assert before == after

"""``sampler.backend: torch`` (:mod:`samplers.device`): the numba kernels' draw in torch ops,
here on CPU tensors (the same ops run on a GPU). Equal neighbour for neighbour, in the same
order, to :class:`~samplers.CSRSource` for every kind of draw; equal block for block through
the sampler, untyped and typed, with and without excluded target edges; a training run ends
bit for bit where the numba run does, one process (every hop on the device) and two
workers (the torch draw, relabelled on the host)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from gnntrain.config import SyntheticHeteroConfig
from gnntrain.data.hetero import to_training_graph
from gnntrain.data.hetero_synthetic import generate_hetero
from gnntrain.runtime.coordinator import run_training
from gnntrain.runtime.dist_source import DistFeatureReader
from gnntrain.runtime.driver import fit
from gnntrain.runtime.loopback import LoopbackGroup
from gnntrain.tasks import NodeClassification
from partition.feature_rows import TypedRows
from partition.graph import Graph
from samplers import CSRSource, GraphSource, Neighbors, NeighborSampler, SamplerError
from samplers.base import Fanout
from samplers.cache import TypedFeatureCache
from samplers.device import TorchCSRSource
from tests.conftest import make_graph
from tests.runtime.helpers import assert_same_state, final_state, tiny_cfg
from tests.samplers.conftest import make_hub_graph

KEYS = (0, 7, 2**64 - 3)  # the top bit set: unsigned keys past int64
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                                 reason="needs a CUDA device"))]


@pytest.fixture(scope="module")
def hubs() -> Graph:
    return make_hub_graph()


@pytest.fixture(scope="module")
def typed() -> Graph:
    return to_training_graph(generate_hetero(SyntheticHeteroConfig(papers=300, authors=300, institutions=10,
                                                                   fields=20, seed=1), add_reverse=True))


def _same(a: object, b: object) -> None:
    for name in ("counts", "nbrs", "rels"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y), f"{name} differ"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("fanout", "replace"), list(itertools.product([1, 5, 33, 150, -1], [False, True])))
def test_every_draw_equals_the_numba_kernels(hubs: Graph, fanout: int, replace: bool, device: str) -> None:
    """Fanouts below and above the kernel's small/hashed Floyd switch (32) and above most
    degrees, with and without replacement, on the rows a part owns (a row offset)."""
    lo, hi = 2, 450  # the hubs are the first ids
    rows = slice(lo, hi + 1)
    indptr = hubs.indptr[rows] - hubs.indptr[lo]
    indices = hubs.indices[hubs.indptr[lo]:hubs.indptr[hi]]
    ref = CSRSource(indptr, indices, row_offset=lo, num_nodes=hubs.num_nodes)
    dev = TorchCSRSource.of(ref, device)
    seeds = np.random.default_rng(fanout + 7).permutation(np.arange(lo, hi))
    if fanout > 0:  # the draw really samples a subset of some rows
        assert (np.diff(indptr)[seeds - lo] > fanout).any()
    for key in KEYS:
        _same(dev.sample_neighbors(seeds, fanout, replace=replace, key=key),
              ref.sample_neighbors(seeds, fanout, replace=replace, key=key))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fanout", [7, (3, 0, 2, -1, 1, 4, 0, 5), (40, 1, 1, 1, 1, 1, 1, 1)])
def test_typed_draws_equal_the_numba_kernels(typed: Graph, fanout: int | tuple[int, ...], device: str) -> None:
    ref = CSRSource.from_graph(typed)
    assert ref.num_relations == len(typed.edge_type_names) == 8
    dev = TorchCSRSource.of(ref, device)
    seeds = np.random.default_rng(1).choice(typed.num_nodes, 400, replace=False)
    for key, replace in itertools.product(KEYS, (False, True)):
        _same(dev.sample_neighbors(seeds, fanout, replace=replace, key=key),
              ref.sample_neighbors(seeds, fanout, replace=replace, key=key))


class _HostLoop(GraphSource):
    """A source's draws without its device: the sampler relabels on the host."""

    def __init__(self, source: GraphSource) -> None:
        self.source = source
        self.num_nodes = source.num_nodes

    def sample_neighbors(self, seeds: np.ndarray, fanout: Fanout, *, replace: bool, key: int) -> Neighbors:
        return self.source.sample_neighbors(seeds, fanout, replace=replace, key=key)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("loop", ["device", "host"])
@pytest.mark.parametrize("graph", ["hubs", "typed"])
def test_blocks_equal_with_and_without_excluded_edges(graph: str, loop: str, device: str,
                                                      request: pytest.FixtureRequest) -> None:
    """Every hop on the device (draw, excluded edges dropped, relabelling, blocks), or the
    torch draw under the host's relabelling (what a worker of several does): the numba
    sampler's batch, block for block."""
    g: Graph = request.getfixturevalue(graph)
    fanouts = [10, 5, 3] if graph == "hubs" else [(4, 2, 2, 1, 3, 2, 1, 1), 6]
    ref = NeighborSampler(CSRSource.from_graph(g), fanouts)
    torch_source = TorchCSRSource.of(CSRSource.from_graph(g), device)
    dev = NeighborSampler(torch_source if loop == "device" else _HostLoop(torch_source), fanouts)
    on = torch.device(device) if loop == "device" else torch.device("cpu")
    rng = np.random.default_rng(2)
    src, dst = g.edge_index()
    for b in range(4):
        seeds = rng.choice(g.num_nodes, 64, replace=False)
        pick = rng.choice(src.size, 200, replace=False)
        exclude = None if b % 2 == 0 else np.stack([np.r_[src[pick], dst[pick]], np.r_[dst[pick], src[pick]]], 1)
        want, got = ref.sample(seeds, key=b, exclude=exclude), dev.sample(seeds, key=b, exclude=exclude)
        assert isinstance(got.input_nodes, np.ndarray) and np.array_equal(got.input_nodes, want.input_nodes)
        assert got.num_sampled_edges == want.num_sampled_edges > 0
        if exclude is not None:  # some sampled edges were excluded
            assert got.num_sampled_edges < ref.sample(seeds, key=b).num_sampled_edges
        for x, y in zip(got.blocks, want.blocks, strict=True):
            assert (x.num_src, x.num_dst) == (y.num_src, y.num_dst)
            assert x.edge_index.device.type == on.type and x.indptr is not None
            assert torch.equal(x.edge_index.cpu(), y.edge_index) and torch.equal(x.indptr.cpu(), y.indptr)
            assert (x.edge_rel is None) == (graph == "hubs")
            if x.edge_rel is not None:
                assert torch.equal(x.edge_rel.cpu(), y.edge_rel)


def test_the_device_loop_refuses_repeated_seeds_and_leaves_its_map_clean(hubs: Graph) -> None:
    sampler = NeighborSampler(TorchCSRSource.of(CSRSource.from_graph(hubs), "cpu"), [5, 5])
    ref = NeighborSampler(CSRSource.from_graph(hubs), [5, 5])
    with pytest.raises(SamplerError, match="seeds: node 9 appears more than once"):
        sampler.sample(np.array([3, 9, 4, 9, 3]), key=1)
    seeds = np.array([9, 3, 4, 100])
    got, want = sampler.sample(seeds, key=1), ref.sample(seeds, key=1)
    assert np.array_equal(got.input_nodes, want.input_nodes)
    assert all(torch.equal(x.edge_index, y.edge_index) for x, y in zip(got.blocks, want.blocks, strict=True))
    assert sampler._device_scratch is not None
    maps = sampler._device_scratch.maps()
    assert bool((maps.local == -1).all()) and bool((maps.first == maps.first.max()).all())  # reset after each batch


def test_a_single_process_run_samples_and_gathers_on_the_device_and_ends_as_the_numba_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"device": 0, "host": 0}

    def count(name: str, method: Any) -> Any:
        def counted(self: TorchCSRSource, *a: Any, **kw: Any) -> Any:
            calls[name] += 1
            return method(self, *a, **kw)
        return counted

    monkeypatch.setattr(TorchCSRSource, "draw_on_device", count("device", TorchCSRSource.draw_on_device))
    monkeypatch.setattr(TorchCSRSource, "sample_neighbors", count("host", TorchCSRSource.sample_neighbors))
    rows: list[type] = []
    read = DistFeatureReader.read
    monkeypatch.setattr(DistFeatureReader, "read", lambda self, ids: rows.append(type(out := read(self, ids))) or out)
    g = make_graph(300, seed=5)
    runs = []
    for b in ("numba", "torch"):
        rows.clear()
        runs.append(run_training(tiny_cfg(tmp_path / b, f"sampler.backend={b}"), single_process=True, graph=g,
                                 progress=False))
        # the torch run drew on the device, and nothing came back to the host between hops;
        # its feature rows were gathered from the table on the device
        assert (calls["device"] > 0, calls["host"]) == (b == "torch", 0)
        assert rows and set(rows) == {torch.Tensor if b == "torch" else np.ndarray}
    assert_same_state(final_state(runs[1]), final_state(runs[0]))


def test_a_typed_single_process_run_ends_as_the_numba_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """R-GCN on the MAG-shaped graph: relations and node types through the device loop, the
    feature rows gathered from the per-type tables on the device."""
    from tests.runtime.test_typed_training import GRAPH, typed_cfg

    rows: list[type] = []
    read = DistFeatureReader.read
    monkeypatch.setattr(DistFeatureReader, "read", lambda self, ids: rows.append(type(out := read(self, ids))) or out)
    runs = []
    for b in ("numba", "torch"):
        rows.clear()
        runs.append(run_training(typed_cfg(tmp_path / b, f"sampler.backend={b}", "train.epochs=1"),
                                 single_process=True, graph=GRAPH, progress=False))
        assert rows and set(rows) == {torch.Tensor if b == "torch" else np.ndarray}
    assert_same_state(final_state(runs[1]), final_state(runs[0]))


@pytest.mark.parametrize("graph", ["untyped", "typed"])
def test_two_workers_end_as_the_numba_workers_and_move_the_same_bytes(tmp_path: Path, graph: str) -> None:
    """Each worker runs its hops on the device, draws its own rows there and answers its
    peer's requests with them, the same requests as numba's workers (no dropout: the two
    workers of the in-process group share torch's random stream), with a pre-sampled static
    cache whose hits are gathered on the device (typed: one per node type). Typed: R-GCN,
    relations of remote rows included."""
    from partition.training_set import build_training_set
    from tests.runtime.test_typed_training import GRAPH, typed_cfg

    g = make_graph(400, seed=3) if graph == "untyped" else GRAPH
    states, comm = [], []
    for b in ("numba", "torch"):
        make_cfg = tiny_cfg if graph == "untyped" else typed_cfg
        cache = ("sampler.cache.policy=presample", "sampler.cache.size=0.3")
        cfg = make_cfg(tmp_path / b, f"sampler.backend={b}", "model.dropout=0.0", *cache, workers=2)
        ts = build_training_set(g, cfg.partition, tmp_path / b / "parts")
        group = LoopbackGroup(cfg, [ts.load_part(p) for p in range(2)], np.asarray(ts.global_degrees()),
                              int(ts.num_classes), cfg.model.arch, NodeClassification(),
                              node_types=ts.node_types() if graph == "typed" else None)
        try:
            assert all(isinstance(w.access.local, TorchCSRSource) == (b == "torch") for w in group.workers)
            # the hop loop on the device, peers' rows asked through the host; the own feature
            # rows gathered on the device (a typed part's from one table per node type)
            assert all((w.access.source.device is not None) == (b == "torch") for w in group.workers)
            assert all((w.access.reader.table is not None) == (b == "torch") for w in group.workers)
            if b == "torch" and graph == "typed":
                assert all(isinstance(w.access.reader.x_local, TypedRows)
                           and len(w.access.reader.table.tables) == len(w.access.reader.x_local.tables) > 1
                           for w in group.workers)
            res = fit(cfg, group, None, NodeClassification(), progress=False)
            for w in group.workers:
                cache_of = w.access.reader.cache
                assert cache_of is not None and w.access.reader.stats.cache_hits > 0
                statics = cache_of.caches if isinstance(cache_of, TypedFeatureCache) else [cache_of]
                assert statics and all(
                    list(c._on_device) == ([torch.device("cpu")] if b == "torch" else [])
                    for c in statics if c is not None)
            states.append([w.model.state_dict() for w in group.workers])
            comm.append([(r["loss"], r["comm"]["by_category"]) for r in res.epochs])
        finally:
            group.shutdown()
    assert comm[1] == comm[0] and comm[0][0][1]["sample"] > 0  # the workers asked each other
    for got, want in zip(states[1], states[0], strict=True):
        assert all(torch.equal(got[k], want[k]) for k in want)


def test_weighted_sampling_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="backend='torch' with weighted=true: weighted sampling has no torch draw"):
        tiny_cfg(tmp_path, "sampler.backend=torch", "sampler.weighted=true")
    weighted = CSRSource(np.array([0, 1, 2]), np.array([1, 0]), edge_weight=np.ones(2))
    with pytest.raises(SamplerError, match="weighted sampling has no torch draw"):
        TorchCSRSource.of(weighted, "cpu")


def test_a_csr_larger_than_the_gpus_free_memory_is_read_from_host_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The choice, made before anything is copied: a CSR of more bytes than the GPU has free
    is mapped from page-locked host memory (zero-copy), one that fits is copied."""
    g = make_graph(300, seed=5)
    need = 8 * (g.indptr.size + g.indices.size)
    for free, mapped in ((need - 1, True), (need, False)):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None, free=free: (free, 8 * need))
        src = TorchCSRSource(g.indptr, g.indices, device="cuda")
        assert src.zero_copy == mapped and src._on_device == {}  # nothing copied yet


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_gpu_draws_the_same_neighbours_from_a_csr_in_host_memory(
        hubs: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    """Zero-copy: the CSR's arrays stay in page-locked host memory (no GPU memory taken by
    them) and the draws equal the host kernels'."""
    from samplers.device import device_tensor

    before = torch.cuda.memory_allocated()
    view = device_tensor(hubs.indices, torch.device("cuda"), mapped=True)
    assert view.device.type == "cuda" and torch.cuda.memory_allocated() == before
    got = view[torch.arange(0, hubs.indices.size, 7, device="cuda")]  # a gather by a GPU kernel
    assert got.device.type == "cuda" and np.array_equal(got.cpu().numpy(), hubs.indices[::7])
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (0, 1 << 30))
    src = TorchCSRSource(hubs.indptr, hubs.indices, device="cuda")
    assert src.zero_copy
    ref = CSRSource(hubs.indptr, hubs.indices)
    seeds = np.arange(0, hubs.num_nodes, 3)
    for fanout, replace in ((5, False), (5, True), (-1, False)):
        _same(src.sample_neighbors(seeds, fanout, replace=replace, key=7),
              ref.sample_neighbors(seeds, fanout, replace=replace, key=7))


@pytest.mark.parametrize("device", DEVICES)
def test_the_prefetching_pipeline_makes_the_batches_made_in_step(device: str) -> None:
    """The batch pipeline on a device: batches made ahead on the background thread (on a
    GPU on a CUDA stream of its own, each with a ``ready`` event the consumer's stream
    waits on) equal, tensor for tensor, the batches made in step with no prefetch."""
    from gnntrain.engine import BatchPipeline
    from gnntrain.models import BlockNeeds
    from gnntrain.tasks import SeedBatch
    from tests.runtime.test_routing import policy_over

    g = make_hub_graph()
    dev = torch.device(device)
    sampler = NeighborSampler(TorchCSRSource(g.indptr, g.indices, device=dev), [4, 3])
    reader = DistFeatureReader(g.x, policy_over([0, g.num_nodes], 0), g.in_degrees(), device=dev)
    batches = [SeedBatch(ids) for ids in np.array_split(g.train_idx, 6)]
    runs = []
    for prefetch in (0, 2):
        pipe = BatchPipeline(sampler, reader, lambda b: g.y[b.nodes], batches, [11 * i for i in range(6)],
                             prefetch=prefetch, needs=BlockNeeds(degrees=True), device=dev)
        try:
            items = list(pipe)
        finally:
            pipe.close()
        on_stream = prefetch > 0 and device == "cuda"
        assert all((it.ready is not None) == on_stream for it in items)
        if on_stream:  # copied to the device on the stream: the step's copy has nothing left to do
            assert all(it.batch is not None and {t.device.type for t in it.batch.tensors()} == {"cuda"}
                       for it in items)
        runs.append(items)
    for a, b in zip(*runs, strict=True):
        assert a.batch is not None and b.batch is not None
        assert np.array_equal(a.input_nodes, b.input_nodes)
        assert all(torch.equal(x, y) for x, y in zip(a.batch.to(dev).tensors(), b.batch.to(dev).tensors(),
                                                     strict=True))

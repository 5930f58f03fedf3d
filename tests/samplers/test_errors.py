"""Bad input fails early with a message naming the argument, the value and what is allowed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from samplers import (
    CSRSource,
    LRUCache,
    NeighborSampler,
    SamplerConfig,
    SamplerError,
    StaticCache,
    count_accesses,
    degree_cache_ids,
    prepare,
    resolve_capacity,
)


def test_sampler_error_is_value_error() -> None:
    assert issubclass(SamplerError, ValueError)


def test_empty_fanouts(hub_source: CSRSource) -> None:
    with pytest.raises(ValueError, match=r"fanouts is empty"):
        NeighborSampler(hub_source, [])


@pytest.mark.parametrize("bad", [0, -2, -7])
def test_bad_fanout_value(hub_source: CSRSource, bad: int) -> None:
    with pytest.raises(ValueError, match=rf"fanouts\[1\]={bad}: must be >= 1, or -1"):
        NeighborSampler(hub_source, [5, bad])
    with pytest.raises(ValueError, match=rf"fanout={bad}"):
        hub_source.sample_neighbors(np.arange(3), bad, replace=False, key=0)


def test_fanout_wrong_type(hub_source: CSRSource) -> None:
    with pytest.raises(ValueError, match=r"fanouts\[0\]=2.5"):
        NeighborSampler(hub_source, [2.5])  # type: ignore[list-item]


def test_config_rejects_the_same(hub_source: CSRSource) -> None:
    with pytest.raises(ValueError, match="fanouts"):
        SamplerConfig(fanouts=[])
    with pytest.raises(ValueError, match="batch_size"):
        SamplerConfig(batch_size=0)


@pytest.mark.parametrize("bs", [0, -5])
def test_batch_size(hub_source: CSRSource, bs: int) -> None:
    s = NeighborSampler(hub_source, [3])
    with pytest.raises(ValueError, match=rf"batch_size={bs}: must be an int >= 1"):
        s.iter_batches(np.arange(10), bs, key=0)
    with pytest.raises(ValueError, match=rf"batch_size={bs}"):
        count_accesses(s, np.arange(10), bs, 1, key=0)


def test_num_threads(hub_source: CSRSource) -> None:
    with pytest.raises(ValueError, match="num_threads=0"):
        NeighborSampler(hub_source, [3]).iter_batches(np.arange(10), 4, key=0, num_threads=0)


@pytest.mark.parametrize("bad", [600, 10_000, -1])
def test_seeds_out_of_range(hub_source: CSRSource, bad: int) -> None:
    s = NeighborSampler(hub_source, [3])
    with pytest.raises(ValueError, match=rf"seeds: node id {bad} is outside the allowed range \[0, 600\)"):
        s.sample(np.array([1, bad, 2]), key=0)


def test_seeds_outside_partition_rows(hub_source: CSRSource) -> None:
    part = CSRSource(np.array([0, 1, 1]), np.array([5]), row_offset=10, num_nodes=20)
    with pytest.raises(ValueError, match=r"node id 12 is outside the allowed range \[10, 12\)"):
        part.sample_neighbors(np.array([10, 12]), 2, replace=False, key=0)


def test_seeds_must_be_unique_integers(hub_source: CSRSource) -> None:
    s = NeighborSampler(hub_source, [3])
    with pytest.raises(ValueError, match="node 4 appears more than once"):
        s.sample(np.array([4, 5, 4]), key=0)
    with pytest.raises(ValueError, match="expected integer node ids, got dtype float64"):
        s.sample(np.array([1.0, 2.0]), key=0)
    with pytest.raises(ValueError, match="1-d array"):
        s.sample(np.zeros((2, 2), dtype=np.int64), key=0)


def test_weighted_flag_must_match_source(hub_source: CSRSource) -> None:
    with pytest.raises(ValueError, match="weighted=True but the source has no edge weights"):
        NeighborSampler(hub_source, [3], weighted=True)
    w = CSRSource(hub_source.indptr, hub_source.indices, edge_weight=np.ones(hub_source.indices.size))
    with pytest.raises(ValueError, match="weighted=False but the source samples by edge weight"):
        NeighborSampler(w, [3])


def test_bad_csr_inputs() -> None:
    with pytest.raises(ValueError, match="indptr: must start at 0"):
        CSRSource(np.array([0, 2]), np.array([0]))
    with pytest.raises(ValueError, match=r"neighbour id 7 is outside \[0, num_nodes=2\)"):
        CSRSource(np.array([0, 1, 1]), np.array([7]))
    with pytest.raises(ValueError, match="edge_weight: weights must be finite and >= 0"):
        CSRSource(np.array([0, 1, 1]), np.array([1]), edge_weight=np.array([-1.0]))
    with pytest.raises(ValueError, match="edge_weight: expected one weight per edge"):
        CSRSource(np.array([0, 1, 1]), np.array([1]), edge_weight=np.ones(3))


def test_cache_capacity_negative_and_clamped() -> None:
    with pytest.raises(ValueError, match=r"cache size=-0.5: must be >= 0"):
        resolve_capacity(-0.5, 100, 16)
    with pytest.raises(ValueError, match=r"capacity=-1: must be an int >= 0"):
        LRUCache(-1, 4)
    with pytest.raises(ValueError, match=r"capacity=-3"):
        degree_cache_ids(np.arange(3), np.ones(3), -3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert resolve_capacity(500, 100, 16) == 100
        assert resolve_capacity(10_000, 100, 16, unit="bytes") == 100
    assert len(caught) == 2  # one warning per oversized request, naming the clamp
    assert "clamping the capacity to 100" in str(caught[0].message)
    with pytest.raises(ValueError, match="whole number"):
        resolve_capacity(2.5, 100, 16)


def test_cache_row_shape_errors() -> None:
    c = LRUCache(4, 3)
    with pytest.raises(ValueError, match=r"rows: expected shape \(2, 3\), got \(2, 4\)"):
        c.insert(np.array([1, 2]), np.zeros((2, 4), dtype=np.float32))
    with pytest.raises(ValueError, match="unique ids"):
        StaticCache(np.array([1, 1]), np.zeros((2, 3), dtype=np.float32))


def test_prepare_shape_errors(hub_source: CSRSource) -> None:
    b = NeighborSampler(hub_source, [3]).sample(np.arange(4), key=0)
    with pytest.raises(ValueError, match=r"x: expected \[len\(input_nodes\)="):
        prepare(b, np.zeros((1, 8), dtype=np.float32), np.zeros(4))
    # targets are the task's (labels of the seeds, or pairs for link prediction): their
    # shape is the task's to check; degrees must cover every input node
    with pytest.raises(ValueError, match=r"deg: expected \d+ values \(one per input node\)"):
        prepare(b, np.zeros((b.input_nodes.size, 8), dtype=np.float32), np.zeros(4),
                deg=np.ones(b.input_nodes.size - 1, dtype=np.float32))
    with pytest.raises(ValueError, match=r"node_type: expected \d+ values"):
        prepare(b, np.zeros((b.input_nodes.size, 8), dtype=np.float32), np.zeros(4),
                node_type=np.zeros(b.input_nodes.size + 1, dtype=np.int64))


def test_import_boundary() -> None:
    """samplers/ never pulls in Ray or anything of gnntrain (design rule; the static
    check of every import is tests/test_layering.py)."""
    import subprocess
    import sys

    code = ("import sys, samplers, samplers.dgl, samplers.cache, samplers.neighbor; "
            "bad = [m for m in sys.modules if m == 'ray' or m.startswith('ray.') or "
            "m == 'gnntrain' or m.startswith('gnntrain.')]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

"""A typed part's features held per node type, each at its own width, read back padded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from partition.feature_rows import TypedRows, used_width


def padded_rows(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """40 rows of 3 types interleaved: type 0 uses 7 of 10 columns, type 1 none, type 2 all."""
    rng = np.random.default_rng(seed)
    types = rng.integers(0, 3, size=40)
    x = np.zeros((40, 10), dtype=np.float32)
    x[types == 0, :7] = rng.normal(size=(int((types == 0).sum()), 7))
    x[types == 2] = rng.normal(size=(int((types == 2).sum()), 10))
    x[np.flatnonzero(types == 0)[0], 6] = -0.0  # a negative zero still counts as a value
    x[np.flatnonzero(types == 0)[1:], 6] = 0.0
    return x, types


def test_rows_read_back_bit_for_bit_as_the_padded_matrix() -> None:
    x, types = padded_rows()
    rows = TypedRows.from_padded(x, types, 3)
    assert rows.shape == x.shape and rows.dtype == np.float32 and len(rows) == 40
    assert [t.shape[1] for t in rows.tables] == [7, 0, 10]  # the -0.0 keeps column 6
    for ids in (np.arange(40), np.array([5, 5, 0, 39, 12]), np.empty(0, np.int64)):
        got = rows[ids]
        assert got.dtype == np.float32 and got.flags.writeable
        np.testing.assert_array_equal(got.view(np.uint32), x[ids].view(np.uint32))
    np.testing.assert_array_equal(np.asarray(rows).view(np.uint32), x.view(np.uint32))
    np.testing.assert_array_equal(rows[3:9], x[3:9])
    assert rows.nbytes < x.nbytes


def test_used_width_reads_bit_patterns() -> None:
    assert used_width(np.zeros((3, 5), np.float32)) == 0
    assert used_width(np.zeros((0, 5), np.float32)) == 0
    x = np.zeros((3, 5), np.float32)
    x[1, 2] = -0.0
    assert used_width(x) == 3


def test_tables_that_disagree_with_the_row_types_are_refused() -> None:
    with pytest.raises(ValueError, match="rows per type"):
        TypedRows([np.zeros((2, 1), np.float32)], np.zeros(3, np.int64), 4)
    with pytest.raises(ValueError, match="w_t <= width"):
        TypedRows([np.zeros((3, 5), np.float32)], np.zeros(3, np.int64), 4)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("device", [None, "cpu", pytest.param("cuda", marks=CUDA),
                                    pytest.param("cuda-mapped", marks=CUDA)])
def test_the_feature_reader_reads_per_type_rows_without_padding_them_in_memory(
        device: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the host, and on a device (``sampler.backend: torch``): one table per type there,
    each at its width, the padded rows gathered bit for bit; on a GPU without the room for
    them (``cuda-mapped``) from page-locked host memory the GPU reads."""
    from gnntrain.runtime.comm import CommCounter
    from gnntrain.runtime.dist_source import DistFeatureReader
    from gnntrain.runtime.routing import PartitionPolicy
    from partition import PartitionBook

    x, types = padded_rows(1)
    rows = TypedRows.from_padded(x, types, 3)
    policy = PartitionPolicy(PartitionBook([0, 100, 140, 200]), 1, None, CommCounter(1, 3))  # type: ignore[arg-type]
    mapped = device == "cuda-mapped"
    if mapped:
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (0, 1 << 30))
        device = "cuda"
    reader = DistFeatureReader(rows, policy, np.zeros(200, np.int64),
                               device=None if device is None else torch.device(device))
    assert reader.x_local is rows
    if device is not None:
        assert reader.table is not None
        assert reader.table.mapped == mapped
        assert [tuple(t.shape) for t in reader.table.tables] == [tuple(t.shape) for t in rows.tables]
        assert all(t.device.type == device for t in reader.table.tables)
    for ids in (np.array([139, 100]), np.arange(100, 140), np.array([100, 105, 100]), np.empty(0, np.int64)):
        got = reader.read(ids)
        assert isinstance(got, np.ndarray if device is None else torch.Tensor)
        host = got.cpu().numpy() if isinstance(got, torch.Tensor) else got
        np.testing.assert_array_equal(host.view(np.uint32), x[ids - 100].view(np.uint32))


def test_a_typed_sets_parts_hold_per_type_rows(tmp_path: Path) -> None:
    from gnntrain.config import SyntheticHeteroConfig
    from gnntrain.data.hetero import to_training_graph
    from gnntrain.data.hetero_synthetic import generate_hetero
    from partition import PartitionConfig, build_partition_set

    g = to_training_graph(generate_hetero(SyntheticHeteroConfig(
        papers=300, authors=300, institutions=10, fields=20, features=8, classes=4, seed=3)))
    pset = build_partition_set(g, PartitionConfig(parts=2, root=str(tmp_path)))
    for p in range(2):
        part = pset.load_part(p)
        stored = pset.load_part(p, per_type=False).x
        assert isinstance(part.x, TypedRows) and isinstance(stored, np.ndarray)
        np.testing.assert_array_equal(np.asarray(part.x), stored)
        np.testing.assert_array_equal(stored, g.x[pset.orig_ids(np.arange(part.start, part.stop))])
        paper = g.node_type_names.index("paper")
        assert [t.shape[1] for t in part.x.tables] == [8 if t == paper else 0 for t in range(4)]
        assert part.x.nbytes < stored.nbytes

"""The CSR message-passing path and the fused ReLU + dropout compute what they replace.

``BlockGNN`` aggregates over a block's CSR (``Block.indptr``) with one sparse product
instead of PyG's per-edge gather/scatter; both must give the same outputs and the same
gradients. ``relu_dropout`` replaces ``F.dropout(F.relu(x))`` with a numba kernel; it
must be dropout: kept share ``1 - p``, survivors scaled by ``1 / (1 - p)``, gradient
through the same mask, reproducible under ``torch.manual_seed``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from gnntrain.config import ModelConfig
from gnntrain.models import build_model
from gnntrain.ops import relu_dropout
from partition.graph import Graph
from samplers import Block, CSRSource, NeighborSampler


def _without_csr(blocks: list[Block]) -> list[Block]:
    return [Block(b.edge_index, b.num_src, b.num_dst) for b in blocks]


def test_sampler_blocks_carry_a_valid_csr(hub_source: CSRSource) -> None:
    batch = NeighborSampler(hub_source, [7, -1, 3]).sample(np.arange(0, 600, 9), key=4)
    for b in batch.blocks:
        assert b.indptr is not None and b.indptr.shape == (b.num_dst + 1,)
        dst = b.edge_index[1]
        counts = torch.bincount(dst, minlength=b.num_dst)
        assert torch.equal(b.indptr, torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)]))
        assert torch.equal(dst, torch.repeat_interleave(torch.arange(b.num_dst), counts))
        adj = b.adj_t(torch.ones(b.num_edges)).to_dense()
        dense = torch.zeros(b.num_dst, b.num_src)
        dense[dst, b.edge_index[0]] = 1.0
        assert torch.equal(adj, dense)


@pytest.mark.parametrize("arch", ["sage", "gcn"])
@pytest.mark.parametrize("norm", ["none", "layer"])
def test_csr_path_equals_edge_index_path(hub_graph: Graph, hub_source: CSRSource, arch: str,
                                         norm: str) -> None:
    """Forward outputs and every parameter gradient agree; includes dst nodes that got no
    neighbour (isolated seeds) and the all-neighbour fanout."""
    cfg = ModelConfig(arch=arch, hidden=32, layers=3, dropout=0.0, norm=norm)
    model = build_model(cfg.arch, cfg, hub_graph.num_features, hub_graph.num_classes, seed=1)
    isolated = np.flatnonzero(np.diff(hub_graph.indptr) == 0)
    seeds = np.unique(np.concatenate([np.arange(0, 600, 7), isolated[:3]]))
    batch = NeighborSampler(hub_source, [5, -1, 4]).sample(seeds, key=2)
    x = torch.from_numpy(hub_graph.x[batch.input_nodes])
    deg = torch.from_numpy(hub_graph.in_degrees()[batch.input_nodes].astype(np.float32))
    y = torch.from_numpy(hub_graph.y[seeds])
    grads = []
    outs = []
    for blocks in (batch.blocks, _without_csr(batch.blocks)):
        model.zero_grad()
        out = model([Block(b.edge_index, b.num_src, b.num_dst, b.indptr, deg[:b.num_src])
                     for b in blocks], x)
        F.cross_entropy(out, y).backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-5, atol=1e-5)
    assert len(grads[0]) == len(grads[1]) > 0
    for a, b in zip(grads[0], grads[1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_csr_path_with_an_empty_block() -> None:
    """A block with no edges (every dst isolated) gives the root term alone."""
    cfg = ModelConfig(arch="sage", hidden=8, layers=1, dropout=0.0)
    model = build_model(cfg.arch, cfg, 4, 3, seed=0)
    x = torch.randn(5, 4)
    empty = torch.zeros(2, 0, dtype=torch.int64)
    with_csr = Block(empty, 5, 5, torch.zeros(6, dtype=torch.int64))
    out = model([with_csr], x)
    torch.testing.assert_close(out, model([Block(empty, 5, 5)], x))
    conv = model.convs[0]
    torch.testing.assert_close(out, conv.lin_r(x) + conv.lin_l.bias)


def test_relu_dropout_is_dropout() -> None:
    torch.manual_seed(0)
    x = torch.randn(400, 500)
    p = 0.3
    y = relu_dropout(x, p, training=True)
    pos = x > 0
    kept = y != 0
    assert not bool((kept & ~pos).any())  # ReLU: nothing negative survives
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    share = float(kept.sum()) / float(pos.sum())
    n = int(pos.sum())  # binomial: 6 standard deviations
    assert abs(share - (1 - p)) < 6 * (p * (1 - p) / n) ** 0.5
    # independent of position: both halves keep about the same share
    half = x.shape[1] // 2
    s1 = float(kept[:, :half].sum()) / float(pos[:, :half].sum())
    s2 = float(kept[:, half:].sum()) / float(pos[:, half:].sum())
    assert abs(s1 - s2) < 0.02
    # eval / p = 0: plain ReLU
    assert torch.equal(relu_dropout(x, p, training=False), F.relu(x))
    assert torch.equal(relu_dropout(x, 0.0, training=True), F.relu(x))


def test_relu_dropout_gradient_and_seed() -> None:
    x = torch.randn(300, 70, requires_grad=True)
    torch.manual_seed(5)
    y = relu_dropout(x, 0.5, training=True)
    g = torch.randn_like(y)
    y.backward(g)
    assert x.grad is not None
    mask = (y != 0).float()
    torch.testing.assert_close(x.grad, g * mask * 2.0)
    torch.manual_seed(5)
    assert torch.equal(relu_dropout(x.detach(), 0.5, training=True), y.detach())
    assert not torch.equal(relu_dropout(x.detach(), 0.5, training=True), y.detach())
    # a non-contiguous input works and equals its contiguous copy under the same seed
    xt = x.detach().t()
    torch.manual_seed(9)
    a = relu_dropout(xt, 0.5, training=True)
    torch.manual_seed(9)
    torch.testing.assert_close(a, relu_dropout(xt.contiguous(), 0.5, training=True))


def _splitmix64(state: int, count: int) -> list[int]:
    """``count`` outputs of splitmix64 from ``state``, stepped one after another (the
    reference generator, in Python integers)."""
    mask, out = (1 << 64) - 1, []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append(z ^ (z >> 31))
    return out


@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_relu_dropout_mask_is_the_splitmix64_stream(n: int) -> None:
    """Element ``2j`` keeps on the low 32 bits of splitmix64's ``j``-th output and ``2j + 1``
    on the high 32 (the kernel computes each output from its index, so the stream and
    the masks stay those of the sequential generator), for odd lengths too."""
    from gnntrain.ops import _relu_dropout_fwd, _scale_top

    seed, thresh = 0x1234_5678_9ABC_DEF0, 1 << 31  # p = 0.5
    draws = _splitmix64(seed, (n + 1) // 2)
    bits = [(draws[i // 2] >> (32 * (i % 2))) & 0xFFFFFFFF for i in range(n)]
    x = np.ones(n, dtype=np.float32)
    out, keep = np.empty_like(x), np.empty(n, dtype=np.bool_)
    _relu_dropout_fwd(x, out, keep, np.uint64(thresh), np.uint64(seed), *_scale_top(np.float32(2.0), False))
    assert keep.tolist() == [b >= thresh for b in bits]
    assert out.tolist() == [2.0 if b >= thresh else 0.0 for b in bits]

"""The link-prediction task: batches, negatives, target-edge exclusion, exact metrics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gnntrain.config import ConfigError, parse_dataset
from gnntrain.tasks import LinkPrediction, build_task, ranking
from partition import Part
from partition.book import PartitionBook
from samplers import CSRSource, NeighborSampler
from tests.conftest import make_graph

DS = parse_dataset({"name": "tiny", "source": "synthetic"})


def loaded(n: int = 200, seed: int = 0, avg_degree: int = 6,
           **opts: object) -> tuple[LinkPrediction, Part]:
    opts.setdefault("hits_k", 5)
    task = LinkPrediction(**opts)  # type: ignore[arg-type]
    g = task.load_graph(DS, make_graph(n, avg_degree=avg_degree, seed=seed))
    return task, Part.whole_graph(g)


# --- metrics, merged exactly ----------------------------------------------------------------

def ref_hits(pos: np.ndarray, neg: np.ndarray, k: int) -> float:
    """OGB's evaluator, written out: the K-th highest negative via torch.topk."""
    kth = torch.topk(torch.from_numpy(neg), k).values[-1].item()
    return float((torch.from_numpy(pos) > kth).float().mean())


def ref_auc_mrr(pos: np.ndarray, neg: np.ndarray) -> tuple[float, float]:
    gt = (pos[:, None] > neg[None, :]).sum(1)
    eq = (pos[:, None] == neg[None, :]).sum(1)
    auc = float((gt + 0.5 * eq).sum() / (pos.size * neg.size))
    opt, pes = (neg[None, :] > pos[:, None]).sum(1), (neg[None, :] >= pos[:, None]).sum(1)
    mrr = float(np.mean(1.0 / (0.5 * (opt + pes) + 1)))
    return auc, mrr


@pytest.mark.parametrize("workers", [2, 4])
def test_metrics_merged_from_worker_splits_equal_single_process(workers: int) -> None:
    rng = np.random.default_rng(workers)
    # rounded scores: ties between positives and negatives occur and must count half
    pos = np.round(rng.normal(1.0, 1.0, 500), 2)
    neg = np.round(rng.normal(0.0, 1.0, 400), 2)
    task = LinkPrediction(hits_k=20)
    single = task.metrics({"pos": pos, "neg": neg})
    # each worker holds an uneven, shuffled share of both
    cut_p = np.sort(rng.choice(np.arange(1, pos.size), workers - 1, replace=False))
    # uneven shares of the negatives, each with at least K of them
    cut_n = np.arange(1, workers) * neg.size // workers + rng.integers(-15, 15, workers - 1)
    states = [{"pos": p, "neg": q} for p, q in zip(np.split(rng.permutation(pos), cut_p),
                                                   np.split(rng.permutation(neg), cut_n), strict=True)]
    states = [task.from_json(task.to_json(s)) for s in states]  # as they travel
    merged = task.metrics(task.merge(states[::-1]))
    assert merged == single  # bit-exact, any order
    assert single["hits"] == pytest.approx(ref_hits(pos, neg, 20), abs=1e-6)
    auc, mrr = ref_auc_mrr(pos, neg)
    assert single["auc"] == pytest.approx(auc, abs=1e-12)
    assert single["mrr"] == pytest.approx(mrr, rel=1e-12)
    # the naive reduction (mean of per-worker Hits@K) is not the metric
    naive = np.mean([task.metrics(s)["hits"] for s in states])
    assert naive != single["hits"]


def test_hits_k_larger_than_negatives_fails() -> None:
    with pytest.raises(ValueError, match="hits_k=20: only 5 negatives"):
        ranking.hits_at_k(np.ones(3), np.zeros(5), 20)


# --- options ------------------------------------------------------------------------------

def test_bad_options_fail_with_field_value_allowed() -> None:
    with pytest.raises(ConfigError, match=r"task.options.decoder='cosine': expected one of \['dot', 'mlp'\]"):
        build_task("link", {"decoder": "cosine"})
    with pytest.raises(ConfigError, match=r"val_frac=0.5 \+ test_frac=0.6"):
        build_task("link", {"val_frac": 0.5, "test_frac": 0.6})
    with pytest.raises(ConfigError, match="num_negatives=0"):
        build_task("link", {"num_negatives": 0})
    with pytest.raises(ConfigError, match="reject_edges=true redraws .* negatives='in_batch'"):
        build_task("link", {"reject_edges": True, "negatives": "in_batch"})
    with pytest.raises(ConfigError, match="task.options.reject_edges='yes': must be true or false"):
        build_task("link", {"reject_edges": "yes"})
    task = LinkPrediction(hits_k=10_000)
    with pytest.raises(ValueError, match="hits_k=10000: the val split has only"):
        task.load_graph(DS, make_graph(100, seed=1))


# --- batches and negatives ------------------------------------------------------------------

def test_epoch_covers_every_training_edge_once() -> None:
    task, part = loaded(num_negatives=3)
    batches = task.epoch_batches(part, 7, seed=1, epoch=2, rank=0, shuffle=True)
    assert len(batches) == 7
    seen = []
    for b in batches:
        p = b.payload
        pos = p["label"] == 1
        seen += list(zip(b.nodes[p["src"][pos]].tolist(), b.nodes[p["dst"][pos]].tolist(), strict=True))
        assert int((~pos).sum()) == 3 * int(pos.sum())
        assert np.array_equal(np.unique(b.nodes), b.nodes)
    dst = np.repeat(np.arange(part.num_owned), np.diff(part.indptr))
    assert sorted(seen) == sorted(zip(part.indices.tolist(), dst.tolist(), strict=True))
    assert task.num_train_examples(part) == len(seen)
    # the message-passing graph holds no validation or test edge
    assert task.split is not None
    edges = set(zip(part.indices.tolist(), dst.tolist(), strict=True))
    assert not any((u, v) in edges or (v, u) in edges for u, v in task.split.test.tolist())


def test_undirected_examples_take_each_training_edge_once() -> None:
    """``examples: undirected``: an epoch's positives are the split's training edges, each
    once (``u < v``), owned by ``v``'s part; the partitioners balance those counts."""
    task, part = loaded(examples="undirected", num_negatives=2)
    assert task.split is not None
    seen = []
    for b in task.epoch_batches(part, 5, seed=1, epoch=0, rank=0, shuffle=True):
        pos = b.payload["label"] == 1
        seen += list(zip(b.nodes[b.payload["src"][pos]].tolist(), b.nodes[b.payload["dst"][pos]].tolist(),
                         strict=True))
    assert all(u < v for u, v in seen)
    assert sorted(seen) == sorted(map(tuple, np.sort(task.split.train, axis=1).tolist()))
    assert task.num_train_examples(part) == len(seen) == task.split.train.shape[0]
    owned = np.bincount([v for _, v in seen], minlength=part.num_owned)
    g = task.load_graph(DS, make_graph(200, avg_degree=6, seed=0))
    assert np.array_equal(g.train_weights(), owned)
    directed, _ = loaded(examples="directed")
    assert directed.num_train_examples(part) == 2 * len(seen)
    with pytest.raises(ConfigError, match="task.options.examples='both'"):
        build_task("link", {"examples": "both"})


@pytest.mark.parametrize(("negatives", "reject"), [("uniform", False), ("uniform_pairs", False),
                                                  ("uniform_pairs", True), ("degree", True)])
def test_negatives_follow_the_edge_not_the_numbering(negatives: str, reject: bool) -> None:
    """The same positive gets the same negatives after any renumbering (partitioning),
    redrawn ones included."""
    task, part = loaded(n=150, avg_degree=40, negatives=negatives, reject_edges=reject)
    src, dst = part.indices[:50], np.repeat(np.arange(part.num_owned), np.diff(part.indptr))[:50]
    a_src, a = task._negatives(src, dst, seed=3, epoch=1)
    perm = np.random.default_rng(0).permutation(part.num_owned)
    moved = task.placed(perm)
    assert isinstance(moved, LinkPrediction)
    b_src, b = moved._negatives(perm[src], perm[dst], seed=3, epoch=1)
    assert np.array_equal(b, perm[a])
    if negatives == "uniform_pairs":
        assert a_src is not None and b_src is not None
        assert np.array_equal(b_src, perm[a_src])
    else:
        assert a_src is None and b_src is None  # the positive's own source
    assert not np.array_equal(task._negatives(src, dst, seed=3, epoch=2)[1], a)  # epoch matters


@pytest.mark.parametrize("negatives", ["uniform", "uniform_pairs", "degree"])
def test_rejected_negatives_are_never_edges(negatives: str) -> None:
    """``reject_edges``: on a dense graph (a fifth of all pairs are edges) no negative is a
    training edge in either direction or a self-loop; a draw that was no edge is kept as it
    was, and the redrawn ones spread over the nodes."""
    kw = {"n": 100, "avg_degree": 40, "negatives": negatives, "num_negatives": 20}
    plain, part = loaded(**kw)  # type: ignore[arg-type]
    task, _ = loaded(**kw, reject_edges=True)  # type: ignore[arg-type]
    assert plain.split is not None
    edges = {(int(u), int(v)) for u, v in plain.split.train} | {(int(v), int(u)) for u, v in plain.split.train}
    src = part.indices[:300]
    dst = np.repeat(np.arange(part.num_owned), np.diff(part.indptr))[:300]
    def pairs(t: LinkPrediction) -> np.ndarray:
        ns, nd = t._negatives(src, dst, seed=5, epoch=3)
        a = np.broadcast_to(src[:, None], nd.shape) if ns is None else ns
        return np.stack([a.reshape(-1), nd.reshape(-1)], 1)
    def is_edge(p: np.ndarray) -> np.ndarray:
        return np.array([(int(u), int(v)) in edges or u == v for u, v in p])
    before, after = pairs(plain), pairs(task)
    hit = is_edge(before)
    assert hit.mean() > 0.1  # without rejection many negatives are edges
    assert not is_edge(after).any()
    assert np.array_equal(after[~hit], before[~hit])
    assert np.unique(after[hit, 1]).size > 50  # redraws are not piled on a few nodes


def test_workers_copy_carries_no_training_edges() -> None:
    """The task copy shipped to the workers (``placed``) holds the evaluation pairs but not
    the O(edges) training list; ``reject_edges`` keeps its keys and draws the same."""
    task, part = loaded(n=150, reject_edges=True)
    assert task.split is not None and task.split.train.shape[0] > 0
    moved = task.placed(np.arange(part.num_owned))
    assert isinstance(moved, LinkPrediction) and moved.split is not None
    assert moved.split.train.shape == (0, 2) and moved.split.test.shape == task.split.test.shape
    src = part.indices[:40]
    dst = np.repeat(np.arange(part.num_owned), np.diff(part.indptr))[:40]
    assert np.array_equal(moved._negatives(src, dst, seed=1, epoch=0)[1],
                          task._negatives(src, dst, seed=1, epoch=0)[1])


def test_pair_negatives_draw_both_ends_uniformly() -> None:
    """``uniform_pairs``: sources as well as destinations spread over every node, not over the
    positives' sources; BPR still pairs each negative with its own positive."""
    task, part = loaded(n=300, negatives="uniform_pairs", num_negatives=100)
    src = part.indices[:200]
    dst = np.repeat(np.arange(part.num_owned), np.diff(part.indptr))[:200]
    ns, nd = task._negatives(src, dst, seed=0, epoch=0)
    assert ns is not None and ns.shape == nd.shape == (200, 100)
    def tv_from_uniform(ids: np.ndarray) -> float:  # 20k uniform draws over 300: ~0.1
        return float(np.abs(np.bincount(ids.reshape(-1), minlength=part.num_owned) / ids.size
                            - 1 / part.num_owned).sum())

    assert tv_from_uniform(ns) < 0.14 and tv_from_uniform(nd) < 0.14
    assert tv_from_uniform(np.repeat(src, 100)) > 0.5  # what keeping the source would give
    assert not np.isin(ns, src).all(axis=1).any()
    b = task._batch(src, dst, nd, ns)
    neg = b.payload["label"] == 0
    assert np.array_equal(b.payload["group"][neg], np.repeat(np.arange(200), 100))
    assert np.array_equal(b.nodes[b.payload["src"][neg]], ns.reshape(-1))


def test_degree_biased_negatives_follow_degree_power() -> None:
    task, part = loaded(n=300, negatives="degree", num_negatives=200)
    src = np.repeat(part.indices[:200], 1)
    dst = np.repeat(np.arange(part.num_owned), np.diff(part.indptr))[:200]
    w = task._negatives(src, dst, seed=0, epoch=0)[1].reshape(-1)
    freq = np.bincount(w, minlength=part.num_owned) / w.size
    deg = np.diff(part.indptr).astype(float)
    expect = deg ** 0.75 / (deg ** 0.75).sum()
    assert np.abs(freq - expect).sum() < 0.08  # total variation of 40k draws (noise ~0.04)
    uni = LinkPrediction(num_negatives=200, hits_k=5)
    uni.load_graph(DS, make_graph(300, avg_degree=6, seed=0))
    fu = np.bincount(uni._negatives(src, dst, seed=0, epoch=0)[1].reshape(-1), minlength=part.num_owned)
    assert np.corrcoef(fu, deg)[0, 1] < 0.3 < np.corrcoef(freq, deg)[0, 1]


# --- target edges kept out of the batch's blocks --------------------------------------------

def block_edges(sampler: NeighborSampler, seeds: np.ndarray, key: int,
                exclude: np.ndarray | None) -> set[tuple[int, int]]:
    sb = sampler.sample(seeds, key, exclude)
    out = set()
    for b in sb.blocks:
        s, d = b.edge_index.numpy()
        out |= set(zip(sb.input_nodes[s].tolist(), sb.input_nodes[d].tolist(), strict=True))
    return out


@pytest.mark.parametrize("fanouts", [[-1, -1], [3, 3]])
def test_target_edges_and_reverses_never_reach_the_blocks(fanouts: list[int]) -> None:
    """A 'model' that answers by looking for the target edge in its input (the best a
    memorising model could do) finds every positive with exclusion off and none with it on."""
    task, part = loaded(n=200, seed=4, exclude_targets=True)
    off = LinkPrediction(hits_k=5)  # the default
    off.load_graph(DS, make_graph(200, avg_degree=6, seed=4))
    sampler = NeighborSampler(CSRSource(part.indptr, part.indices), fanouts)
    found_on = found_off = total = 0
    for b_on, b_off in zip(task.epoch_batches(part, 5, seed=0, epoch=0, rank=0, shuffle=True),
                           off.epoch_batches(part, 5, seed=0, epoch=0, rank=0, shuffle=True), strict=True):
        assert b_off.exclude is None and b_on.exclude is not None
        pos = b_on.payload["label"] == 1
        targets = list(zip(b_on.nodes[b_on.payload["src"][pos]].tolist(),
                           b_on.nodes[b_on.payload["dst"][pos]].tolist(), strict=True))
        e_on = block_edges(sampler, b_on.nodes, 11, b_on.exclude)
        e_off = block_edges(sampler, b_off.nodes, 11, b_off.exclude)
        assert e_on <= e_off  # exclusion only removes edges (same draws otherwise)
        for u, v in targets:
            total += 1
            found_on += (u, v) in e_on or (v, u) in e_on
            found_off += (u, v) in e_off
    assert found_on == 0
    if fanouts[0] == -1:
        assert found_off == total  # all neighbours: the answer sits in the input
    else:
        assert found_off > total // 4


def test_exclusion_is_deterministic_and_checked() -> None:
    g = make_graph(100, seed=2)
    s = NeighborSampler(CSRSource(g.indptr, g.indices), [4, 4])
    ex = np.array([[int(g.indices[0]), 0]])
    a, b = s.sample(np.array([0, 5]), 9, ex), s.sample(np.array([0, 5]), 9, ex)
    assert np.array_equal(a.input_nodes, b.input_nodes)
    with pytest.raises(ValueError, match="exclude: expected"):
        s.sample(np.array([0]), 1, np.array([1, 2, 3]))


# --- evaluation pairs are owned by the destination's owner ----------------------------------

def test_eval_pairs_split_by_owner_cover_the_split_once() -> None:
    task = LinkPrediction(hits_k=5)
    task.load_graph(DS, make_graph(120, seed=5))
    book = PartitionBook([0, 50, 120])
    got = []
    for p in range(2):
        lo, hi = (int(v) for v in book.part_range(p))
        assert task.data is not None
        own = task.data.owned("test", lo, hi)
        assert ((own.pos[:, 1] >= lo) & (own.pos[:, 1] < hi)).all() and own.pids is None
        got += own.pos.tolist() + own.neg.tolist()
    assert task.split is not None
    want = task.split.test.tolist() + task.split.test_neg.tolist()
    assert sorted(got) == sorted(want)


# --- losses --------------------------------------------------------------------------------

def test_bce_and_bpr_losses_pair_each_negative_with_its_positive() -> None:
    task, part = loaded(n=120, num_negatives=2)
    b = task.epoch_batches(part, 1, seed=0, epoch=0, rank=0, shuffle=False)[0]
    target = torch.from_numpy(task.targets(part, b))
    out = torch.randn(b.nodes.size, 8, dtype=torch.float64)
    s = (out[target[:, 0]] * out[target[:, 1]]).sum(-1)
    label = target[:, 2].double()
    bce = -(label * torch.log(torch.sigmoid(s)) + (1 - label) * torch.log(1 - torch.sigmoid(s))).sum()
    torch.testing.assert_close(task.loss(out, target), bce)
    assert task.num_examples(target) == target.shape[0]
    bpr_task = LinkPrediction(loss="bpr", num_negatives=2, hits_k=5)
    n_pos = int((target[:, 2] == 1).sum())
    # negatives 2i and 2i+1 belong to positive i (group column)
    s_pos, s_neg = s[:n_pos], s[n_pos:].reshape(n_pos, 2)
    want = -torch.log(torch.sigmoid(s_pos[:, None] - s_neg)).sum()
    torch.testing.assert_close(bpr_task.loss(out, target), want)
    assert bpr_task.num_examples(target) == 2 * n_pos


# --- a model the task cannot use, refused before any work -----------------------------------

def test_mlp_decoder_without_a_decoder_module_fails_before_work(tmp_path: Path) -> None:
    from gnntrain.runtime.coordinator import run_training
    from tests.runtime.helpers import tiny_cfg

    cfg = tiny_cfg(tmp_path, "task.kind=link", 'task.options={"decoder": "mlp", "hits_k": 5}')
    with pytest.raises(ValueError, match="decoder='mlp' scores pairs with the model's `decoder`"):
        run_training(cfg, single_process=True, graph=make_graph(60), progress=False)
    assert not (tmp_path / "runs").exists()  # refused before the run directory exists

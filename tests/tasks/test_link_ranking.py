"""All-item ranking of user-item graphs (Recall@K, NDCG@K) and per-source MRR: against
plain single-process references, and merged exactly over any split of the users."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from gnntrain.config import parse_dataset
from gnntrain.tasks import LinkPrediction, ranking
from partition import Part


def ref_recall_ndcg(scores: np.ndarray, truth: dict[int, set[int]], known: dict[int, set[int]],
                    k: int) -> tuple[list[float], list[float]]:
    """LightGCN's test loop, written out per user: rank every unknown item."""
    recall, ndcg = [], []
    for u in sorted(truth):
        items = [i for i in range(scores.shape[1]) if i not in known.get(u, set())]
        ranked = sorted(items, key=lambda i: (-scores[u, i], i))[:k]
        hits = [1.0 if i in truth[u] else 0.0 for i in ranked]
        recall.append(sum(hits) / len(truth[u]))
        dcg = sum(h / np.log2(r + 2) for r, h in enumerate(hits))
        idcg = sum(1.0 / np.log2(r + 2) for r in range(min(k, len(truth[u]))))
        ndcg.append(dcg / idcg)
    return recall, ndcg


def random_user_items(rng: np.random.Generator, users: int, items: int
                      ) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
    truth, known = {}, {}
    for u in range(users):
        perm = rng.permutation(items)
        nk, nt = int(rng.integers(0, 12)), int(rng.integers(1, 8))
        known[u], truth[u] = set(perm[:nk].tolist()), set(perm[nk:nk + nt].tolist())
    return truth, known


def cells(d: dict[int, set[int]]) -> np.ndarray:
    return np.array([(u, i) for u in sorted(d) for i in sorted(d[u])], dtype=np.int64).reshape(-1, 2)


@pytest.mark.parametrize("k", [1, 5, 20])
def test_recall_ndcg_equal_the_per_user_reference(k: int) -> None:
    rng = np.random.default_rng(k)
    truth, known = random_user_items(rng, 40, 60)
    scores = np.round(rng.normal(size=(40, 60)), 1)  # ties must break the same way
    # known items score highest: counted, they would fill the top K
    for u, its in known.items():
        scores[u, sorted(its)] += 10.0
    r, n = ranking.recall_ndcg_at_k(scores, cells(truth), cells(known), k)
    rr, rn = ref_recall_ndcg(scores, truth, known, k)
    np.testing.assert_allclose(r, rr, rtol=0, atol=1e-12)
    np.testing.assert_allclose(n, rn, rtol=0, atol=1e-12)
    assert 0 < np.mean(r) < 1


def test_top_k_breaks_ties_by_column_whatever_the_partition() -> None:
    s = np.array([[1.0, 3.0, 3.0, 2.0, 3.0, 0.0]])
    assert ranking.top_k(s, 2).tolist() == [[1, 2]]
    assert ranking.top_k(s, 4).tolist() == [[1, 2, 4, 3]]


@pytest.mark.parametrize("workers", [2, 4])
def test_user_metrics_merged_from_worker_splits_equal_single_process(workers: int) -> None:
    rng = np.random.default_rng(workers)
    users = rng.permutation(3000)
    # magnitudes from 1e-12 to 1: a float sum in another order rounds differently
    recall, ndcg = (rng.random(3000) * 10.0 ** rng.integers(-12, 1, 3000) for _ in range(2))
    task = LinkPrediction(ranking="items")
    assert task.metric == "recall"
    single = task.metrics({"user": users, "recall": recall, "ndcg": ndcg})
    cut = np.sort(rng.choice(np.arange(1, 3000), workers - 1, replace=False))
    order = rng.permutation(3000)
    states = [{"user": users[i], "recall": recall[i], "ndcg": ndcg[i]} for i in np.split(order, cut)]
    states = [task.from_json(task.to_json(s)) for s in states]
    merged = task.metrics(task.merge(states[::-1]))
    assert merged == single  # bit-exact
    assert single["recall"] == pytest.approx(recall.mean(), rel=1e-12)


# --- the task on a user-item graph -----------------------------------------------------------

def write_lightgcn(root: Path, users: int = 30, items: int = 50, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    lines: dict[str, list[str]] = {"train": [], "valid": [], "test": []}
    for u in range(users):
        perm = rng.permutation(items)
        cut = [int(rng.integers(3, 9)), int(rng.integers(1, 3)), int(rng.integers(1, 4))]
        start = 0
        for name, c in zip(lines, cut, strict=True):
            lines[name].append(" ".join(map(str, [u, *perm[start:start + c].tolist()])))
            start += c
    root.mkdir(parents=True, exist_ok=True)
    for name, ls in lines.items():
        (root / f"{name}.txt").write_text("\n".join(ls) + "\n")


class _Part:
    """The fields of a part that evaluation reads (one contiguous id range)."""

    def __init__(self, p: int, lo: int, hi: int) -> None:
        self.part_id, self.start, self.stop, self.num_owned = p, lo, hi, hi - lo


def items_task(tmp_path: Path, **opts: object) -> tuple[LinkPrediction, int, int]:
    write_lightgcn(tmp_path / "cf")
    ds = parse_dataset({"name": "cf", "source": "lightgcn", "path": str(tmp_path / "cf")})
    task = LinkPrediction(ranking="items", hits_k=10, **opts)  # type: ignore[arg-type]
    task.load_graph(ds)
    assert task.split is not None
    lo, hi = task.split.dst_range
    return task, lo, hi


@pytest.mark.parametrize("negatives", ["uniform", "uniform_pairs", "in_batch"])
def test_user_item_training_pairs_are_user_to_item(tmp_path: Path, negatives: str) -> None:
    """On a user-item graph every training positive is a (user, item) interaction, each
    once, and every negative pairs a user with an item: the ``item -> user`` reverses of
    the message-passing graph are never examples."""
    write_lightgcn(tmp_path / "cf")
    ds = parse_dataset({"name": "cf", "source": "lightgcn", "path": str(tmp_path / "cf")})
    task = LinkPrediction(hits_k=10, negatives=negatives, num_negatives=2)
    g = task.load_graph(ds)
    assert task.split is not None
    lo, hi = task.split.dst_range
    part = Part.whole_graph(g)
    assert task.num_train_examples(part) == task.split.train.shape[0]
    assert int(g.train_weights().sum()) == task.split.train.shape[0]  # what METIS balances
    seen = []
    for b in task.epoch_batches(part, 3, seed=0, epoch=1, rank=0, shuffle=True):
        u, v = b.nodes[b.payload["src"]], b.nodes[b.payload["dst"]]
        assert (u < lo).all() and ((v >= lo) & (v < hi)).all()
        pos = b.payload["label"] == 1
        seen += list(zip(u[pos].tolist(), v[pos].tolist(), strict=True))
    assert sorted(seen) == sorted(map(tuple, task.split.train.tolist()))


@pytest.mark.parametrize("split", ["val", "test"])
def test_layerwise_item_ranking_over_parts_equals_reference(tmp_path: Path, split: str) -> None:
    """Each part ranks its own users from its rows plus the item rows it fetched (in the
    order eval_state expects them); merged, the figures equal a direct reference that
    excludes the user's training items (and, for test, the validation items)."""
    task, lo, hi = items_task(tmp_path)
    sp = task.split
    assert sp is not None
    n = sp.num_nodes
    h = torch.randn(n, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    truth: dict[int, set[int]] = {}
    known: dict[int, set[int]] = {}
    for u, i in sp.pos(split).tolist():
        truth.setdefault(u, set()).add(i - lo)
    for u, i in (sp.train.tolist() + (sp.val.tolist() if split == "test" else [])):
        known.setdefault(u, set()).add(i - lo)
    scores = (h[:lo] @ h[lo:hi].T).numpy()
    rr, rn = ref_recall_ndcg(scores, truth, known, 10)
    perm = np.random.default_rng(1).permutation(n)  # a partitioning's renumbering
    moved = task.placed(perm)
    assert isinstance(moved, LinkPrediction)
    hn = torch.empty_like(h)
    hn[torch.from_numpy(perm)] = h
    states = []
    for p, (a, b) in enumerate([(0, 20), (20, 47), (47, n)]):
        part = _Part(p, a, b)
        extra = moved.extra_rows(part)  # type: ignore[arg-type]
        outputs = torch.cat([hn[a:b], hn[torch.from_numpy(extra)]])
        states.append(moved.eval_state(part, outputs, split))  # type: ignore[arg-type]
    got = moved.metrics(moved.merge(states))
    assert got["recall"] == pytest.approx(np.mean(rr), abs=1e-12)
    assert got["ndcg"] == pytest.approx(np.mean(rn), abs=1e-12)
    whole = task.eval_state(Part.whole_graph(task.load_graph(parse_dataset(
        {"name": "cf", "source": "lightgcn", "path": str(tmp_path / "cf")}))), h, split)
    assert task.metrics(whole) == got  # one part or three: the same floats
    assert tuple(got) == moved.metric_names  # what the task says it reports (a sweep's metrics)


def test_item_ranking_needs_a_user_item_graph_and_layerwise_eval(tmp_path: Path) -> None:
    from tests.conftest import make_graph

    task = LinkPrediction(ranking="items")
    with pytest.raises(ValueError, match="ranking='items' ranks the items of a user-item graph"):
        task.load_graph(parse_dataset({"name": "tiny", "source": "synthetic"}), make_graph(50))
    t2, _, _ = items_task(tmp_path)
    with pytest.raises(ValueError, match="set train.eval=full"):
        t2.eval_batches(_Part(0, 0, 10), "test", 100)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="set train.eval=full"):  # before any work
        t2.check_setup(torch.nn.Linear(2, 2), layerwise_eval=False)
    t2.check_setup(torch.nn.Linear(2, 2), layerwise_eval=True)


# --- per-source MRR (OGB's ogbl-citation2 layout) ---------------------------------------------

def write_ogbl_mrr(root: Path, n: int = 150, k: int = 10, seed: int = 0) -> None:
    """OGB's link layout with source_node / target_node / target_node_neg split files
    (torch-saved dicts of numpy arrays, as OGB writes them)."""
    rng = np.random.default_rng(seed)
    e = rng.integers(0, n, size=(900, 2))
    e = np.unique(np.sort(e[e[:, 0] != e[:, 1]], axis=1), axis=0)
    e = e[rng.permutation(len(e))]
    folder = root / "split" / "time"
    folder.mkdir(parents=True)
    parts = {"train": e[40:], "valid": e[:20], "test": e[20:40]}
    for name, pairs in parts.items():
        d = {"source_node": pairs[:, 0].copy(), "target_node": pairs[:, 1].copy()}
        if name != "train":
            d["target_node_neg"] = rng.integers(0, n, size=(len(pairs), k))
        torch.save(d, folder / f"{name}.pt")


def mrr_task(tmp_path: Path) -> LinkPrediction:
    write_ogbl_mrr(tmp_path / "mrr")
    ds = parse_dataset({"name": "mrr", "source": "ogbl", "path": str(tmp_path / "mrr")})
    task = LinkPrediction(ranking="per_source", hits_k=5)
    task.load_graph(ds)
    return task


def ref_mrr(h: torch.Tensor, pos: np.ndarray, neg: np.ndarray, k: int) -> float:
    """Per positive: 1 / (1 + negatives above + half the ties), its own k negatives."""
    rr = []
    for i, (u, v) in enumerate(pos.tolist()):
        s = float(h[u] @ h[v])
        ns = [float(h[a] @ h[b]) for a, b in neg[i * k:(i + 1) * k].tolist()]
        rr.append(1.0 / (1 + sum(x > s for x in ns) + 0.5 * sum(x == s for x in ns)))
    return float(np.mean(rr))


def test_ogb_mrr_layout_loads_each_positive_with_its_own_negatives(tmp_path: Path) -> None:
    task = mrr_task(tmp_path)
    sp = task.split
    assert sp is not None and sp.neg_per_pos == 10
    raw = torch.load(tmp_path / "mrr" / "split" / "time" / "test.pt", weights_only=False)
    np.testing.assert_array_equal(sp.test[:, 1], raw["target_node"])
    np.testing.assert_array_equal(sp.test_neg[:, 1], raw["target_node_neg"].reshape(-1))
    np.testing.assert_array_equal(sp.test_neg[:, 0], np.repeat(raw["source_node"], 10))
    assert task.metric == "mrr"
    with pytest.raises(ValueError, match="own 10 negatives .*set ranking='per_source'"):
        LinkPrediction(hits_k=5).load_graph(parse_dataset(
            {"name": "mrr", "source": "ogbl", "path": str(tmp_path / "mrr")}))


@pytest.mark.parametrize("split", ["val", "test"])
def test_per_source_mrr_over_parts_and_sampled_equals_reference(tmp_path: Path, split: str) -> None:
    task = mrr_task(tmp_path)
    sp = task.split
    assert sp is not None
    n = sp.num_nodes
    h = torch.randn(n, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    h = torch.round(h * 4) / 4  # coarse rows: tied scores occur and count half
    want = ref_mrr(h, sp.pos(split), sp.neg(split), 10)
    perm = np.random.default_rng(3).permutation(n)
    moved = task.placed(perm)
    assert isinstance(moved, LinkPrediction)
    hn = torch.empty_like(h)
    hn[torch.from_numpy(perm)] = h
    layerwise, sampled = [], []
    for p, (a, b) in enumerate([(0, 40), (40, 41), (41, 100), (100, n)]):
        part = _Part(p, a, b)
        extra = moved.extra_rows(part)  # type: ignore[arg-type]
        outputs = torch.cat([hn[a:b], hn[torch.from_numpy(extra)]])
        layerwise.append(moved.eval_state(part, outputs, split))  # type: ignore[arg-type]
        for sb in moved.eval_batches(part, split, 23):  # type: ignore[arg-type]
            target = torch.from_numpy(moved.targets(part, sb))  # type: ignore[arg-type]
            sampled.append(moved.metric_state(hn[torch.from_numpy(sb.nodes)], target))
    got = moved.metrics(moved.merge(layerwise))
    assert got["mrr"] == pytest.approx(want, abs=1e-12)
    assert moved.metrics(moved.merge(sampled[::-1]))["mrr"] == got["mrr"]  # bit-exact
    assert tuple(got) == moved.metric_names
    assert 0.05 < want < 0.95


def test_item_ranking_on_two_ray_workers_equals_single_process(ray_local: None, tmp_path: Path) -> None:
    """One exact step (all neighbours, SGD), then layer-wise all-item ranking: each worker
    ranks its own users with the item rows fetched from their owners."""
    from gnntrain.rundir import RunDir
    from gnntrain.runtime.coordinator import run_training
    from tests.runtime.helpers import ONE_STEP, tiny_cfg

    write_lightgcn(tmp_path / "cf", users=60, items=80, seed=3)
    over = [f"dataset={{name: cf, source: lightgcn, path: {tmp_path / 'cf'}}}", "task.kind=link",
            'task.options={"ranking": "items", "hits_k": 10, "exclude_targets": false}',
            "train.eval=full", *ONE_STEP, "sampler.batch_size=100000"]
    single = run_training(tiny_cfg(tmp_path, *over, fanouts="[-1,-1]"), single_process=True,
                          progress=False)
    dist = run_training(tiny_cfg(tmp_path, *over, workers=2, fanouts="[-1,-1]"), progress=False)
    rs, rd = (RunDir(Path(s["run_dir"])).metrics()[-1] for s in (single, dist))
    assert rd["eval_mode"] == "full" and rd["eval_comm"]["by_category"]["eval"] > 0
    for key in ("val_recall", "val_ndcg", "test_recall", "test_ndcg"):
        assert rd[key] == pytest.approx(rs[key], abs=1e-9), key
    assert 0 < rs["test_recall"] < 1


def test_eval_negatives_on_a_random_split_shared_or_per_source() -> None:
    """``task.options.eval_negatives``: a shared set of N random pairs (ranking pairs, Hits@K)
    or each positive's own N (ranking per_source, MRR); refused where the split brings its
    own and required for per_source on a random split."""
    from tests.conftest import make_graph

    ds = parse_dataset({"name": "tiny", "source": "synthetic"})
    g = make_graph(200, avg_degree=6, seed=0)
    shared = LinkPrediction(hits_k=20, eval_negatives=300)
    shared.load_graph(ds, g)
    assert shared.split is not None and shared.split.neg("test").shape == (300, 2)
    assert shared.metric == "hits"
    per = LinkPrediction(ranking="per_source", hits_k=5, eval_negatives=7)
    per.load_graph(ds, g)
    assert per.split is not None and per.split.neg_per_pos == 7 and per.metric == "mrr"
    with pytest.raises(ValueError, match=r"ranking='per_source' on a random split .*eval_negatives"):
        LinkPrediction(ranking="per_source").load_graph(ds, g)
    with pytest.raises(ValueError, match=r"eval_negatives=-1: must be an int >= 0"):
        LinkPrediction(eval_negatives=-1)


def test_eval_negatives_are_refused_for_a_split_with_its_own(tmp_path: Path) -> None:
    write_ogbl_mrr(tmp_path / "mrr")
    ds = parse_dataset({"name": "mrr", "source": "ogbl", "path": str(tmp_path / "mrr")})
    with pytest.raises(ValueError, match=r"eval_negatives=50: dataset 'mrr' \(source=ogbl\) brings its own"):
        LinkPrediction(ranking="per_source", eval_negatives=50).load_graph(ds)

"""``method: kahypar``: Mt-KaHyPar, then the multi-constraint repair (partition/kahypar.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from partition import PartitionConfig, PartitionError, assign_parts, build_partition_set
from partition.balance import allowed_loads, loads, symmetrize, vertex_weights
from partition.graph import Graph
from partition.methods import random_parts
from partition.report import quality_report
from tests.partition.conftest import planted_blocks

needs_mtkahypar = pytest.mark.skipif(
    importlib.util.find_spec("mtkahypar") is None, reason="mtkahypar is not installed (pip install 'gnntrain[kahypar]')")


@pytest.fixture(scope="module")
def eight_blocks() -> Graph:
    """8 planted communities of 150 nodes, undirected, half the nodes training."""
    return planted_blocks(blocks=8, size=150, p_in=0.06, p_out=0.002, seed=4)


def _kahypar(**kw: object) -> PartitionConfig:
    return PartitionConfig(method="kahypar", **kw)  # type: ignore[arg-type]


@needs_mtkahypar
@pytest.mark.parametrize("k", [2, 4])
def test_every_node_in_one_of_k_parts_and_every_constraint_balanced(eight_blocks: Graph, k: int) -> None:
    cfg = _kahypar(parts=k, seed=1)
    parts = assign_parts(eight_blocks, cfg)
    assert parts.shape == (eight_blocks.num_nodes,) and parts.dtype == np.int64
    assert parts.min() == 0 and parts.max() == k - 1
    w, names = vertex_weights(eight_blocks, cfg)
    assert names == ["nodes", "train", "edges"]
    over = loads(parts, w, k).max(axis=0) - allowed_loads(w, k, cfg.imbalance)
    assert (over <= 1e-9).all(), dict(zip(names, over.tolist(), strict=True))


@needs_mtkahypar
def test_cut_finds_the_planted_communities(eight_blocks: Graph) -> None:
    """Planted blocks have ~1/6 of their edges between communities; random parts cut 7/8."""
    cut = quality_report(eight_blocks, assign_parts(eight_blocks, _kahypar(parts=8))).edge_cut_fraction
    rand = quality_report(eight_blocks, random_parts(eight_blocks, 8)).edge_cut_fraction
    assert cut < 0.3 * rand


@needs_mtkahypar
def test_one_constraint_is_mtkahypars_own_balance(eight_blocks: Graph) -> None:
    """Nodes only: no repair runs, so the node balance is Mt-KaHyPar's, within the imbalance."""
    from partition.kahypar import combined_weight, mtkahypar_partition

    cfg = _kahypar(parts=4, balance_train=False, balance_edges=False, imbalance=1.03)
    w, _ = vertex_weights(eight_blocks, cfg)
    assert np.array_equal(combined_weight(w), np.full(eight_blocks.num_nodes, 1000))
    parts = mtkahypar_partition(symmetrize(eight_blocks, np.int64), combined_weight(w), cfg, 1)
    counts = np.bincount(parts, minlength=4)
    assert counts.max() <= 1.03 * np.ceil(eight_blocks.num_nodes / 4)
    assert np.array_equal(assign_parts(eight_blocks, cfg), parts)


def test_combined_weight_gives_every_constraint_the_same_total() -> None:
    from partition.kahypar import combined_weight

    w = np.array([[1, 1, 10], [1, 0, 30], [1, 0, 0], [1, 1, 0]], dtype=np.int64)
    cw = combined_weight(w)
    # nodes 1000 each; train 2000 per training node; edges 1000 * 4 * deg / 40
    assert cw.tolist() == [1000 + 2000 + 1000, 1000 + 3000, 1000, 1000 + 2000]


@needs_mtkahypar
def test_same_seed_same_parts_and_written_set_matches(eight_blocks: Graph, tmp_path: Path) -> None:
    cfg = _kahypar(parts=4, seed=7)
    a = assign_parts(eight_blocks, cfg)
    assert np.array_equal(a, assign_parts(eight_blocks, cfg))
    pset = build_partition_set(eight_blocks, cfg, tmp_path / "sets")
    assert pset.meta.method == "kahypar"
    assert np.array_equal(pset.assignment(), a)
    assert any(s.name == "kahypar" for s in pset.meta.steps)


_THREADS_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from partition import PartitionConfig
    from partition.kahypar import combined_weight, mtkahypar_partition
    from partition.balance import symmetrize, vertex_weights
    from tests.partition.conftest import planted_blocks
    g = planted_blocks(blocks=8, size=150, p_in=0.06, p_out=0.002, seed=4)
    cfg = PartitionConfig(method="kahypar", parts=4, seed=3)
    w, _ = vertex_weights(g, cfg)
    parts = mtkahypar_partition(symmetrize(g, np.int64), combined_weight(w), cfg, int(sys.argv[1]))
    print(",".join(map(str, parts.tolist())))
""")


@needs_mtkahypar
def test_deterministic_preset_gives_the_same_parts_on_1_and_2_threads() -> None:
    """The thread pool is process-wide, so each thread count runs in a process of its own."""
    root = Path(__file__).resolve().parents[2]
    got = [subprocess.run([sys.executable, "-c", _THREADS_SCRIPT, str(t)], capture_output=True, text=True,
                          cwd=root, check=True, timeout=300).stdout.strip() for t in (1, 2)]
    assert got[0] and got[0] == got[1]


def test_missing_extra_is_named_before_any_work(eight_blocks: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mtkahypar", None)  # import mtkahypar -> ImportError

    def no_work(*a: object, **kw: object) -> None:
        raise AssertionError("symmetrize ran before the missing extra was reported")

    monkeypatch.setattr("partition.kahypar.symmetrize", no_work)
    with pytest.raises(PartitionError, match=r"method='kahypar' needs the mtkahypar package.*gnntrain\[kahypar\]"):
        assign_parts(eight_blocks, _kahypar(parts=2))


def test_volume_objective_is_refused(eight_blocks: Graph) -> None:
    with pytest.raises(PartitionError, match=r"partition.objective='vol'.*edge cut only"):
        assign_parts(eight_blocks, _kahypar(parts=2, objective="vol"))


def test_unmet_constraints_are_refused_with_the_way_out(eight_blocks: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result the repair cannot balance in any constraint: no rerun (reweighting every
    constraint alike changes nothing), and the error names the constraint and the way out."""
    import partition.kahypar as kh

    weights: list[np.ndarray] = []

    def lopsided(sym: object, node_weight: np.ndarray, cfg: PartitionConfig, threads: int) -> np.ndarray:
        weights.append(node_weight)
        parts = np.arange(eight_blocks.num_nodes) % cfg.parts
        parts[: eight_blocks.num_nodes // 3] = 0  # part 0 holds over a third of every constraint
        return parts.astype(np.int64)

    monkeypatch.setattr(kh, "load_mtkahypar", lambda: None)
    monkeypatch.setattr(kh, "mtkahypar_partition", lopsided)
    monkeypatch.setattr("partition.multilevel.refine", lambda blocks, parts, w, cfg: parts)
    with pytest.raises(PartitionError, match=r"part 0 holds.*Mt-KaHyPar balances one weight per node "
                                             r"\(here nodes \+ train \+ edges combined, up to 3 runs\).*"
                                             r"balance_train=false"):
        assign_parts(eight_blocks, _kahypar(parts=4))
    assert len(weights) == 1


def test_a_missed_constraint_weighs_4x_in_the_rerun_and_the_rerun_is_kept(
        eight_blocks: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first run leaves one constraint (train) over its load and the repair does not fix
    it: Mt-KaHyPar runs again with that constraint's emphasis 4x, and the second, balanced
    result is what comes back."""
    import partition.kahypar as kh
    from partition.kahypar import combined_weight

    cfg = _kahypar(parts=2)
    w, names = vertex_weights(eight_blocks, cfg)
    train = names.index("train")
    n = eight_blocks.num_nodes
    # nodes (and about the edges) split evenly, three quarters of the training nodes in part 0
    rng = np.random.default_rng(0)
    is_train = w[:, train] > 0
    skewed = np.zeros(n, np.int64)
    for mine, to_part_0 in ((is_train, 0.75), (~is_train, 0.25)):
        ids = rng.permutation(np.flatnonzero(mine))
        skewed[ids[int(to_part_0 * ids.size):]] = 1
    balanced = (np.arange(n) % 2).astype(np.int64)
    calls: list[np.ndarray] = []

    def fake(sym: object, node_weight: np.ndarray, c: PartitionConfig, threads: int) -> np.ndarray:
        calls.append(node_weight)
        return skewed if len(calls) == 1 else balanced

    monkeypatch.setattr(kh, "load_mtkahypar", lambda: None)
    monkeypatch.setattr(kh, "mtkahypar_partition", fake)
    monkeypatch.setattr("partition.multilevel.refine", lambda blocks, parts, w, cfg: parts)
    excess = loads(skewed, w, 2).max(axis=0) / allowed_loads(w, 2, cfg.imbalance)
    assert excess[train] > 1.0 and (np.delete(excess, train) <= 1.0).all(), excess  # train alone missed
    parts = assign_parts(eight_blocks, cfg)
    assert len(calls) == 2, "one rerun after a missed constraint"
    emphasis = np.ones(w.shape[1])
    emphasis[train] = 4.0
    np.testing.assert_array_equal(calls[0], combined_weight(w))
    np.testing.assert_array_equal(calls[1], combined_weight(w, emphasis))
    np.testing.assert_array_equal(parts, balanced)

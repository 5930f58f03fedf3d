"""The Ray pipeline over chunks against the in-process path, and the block-parallel methods."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from partition import PartitionConfig, build_partition_set, multilevel, quality_report
from partition.balance import vertex_weights
from partition.chunked import ChunkedGraph, ChunkError, open_chunks, write_chunks
from partition.errors import PartitionError
from partition.graph import Graph
from partition.methods import assign_parts
from partition.multilevel import GraphBlocks, blocked_parts, check_balance, coarsen
from partition.parallel import partition_chunks, run_chunks
from partition.steps import StepRecorder
from partition.storage import open_store
from tests.conftest import upload_tree
from tests.partition.conftest import graph_from_edges, planted_blocks

ROWS = 40  # rows per block: the messy graph (120 nodes) is 3 blocks, the planted one 15


@pytest.fixture
def messy_chunks(messy_graph: Graph, tmp_path: Path) -> ChunkedGraph:
    return write_chunks(messy_graph, tmp_path / "chunks", edges_per_chunk=97, nodes_per_chunk=25)


def test_ray_pipeline_writes_the_in_process_set(ray_tasks: None, messy_graph: Graph,
                                                messy_chunks: ChunkedGraph, tmp_path: Path) -> None:
    """Same assignment (seeded random) -> the same directory name, files and checksums, and
    every node's rows, features and split read back from its part."""
    cfg = PartitionConfig(method="random", parts=3)
    run = run_chunks(messy_chunks, cfg, tmp_path / "ray", block_rows=ROWS, progress=False)
    ref = build_partition_set(messy_graph, cfg, tmp_path / "mem")
    assert run.pset.path.name == ref.path.name
    assert run.pset.meta.files == ref.meta.files  # every sha256, size, dtype and shape
    dump = {"exclude": {"steps", "created_utc", "meta_sha256"}}
    assert run.pset.meta.model_dump(**dump) == ref.meta.model_dump(**dump)  # type: ignore[arg-type]
    assert run.worker_peak_rss > 0 and run.worker_peak_rss == max(run.task_peak_rss.values())
    assert {"split edge chunks", "build row blocks", "cut blocks by part", "write parts"} <= run.task_peak_rss.keys()
    assert [p.name for p in (tmp_path / "ray").iterdir()] == [ref.path.name]  # no temp dir left
    again = partition_chunks(messy_chunks, cfg, tmp_path / "ray")
    assert again.reused and again.path == run.pset.path


def test_ray_pipeline_reads_chunks_from_and_writes_the_set_to_object_storage(
        ray_tasks: None, messy_graph: Graph, messy_chunks: ChunkedGraph, tmp_path: Path,
        s3_bucket: tuple[str, dict[str, object]]) -> None:
    """Chunks on S3 in, the set on S3 out, no directory shared by the tasks: the same set
    (name, every file's checksum) as in memory, the pipeline's pieces gone, reused on the
    next call; a chunk that fails its checksum ends the run and leaves no object behind."""
    uri, options = s3_bucket
    bucket = open_store(uri, options)
    upload_tree(messy_chunks.path, bucket.child("chunks"))
    cg = open_chunks(f"{uri}/chunks", options)
    assert cg.location == f"{uri}/chunks" and cg.manifest == messy_chunks.manifest
    cfg = PartitionConfig(method="random", parts=3, root=f"{uri}/parts", storage_options=options)
    run = run_chunks(cg, cfg, block_rows=ROWS, progress=False)
    ref = build_partition_set(messy_graph, PartitionConfig(method="random", parts=3), tmp_path / "mem")
    assert run.pset.location == f"{uri}/parts/{ref.path.name}"
    assert run.pset.meta.files == ref.meta.files
    assert bucket.child("parts").names() == [ref.path.name]
    assert sorted(bucket.child("parts").child(ref.path.name).names()) == sorted(
        {rel.split("/")[0] for rel in ref.meta.files} | {"meta.json"})  # no .work/ left
    again = partition_chunks(cg, cfg)
    assert again.reused and again.location == run.pset.location
    again.check_files(verify=True)  # every object's SHA-256 against meta.json

    raw = bytearray(bucket.read_bytes("chunks/nodes-2/y.npy"))
    raw[-1] ^= 0x01
    bucket.write_bytes("chunks/nodes-2/y.npy", bytes(raw))
    failed = cfg.model_copy(update={"root": f"{uri}/failed"})
    with pytest.raises(ChunkError, match=r"nodes chunk 'nodes-2' of s3://.*y.npy fails its checksum"):
        run_chunks(open_chunks(f"{uri}/chunks", options), failed, block_rows=ROWS, progress=False)
    assert bucket.child("failed").names() == []


@pytest.mark.parametrize("method", ["stream", "multilevel"])
def test_ray_methods_equal_in_process_blocks(ray_tasks: None, method: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Same blocks -> the same parts on Ray as in this process (coarsening forced on)."""
    monkeypatch.setattr(multilevel, "COARSE_NODES", 0)  # read by the coordinator only
    g = planted_blocks(blocks=4, size=150)
    cg = write_chunks(g, tmp_path / "c", edges_per_chunk=1000, nodes_per_chunk=64)
    cfg = PartitionConfig(method=method, parts=4)
    pset = partition_chunks(cg, cfg, tmp_path / "ray", block_rows=ROWS, progress=False)
    w, names = vertex_weights(g, cfg)
    ref = blocked_parts(GraphBlocks(g, ROWS), w, names, cfg, StepRecorder())
    assert np.array_equal(pset.assignment(), ref)
    got = np.zeros(g.num_nodes, dtype=int)  # every node owned exactly once
    for p in range(4):
        part = pset.load_part(p)
        got[part.orig_ids] += 1
        assert np.array_equal(part.x, g.x[part.orig_ids])
    assert np.all(got == 1)


@pytest.mark.parametrize("method", ["stream", "multilevel"])
def test_block_methods_balance_and_cut(method: str) -> None:
    """Planted 8 x 100-node blocks: every constraint within the allowed load (the report's
    max/mean); multilevel's cut far below random's and within 1.15x METIS's; stream (LDG,
    0.55 here, and as weak as the single-process ldg on this graph) below random's."""
    g = planted_blocks(blocks=8, size=100, p_in=0.1, p_out=0.004)
    cfg = PartitionConfig(method=method, parts=4, imbalance=1.05)
    parts = assign_parts(g, cfg)
    rep = quality_report(g, parts)
    metis = quality_report(g, assign_parts(g, cfg.model_copy(update={"method": "metis"})))
    assert rep.imbalance["nodes"] <= 1.05 + 1e-9
    assert rep.imbalance["train"] <= 1.05 + 1e-9
    assert rep.imbalance["edges"] <= 1.05 + 1e-9
    if method == "multilevel":
        assert rep.edge_cut_fraction < 0.4 * rep.random_edge_cut_fraction
        assert rep.edge_cut_fraction <= 1.15 * metis.edge_cut_fraction
    else:
        assert rep.edge_cut_fraction < 0.8 * rep.random_edge_cut_fraction


def test_coarsening_keeps_communities_and_the_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """32 planted communities of 50 nodes, k=4 (a cluster may hold 100 nodes): label
    propagation shrinks the graph at least 5x, and multilevel's cut stays within 1.15x METIS's
    and far below random's, with every constraint within its allowed load."""
    monkeypatch.setattr(multilevel, "COARSE_NODES", 0)
    g = planted_blocks(blocks=32, size=50, p_in=0.2, p_out=0.002)
    cfg = PartitionConfig(method="multilevel", parts=4)
    w, _ = vertex_weights(g, cfg)
    assert np.unique(coarsen(GraphBlocks(g, ROWS), w, 4)).size <= g.num_nodes // 5
    rep = quality_report(g, assign_parts(g, cfg))
    metis = quality_report(g, assign_parts(g, cfg.model_copy(update={"method": "metis"})))
    assert max(rep.imbalance[c] for c in ("nodes", "train", "edges")) <= 1.05 + 1e-9
    assert rep.edge_cut_fraction <= 1.15 * metis.edge_cut_fraction
    assert rep.edge_cut_fraction < 0.4 * rep.random_edge_cut_fraction


def test_dense_graph_coarsens_across_many_blocks_about_as_far_as_in_one() -> None:
    """A dense power-law graph (30k nodes, mean degree ~93) in 30 blocks that move nodes at
    the same time: every block fills the same hub clusters, and undoing every move into an
    overfull cluster (not just the excess) left 1,711 clusters against 80 for one block.
    Undoing only the excess must coarsen about as far as one block does."""
    from gnntrain.config import SyntheticConfig
    from gnntrain.data.synthetic import generate

    g = generate(SyntheticConfig(nodes=30_000, avg_degree=100, features=2, train_frac=0.01))
    cfg = PartitionConfig(method="multilevel", parts=16)
    w, _ = vertex_weights(g, cfg)
    one = np.unique(coarsen(GraphBlocks(g, g.num_nodes), w, 16)).size
    many = np.unique(coarsen(GraphBlocks(g, 1024), w, 16)).size
    assert many <= 2 * one, f"{many} clusters from 30 blocks against {one} from one"


def test_only_the_moves_past_a_cluster_s_limit_are_undone() -> None:
    """Cluster 0 holds node 0 (weight 1); nodes 1-4 (weights 1, 2, 1, 1) all moved into it
    with a limit of 3: moves are kept in the scrambled id order while they fit and the rest
    undone; clusters within the limit keep every move."""
    new = np.array([0, 0, 0, 0, 0, 5, 5])
    moved = np.array([False, True, True, True, True, False, True])
    w = np.array([[1.0], [1.0], [2.0], [1.0], [1.0], [1.0], [1.0]])
    undo = multilevel._overfilling_moves(new, moved, w, np.array([3.0]))
    assert not undo[[0, 5, 6]].any()
    kept = w[1:5, 0][~undo[1:5]].sum()
    assert 1.0 + kept <= 3.0 and 1.0 + kept + w[1:5, 0][undo[1:5]].min() > 3.0


def test_unbalanced_assignment_names_the_constraint(blocks_graph: Graph) -> None:
    cfg = PartitionConfig(method="multilevel", parts=2)
    w, names = vertex_weights(blocks_graph, cfg)
    parts = (np.arange(blocks_graph.num_nodes) % 10 == 0).astype(np.int64)
    with pytest.raises(PartitionError, match=r"could not meet the 'nodes' balance constraint: part 0"):
        check_balance(parts, w, names, cfg)
    train_heavy = np.zeros(blocks_graph.num_nodes, dtype=np.int64)
    train_heavy[blocks_graph.train_idx[: len(blocks_graph.train_idx) * 2 // 3]] = 1
    rest = np.flatnonzero(train_heavy == 0)
    train_heavy[rest[: blocks_graph.num_nodes // 2 - int(train_heavy.sum())]] = 1
    with pytest.raises(PartitionError, match=r"'train' balance constraint: part 1 .*balance_train=false"):
        check_balance(train_heavy, w, names, cfg)


def test_failing_task_leaves_no_half_written_set(ray_tasks: None, messy_chunks: ChunkedGraph,
                                                 tmp_path: Path) -> None:
    """A node chunk that fails its checksum is read only by a write-step task: the run ends
    with the chunk's name and the partition root holds nothing."""
    f = messy_chunks.path / "nodes-3" / "x.npy"
    raw = bytearray(f.read_bytes())
    raw[-1] ^= 0x01
    f.write_bytes(bytes(raw))
    root = tmp_path / "ray"
    with pytest.raises(ChunkError, match=r"nodes chunk 'nodes-3' .*x.npy fails its checksum"):
        partition_chunks(messy_chunks, PartitionConfig(method="random", parts=3), root,
                         block_rows=ROWS, progress=False)
    assert list(root.iterdir()) == []


def test_whole_graph_methods_are_refused_for_chunks(messy_chunks: ChunkedGraph, tmp_path: Path) -> None:
    with pytest.raises(PartitionError, match=r"method='metis' needs the whole graph .* random, stream, multilevel"):
        partition_chunks(messy_chunks, PartitionConfig(method="metis", parts=2), tmp_path)
    with pytest.raises(PartitionError, match=r"partition.parts=500 is larger than the graph's 120 nodes"):
        partition_chunks(messy_chunks, PartitionConfig(method="stream", parts=500), tmp_path)


def test_partition_package_stays_ray_free() -> None:
    """Only partition.parallel imports Ray; the chunk format and the methods do not."""
    import subprocess
    import sys

    code = ("import sys, partition, partition.chunked, partition.multilevel, partition.methods; "
            "print([m for m in sys.modules if m == 'ray' or m.startswith('ray.')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("method", ["metis", "multilevel", "chunks"])
def test_unmeetable_balance_is_refused_before_any_work(ray_tasks: None, method: str, tmp_path: Path) -> None:
    """A hub with more in-edges than a part may hold: refused naming the constraint, the
    node, its weight and the limit; the partition root holds nothing."""
    n = 60
    hub = np.zeros(n - 1, dtype=np.int64)
    ring = np.arange(n)
    star = graph_from_edges(np.concatenate([hub, ring]), np.concatenate([np.arange(1, n), (ring + 1) % n]), n,
                            undirected=True, name="star")
    cfg = PartitionConfig(method="multilevel" if method == "chunks" else method, parts=8)
    root = tmp_path / "parts"
    root.mkdir()
    # hub in-degree 59 of 234 in-edges (ring edges at the hub are star edges): 1.05 * 234 / 8 = 30.7
    want = r"'edges' cannot be met with partition.parts=8 .*node 0 alone weighs 59, above the 30.7 .*balance_edges=false"
    with pytest.raises(PartitionError, match=want):
        if method == "chunks":
            partition_chunks(write_chunks(star, tmp_path / "c", edges_per_chunk=50), cfg, root, progress=False)
        else:
            build_partition_set(star, cfg, root)
    assert list(root.iterdir()) == []
    build_partition_set(star, PartitionConfig(method=cfg.method, parts=8, balance_edges=False), root)  # the fix


def _touch_fresh_pages(nbytes: int) -> int:
    """Map ``nbytes`` of new anonymous memory, touch every page and unmap it: the RSS rises
    by ``nbytes`` whatever the allocator already holds resident (a 64 MiB ``np.ones`` can
    reuse pages earlier tests left in this process, and then the RSS never moves)."""
    import mmap

    m = mmap.mmap(-1, nbytes)
    try:
        a = np.frombuffer(m, dtype=np.uint8)
        a[::mmap.PAGESIZE] = 1
        n = int(a.size)
        del a
    finally:
        m.close()
    return n


def test_a_task_reports_its_own_peak_not_an_earlier_task_s_in_the_same_process() -> None:
    """Ray reuses task processes: a small task after a large one must not report the large
    one's peak (where Linux lets the peak be reset; elsewhere it is the process's so far)."""
    from partition.parallel import _measured
    from partition.steps import _reset_peak

    def big() -> int:
        return _touch_fresh_pages(64 * 2**20)

    _, big_peak = _measured(big)
    _, small_peak = _measured(lambda: 1)
    if _reset_peak():
        assert small_peak < big_peak - 48 * 2**20, (small_peak, big_peak)
    else:
        assert small_peak >= big_peak


def test_the_process_peak_survives_the_step_resets_that_clear_ru_maxrss() -> None:
    """Each step resets the process's peak, which clears ``ru_maxrss`` too: the lifetime
    peak is kept by ``process_peak_rss`` (what the benchmarks report for a process)."""
    from partition.steps import _read_status, process_peak_rss

    rec = StepRecorder()
    with rec("big"):
        _touch_fresh_pages(64 * 2**20)
    with rec("small"):
        pass
    big, small = (s.peak_rss_bytes for s in rec.steps)
    assert process_peak_rss() >= big >= _read_status("VmRSS") + 48 * 2**20
    if rec.steps[1].peak_is_step_local:
        assert small < big - 48 * 2**20  # the reset cleared the first step's peak


def _big_piece(block: multilevel.Block, mib: int) -> np.ndarray:
    return np.full(mib << 17, block.index, dtype=np.int64)  # mib MiB of int64


def _piece_sizes(pieces: Iterable[np.ndarray]) -> list[tuple[int, int]]:
    return [(int(p.sum() // p.size), p.nbytes >> 20) for p in pieces]  # every page read


@pytest.mark.timeout(300)
def test_the_gathering_task_holds_one_piece_at_a_time(ray_tasks: None, tmp_path: Path) -> None:
    """Four kept pieces of 250 MiB (more than the test Ray's 300 MB store) reach
    :meth:`RayBlocks.call` in block order, fetched one at a time: the task's peak stays
    below the four pieces together. Handed over as task arguments, all four were mapped at
    once (1.23 GB peak here); the coarse edges of a 2.18B-edge graph are 14 GB of pieces."""
    from partition.parallel import RayBlocks, _Runner
    from partition.storage import LocalStore

    for b in range(4):
        (tmp_path / f"block-{b}").mkdir()
        np.save(tmp_path / f"block-{b}" / "indptr.npy", np.zeros(2, dtype=np.int64))
        np.save(tmp_path / f"block-{b}" / "indices.npy", np.zeros(0, dtype=np.int64))
    blocks = RayBlocks(LocalStore(tmp_path), np.arange(5, dtype=np.int64), _Runner(progress=False))
    pieces = blocks.map(_big_piece, (250,), desc="big pieces", keep=True)
    assert blocks.call(_piece_sizes, pieces) == [(b, 250) for b in range(4)]
    assert blocks.runner.task_peaks["_piece_sizes"] < 4 * 250 << 20


def test_pieces_merged_in_batches_equal_one_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    """The coarse step's batched merge of (keys, counts) pieces gives the one-shot sum."""
    rng = np.random.default_rng(0)
    pieces = [multilevel._count_keys(rng.integers(0, 50, size=int(rng.integers(0, 40)))) for _ in range(30)]
    want = multilevel._count_keys(np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces]))
    monkeypatch.setattr(multilevel, "MERGE_ENTRIES", 16)
    got = multilevel._merged_pieces(iter(pieces))
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    empty = multilevel._merged_pieces(iter([]))
    assert empty[0].size == 0 and empty[1].size == 0

"""Partitioning a chunked graph on Ray against today's whole-graph METIS path, same run.

    python -m bench.partition_scale            # synthetic 1M nodes / 20M edges / 100 features, k=8
    python -m bench.partition_scale --smoke    # 30k nodes (coarsened), k=4, multilevel on 2 task processes
    python -m bench.partition_scale --beyond-metis --nodes 10000000 --avg-degree 220 --features 16 \
        --parts 16 --train-frac 0.01 --dir DIR    # more than 2^31 adjacency entries: no METIS row

Every step runs in its own process, so each peak resident memory (``ru_maxrss``) is that
step's alone:

1. ``chunks``: the synthetic graph streamed to chunks on disk
   (:func:`gnntrain.data.synthetic_chunks.write_synthetic_chunks`, never the whole edge list).
2. ``metis``: today's path: the graph generated in memory, ``build_partition_set`` with METIS
   (METIS runs in a child process beside it: both peaks are reported, the larger is the
   path's largest process).
3. ``<method> w=<n>``: :func:`partition.parallel.run_chunks` on a local Ray started with
   ``num_cpus=n`` (1 or 2 task processes at a time). Its memory is the larger of the
   coordinator's peak and the largest peak of any process that ran a task; Ray's own
   daemons (raylet, GCS, object store) are not counted.
4. ``check``: the graph generated once more; for every set, ``quality_report`` (edge cut,
   imbalance, the existing report), every node owned by exactly one part, every file's
   checksum, and every part's rows, features and labels equal to the graph's.

``--beyond-metis`` is for graphs METIS cannot take (more than 2^31 - 1 adjacency entries)
and no process can hold: no METIS row and no whole-graph check. Steps: ``chunks``; the
first of ``--methods`` on the last of ``--workers`` task processes; ``check``, streamed: every
file's checksum, every node owned by exactly one part (the parts' original ids), the report
from the set alone (:func:`partition.report.set_report`, written as ``partition.json``
beside the set) and, for ``--sample`` random nodes, their rows, features and labels against
the chunks; ``train``: a one-epoch training run on ``--parts`` Ray workers from that set (the
run's own partition step finds and reuses it), the peak RSS of each of its processes
recorded. For every step the peak disk used under ``--dir`` is recorded too.

Every step (either mode) also reports its anonymous peak (``RssAnon``, sampled each second):
of its own process and of the largest process below it. Resident memory counts the pages
of files a process has mapped (chunks, row blocks, part files), which the kernel drops and
rereads under pressure; the anonymous peak is what the process allocated.
``--reuse-chunks`` (either mode) keeps chunks that an earlier run wrote under ``--dir`` for
the same graph settings, and reports that run's chunk row; ``--chunks-only`` writes them
and stops.

Correctness targets (exit status 1 when one fails): every set round-trips, every node is
assigned exactly once, every balance constraint (nodes, training nodes, edges) within
``partition.imbalance``. Reported, not gated (timing and memory on a shared machine): edge
cut / METIS's (target <= 1.15 for multilevel), peak memory of the largest process / the
METIS path's (target <= 0.5), time with 1 and 2 task processes. JSON goes to bench/out/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from bench.harness.cli import bench_parser
from bench.harness.memory import MIB, PeakMeter, children_peak, own_peak, peak_rss, polled, tree
from bench.harness.paths import out_path, write_json


def graph_cfg(args: dict[str, Any]) -> Any:
    from gnntrain.config import SyntheticConfig

    return SyntheticConfig(nodes=args["nodes"], avg_degree=args["avg_degree"], features=args["features"],
                           classes=args["classes"], train_frac=args.get("train_frac", 0.1), val_frac=0.05,
                           seed=0)


def peak_mib() -> float:
    """This process's peak over its life (not its children's: the Ray child's children are
    Ray's daemons), across the partition step recorder's peak resets."""
    return own_peak() / MIB


def _child_chunks(a: dict[str, Any]) -> dict[str, Any]:
    from gnntrain.data.synthetic_chunks import write_synthetic_chunks

    t0 = time.perf_counter()
    cg = write_synthetic_chunks(graph_cfg(a), a["chunks"], name=a["name"])
    return {"seconds": time.perf_counter() - t0, "peak_mib": peak_mib(), "edges": cg.num_edges,
            "edge_chunks": len(cg.manifest.edge_chunks), "node_chunks": len(cg.manifest.node_chunks)}


def _child_metis(a: dict[str, Any]) -> dict[str, Any]:
    from gnntrain.data.synthetic import generate
    from partition import PartitionConfig, build_partition_set

    t0 = time.perf_counter()
    g = generate(graph_cfg(a), name=a["name"])
    t1 = time.perf_counter()
    pset = build_partition_set(g, PartitionConfig(method="metis", parts=a["parts"]), a["root"])
    # METIS itself runs in a process of its own (partition.balance.metis_in_child) while
    # this one holds the graph: its peak is this process's largest child's
    return {"seconds": time.perf_counter() - t1, "generate_s": t1 - t0, "peak_mib": peak_mib(),
            "metis_child_peak_mib": children_peak() / MIB,
            "path": str(pset.path)}


def _child_ray(a: dict[str, Any]) -> dict[str, Any]:
    import logging

    import ray

    from partition import PartitionConfig
    from partition.parallel import run_chunks

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=a["workers"], include_dashboard=False, object_store_memory=int(1e9),
             _temp_dir=tempfile.mkdtemp(prefix="rt-", dir="/tmp"), logging_level=logging.WARNING,
             log_to_driver=False)
    try:
        t0 = time.perf_counter()
        source: Any = a["chunks"]
        if "tables" in a:  # Parquet tables in a store: opening them checks, scans and hashes them
            from gnntrain.config import ChunksDataset
            from gnntrain.data.load import open_chunk_dataset

            source = open_chunk_dataset(ChunksDataset.model_validate(a["tables"]))
        opened = time.perf_counter() - t0
        run = run_chunks(source, PartitionConfig(method=a["method"], parts=a["parts"]), a["root"],
                         progress=not a["smoke"])
        seconds = time.perf_counter() - t0
    finally:
        ray.shutdown()
    steps = {s.name: round(s.seconds, 1) for s in run.pset.meta.steps}
    step_peaks = {s.name: round(s.peak_rss_bytes / MIB) for s in run.pset.meta.steps}
    coord = peak_mib()
    return {"seconds": seconds, "open_s": opened, "coordinator_peak_mib": coord,
            "worker_peak_mib": run.worker_peak_rss / MIB,
            "peak_mib": max(coord, run.worker_peak_rss / MIB), "path": str(run.pset.path), "steps": steps,
            "coordinator_step_peak_mib": step_peaks,
            "task_peak_mib": {k: round(v / MIB) for k, v in run.task_peak_rss.items()}}


def check_set(g: Any, path: str) -> dict[str, Any]:
    """Quality report and round trip of one set against the graph."""
    from partition import open_partition_set, quality_report

    pset = open_partition_set(path, expect_graph_hash=g.content_hash())
    pset.check_files(verify=True)
    owned = np.zeros(g.num_nodes, dtype=np.int64)
    ok = True
    deg = np.diff(g.indptr)
    for p in range(pset.num_parts):
        part = pset.load_part(p)
        o = part.orig_ids
        owned[o] += 1
        lens = deg[o]
        pos = np.repeat(g.indptr[o] - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(lens.sum())
        ok &= bool(np.array_equal(part.x, g.x[o]) and np.array_equal(part.y, g.y[o])
                   and np.array_equal(np.diff(part.indptr), lens)
                   and np.array_equal(pset.orig_ids(part.indices), g.indices[pos]))
    rep = quality_report(g, pset.assignment())
    return {"edge_cut": rep.edge_cut_fraction, "imbalance": {k: rep.imbalance[k] for k in ("nodes", "train", "edges")},
            "assigned_once": bool(np.all(owned == 1)), "round_trip": ok}


def _child_check(a: dict[str, Any]) -> dict[str, Any]:
    from gnntrain.data.synthetic import generate

    g = generate(graph_cfg(a), name=a["name"])
    return {name: check_set(g, path) for name, path in a["sets"].items()}


def _chunk_rows(cg: Any, v: np.ndarray) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """In-neighbours (edge-id order), features and labels of original nodes ``v`` (sorted) of
    the chunked graph ``cg``, read by memory map (its edges in CSR order, as the synthetic
    writer stores them), so no edge list is loaded."""
    m = cg.manifest
    dst = [np.load(cg.path / c.name / "dst.npy", mmap_mode="r") for c in m.edge_chunks]
    src = [np.load(cg.path / c.name / "src.npy", mmap_mode="r") for c in m.edge_chunks]
    first = np.array([d[0] if d.shape[0] else -1 for d in dst])
    last = np.array([d[-1] if d.shape[0] else -1 for d in dst])
    rows = []
    for u in v:
        got = [np.asarray(src[j][np.searchsorted(dst[j], u):np.searchsorted(dst[j], u, side="right")])
               for j in np.flatnonzero((first <= u) & (last >= u))]
        rows.append(np.concatenate(got).astype(np.int64) if got else np.zeros(0, np.int64))
    x, y = [], []
    bounds = cg.node_bounds()
    chunk_of = np.searchsorted(bounds, v, side="right") - 1
    for j in np.unique(chunk_of):  # each node chunk mapped once
        c = m.node_chunks[j]
        at = v[chunk_of == j] - c.lo
        x.append(np.load(cg.path / c.name / "x.npy", mmap_mode="r")[at])
        y.append(np.load(cg.path / c.name / "y.npy", mmap_mode="r")[at])
    return rows, np.concatenate(x), np.concatenate(y)


def _child_stream_check(a: dict[str, Any]) -> dict[str, Any]:
    """The set of a graph no process holds, checked one part at a time (see the docstring)."""
    from partition import open_partition_set
    from partition.chunked import open_chunks
    from partition.report import set_report, write_report

    t0 = time.perf_counter()
    cg = open_chunks(a["chunks"])
    pset = open_partition_set(a["set"], expect_graph_hash=cg.manifest.graph_hash)
    pset.check_files(verify=True)
    verified_s = time.perf_counter() - t0
    parts = [pset.load_part(p, verify=False, per_type=False) for p in range(pset.num_parts)]  # mapped
    owned = np.zeros(pset.num_nodes, dtype=np.int64)
    for part in parts:
        owned[np.asarray(part.orig_ids)] += 1
    rep = set_report(pset)  # from meta.json alone
    counted = set_report(pset, from_parts=True)  # the meta's cut figures against the parts' edges
    meta_cuts_hold = (rep.cut_matrix, rep.random_edge_cut) == (counted.cut_matrix, counted.random_edge_cut)
    write_report(rep, Path(a["root"]).parent / "report", plot=False)
    rng = np.random.default_rng(0)
    v = np.sort(rng.choice(pset.num_nodes, size=min(a["sample"], pset.num_nodes), replace=False))
    want_rows, want_x, want_y = _chunk_rows(cg, v)
    new = pset.new_ids(v)
    same = True
    for i, (u, n) in enumerate(zip(v, new, strict=True)):
        part = parts[int(pset.book.owner(n))]
        r = int(n) - part.start
        nbrs = pset.orig_ids(np.asarray(part.indices[part.indptr[r]:part.indptr[r + 1]]))
        same &= bool(np.array_equal(nbrs, want_rows[i]) and np.array_equal(part.x[r], want_x[i])
                     and part.y[r] == want_y[i] and part.orig_ids[r] == u)
    return {"edge_cut": rep.edge_cut_fraction,
            "imbalance": {k: rep.imbalance[k] for k in ("nodes", "train", "edges")},
            "assigned_once": bool(np.all(owned == 1)), "round_trip": same, "sampled_nodes": int(v.shape[0]),
            "meta_cuts_hold": meta_cuts_hold,
            "checksums_s": verified_s, "seconds": time.perf_counter() - t0, "peak_mib": peak_mib()}


def _child_train(a: dict[str, Any]) -> dict[str, Any]:
    """One epoch on ``parts`` Ray workers from the chunks, reusing the set of step 2."""
    from gnntrain.config import load_config
    from gnntrain.runtime.coordinator import run_training

    k = a["parts"]
    cfg = load_config(raw={
        "dataset": {"name": a["name"], "source": "chunks", "path": a["chunks"]},
        "partition": {"method": a["method"], "parts": k, "root": a["root"]},
        "sampler": {"fanouts": [10, 5], "batch_size": 1024},
        "model": {"arch": "sage", "hidden": 64, "layers": 2},
        "train": {"epochs": 1, "lr": 0.01, "eval": "sampled", "eval_max_nodes": 20_000,
                  "run_root": str(Path(a["root"]).parent / "runs")},
        "cluster": {"workers": k}})
    t0 = time.perf_counter()
    with peak_rss() as seen:
        s = run_training(cfg, progress=False)
    roles: dict[str, list[float]] = {}
    for role, b in seen.by_pid.values():
        roles.setdefault(role, []).append(round(b / MIB))
    return {"seconds": time.perf_counter() - t0, "epoch_s": s.get("epoch_s_mean"), "final": s.get("final"),
            "edge_cut": s.get("edge_cut_fraction"), "coordinator_peak_mib": peak_mib(),
            "peak_mib_by_role": {r: sorted(v, reverse=True) for r, v in roles.items()},
            "run_dir": s.get("run_dir")}


GRAPH_KEYS = ("nodes", "avg_degree", "features", "classes", "train_frac", "name")


def _chunks_row(a: dict[str, Any], timeout: float, *, reuse: bool) -> dict[str, Any]:
    """The ``chunks`` step: the synthetic graph written by a child process (its row, with the
    disk it peaked at, recorded in ``<chunks>.json``), or with ``reuse`` the row recorded for
    chunks already written for the same graph settings (``"reused": true``)."""
    chunks, record = Path(a["chunks"]), Path(a["chunks"] + ".json")
    want = {k: a[k] for k in GRAPH_KEYS}
    if reuse and record.is_file() and (chunks / "manifest.json").is_file():
        got = json.loads(record.read_text())
        if got.get("graph") == want:
            return dict(got["row"]) | {"reused": True}
    shutil.rmtree(chunks, ignore_errors=True)
    record.unlink(missing_ok=True)
    with _disk_peak(chunks.parent) as disk:
        row = _spawn("chunks", a, timeout)
    row |= disk
    record.write_text(json.dumps({"graph": want, "row": row}))
    return row


MASKS = ("train_mask", "val_mask", "test_mask")


def tables_dataset(a: dict[str, Any]) -> dict[str, Any]:
    """The ``source: chunks`` dataset section of the Parquet tables :func:`_child_tables` writes."""
    where = a["tables_uri"]
    return {"name": a["name"], "source": "chunks", "storage_options": a["storage_options"],
            "edges": {"path": f"{where}/edges"},
            "nodes": {"path": f"{where}/nodes", "features": "x", "label": "y", "masks": list(MASKS)}}


def _child_tables(a: dict[str, Any]) -> dict[str, Any]:
    """The chunks as Parquet tables in the bucket, as a user's export would hold them: one file
    of one row group per chunk, edges grouped by destination as the chunks store them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from partition.chunked import SPLIT_CODES, open_chunks
    from partition.storage import FsspecStore, open_store

    t0 = time.perf_counter()
    cg = open_chunks(a["chunks"])
    store = open_store(a["tables_uri"], a["storage_options"])
    assert isinstance(store, FsspecStore)
    written = 0

    def put(rel: str, table: pa.Table) -> None:
        nonlocal written
        with store.fs.open(f"{store.path}/{rel}", "wb") as f:
            pq.write_table(table, f, row_group_size=table.num_rows)
        written += int(store.size(rel) or 0)

    for j in range(len(cg.manifest.edge_chunks)):
        src, dst = cg.edges(j)
        put(f"edges/part-{j:05d}.parquet", pa.table({"src": src, "dst": dst}))
    for j, (_, _, arrays) in enumerate(cg.iter_node_chunks()):
        x = arrays["x"]
        cols = {"x": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), x.shape[1]), "y": arrays["y"]}
        cols |= {m: arrays["split"] == SPLIT_CODES[s] for m, s in zip(MASKS, SPLIT_CODES, strict=True)}
        put(f"nodes/part-{j:05d}.parquet", pa.table(cols))
    return {"seconds": time.perf_counter() - t0, "bytes": written, "peak_mib": peak_mib()}


CHILDREN = {"chunks": _child_chunks, "tables": _child_tables, "metis": _child_metis, "ray": _child_ray, "check": _child_check,
            "stream_check": _child_stream_check, "train": _child_train}


@contextlib.contextmanager
def _disk_peak(path: Path, every_s: float = 1.0) -> Iterator[dict[str, float]]:
    """Peak GiB used on ``path``'s file system above what was used on entry, sampled."""
    out = {"disk_peak_gib": 0.0}
    start = shutil.disk_usage(path).used

    def poll() -> None:
        out["disk_peak_gib"] = max(out["disk_peak_gib"], (shutil.disk_usage(path).used - start) / 2**30)

    with polled(poll, every_s):
        yield out


def _spawn(kind: str, a: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run step ``kind`` in a child process; its row, plus its seconds and the anonymous
    peaks of the child and of the largest of its descendants (Ray's task processes and
    daemons, training workers, METIS's process)."""
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "bench.partition_scale", "--child", kind, json.dumps(a)],
                             stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    top = psutil.Process(child.pid)
    with PeakMeter(lambda: tree(top), "RssAnon").polling(1.0) as anon:
        try:
            stdout, _ = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise
    if child.returncode != 0:
        raise RuntimeError(f"step {kind} failed with exit status {child.returncode}")
    others = [b for pid, (_, b) in anon.by_pid.items() if pid != child.pid]
    return dict(json.loads(stdout.strip().splitlines()[-1])) | {
        "process_s": time.perf_counter() - t0, "anon_peak_mib": anon.peak(child.pid) / MIB,
        "anon_peak_mib_largest_descendant": max(others, default=0) / MIB}


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="30k nodes, k=4, multilevel on 2 task processes only")
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--avg-degree", type=float, default=20)
    ap.add_argument("--features", type=int, default=100)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--methods", default="multilevel,stream")
    ap.add_argument("--workers", default="1,2", help="task processes per run (Ray num_cpus)")
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed at the end)")
    ap.add_argument("--train-frac", type=float, default=0.1, help="share of training nodes of the graph")
    ap.add_argument("--beyond-metis", action="store_true",
                    help="no METIS row, a streamed check and a one-epoch training run (see the docstring)")
    ap.add_argument("--sample", type=int, default=2000, help="--beyond-metis: nodes checked against the chunks")
    ap.add_argument("--reuse-chunks", action="store_true",
                    help="keep chunks under --dir written before for the same graph settings")
    ap.add_argument("--chunks-only", action="store_true",
                    help="write the chunks under --dir (for a later --reuse-chunks run) and stop")
    ap.add_argument("--no-parquet", action="store_true",
                    help="no row from Parquet tables on an S3 server on 127.0.0.1 (see the docstring)")
    ap.add_argument("--timeout-min", type=float, default=None, help="limit per step (default 60; smoke 5)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(CHILDREN[args.child[0]](json.loads(args.child[1]))), flush=True)
        return 0
    base = {"nodes": 30_000 if args.smoke else args.nodes, "avg_degree": args.avg_degree,
            "features": 16 if args.smoke else args.features, "classes": 40,
            "parts": 4 if args.smoke and not args.beyond_metis else args.parts, "name": "scale",
            "smoke": args.smoke, "train_frac": args.train_frac}
    methods = ["multilevel"] if args.smoke else args.methods.split(",")
    workers = [2] if args.smoke else [int(w) for w in args.workers.split(",")]
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="pscale-"))
    timeout = 60 * (args.timeout_min or (5 if args.smoke else 60))
    base |= {"chunks": str(work / "chunks"), "root": str(work / "sets")}
    for old in ("sets", "runs", "report"):  # the chunks: _chunks_row
        shutil.rmtree(work / old, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    if args.chunks_only:
        if not args.dir:
            ap.error("--chunks-only needs --dir (the chunks are kept there)")
        print(f"chunks: {json.dumps(_chunks_row(base, timeout, reuse=args.reuse_chunks))}")
        return 0
    if args.beyond_metis:
        return _beyond_metis(base | {"method": methods[0], "workers": workers[-1], "sample": args.sample},
                             work, timeout, keep=bool(args.dir), reuse=args.reuse_chunks)
    t0 = time.perf_counter()
    try:
        rows: dict[str, dict[str, Any]] = {"chunks": _chunks_row(base, timeout, reuse=args.reuse_chunks)}
        print(f"chunks: {rows['chunks']}", flush=True)
        rows["metis"] = _spawn("metis", base, timeout)
        print(f"metis: {rows['metis']}", flush=True)
        for m in methods:
            for w in workers:
                r = _spawn("ray", base | {"method": m, "workers": w}, timeout)
                rows[f"{m} w={w}"] = r
                print(f"{m} w={w}: {r}", flush=True)
                if w != workers[-1]:  # the same settings write the same set: rebuild it
                    shutil.rmtree(r["path"])
        if not args.no_parquet:
            rows |= _parquet_rows(base | {"method": methods[0], "workers": workers[-1]},
                                  rows[f"{methods[0]} w={workers[-1]}"], work, timeout)
        sets = {"metis": rows["metis"]["path"]} | {m: rows[f"{m} w={workers[-1]}"]["path"] for m in methods}
        checked = _spawn("check", base | {"sets": sets}, timeout)
        checks = {name: checked[name] for name in sets}  # one entry per set, without _spawn's timings
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return _summarise(base, rows, checks, methods, workers, time.perf_counter() - t0, args.smoke)


def _parquet_rows(a: dict[str, Any], npy: dict[str, Any], work: Path, timeout: float) -> dict[str, dict[str, Any]]:
    """The chunks as Parquet tables on an S3 server on 127.0.0.1 (``tables``), and the
    pipeline run from them (``parquet-s3 <method> w=<n>``), its set beside the one the same
    run from the local chunks wrote (``npy``), their files compared."""
    from bench.harness.s3 import new_bucket, s3_server

    key = f"parquet-s3 {a['method']} w={a['workers']}"
    with s3_server() as endpoint:
        uri, options = new_bucket(endpoint, "graph")
        a = a | {"tables_uri": f"{uri}/tables", "storage_options": options}
        tables = _spawn("tables", a, timeout)
        print(f"tables: {json.dumps(tables)}", flush=True)
        row = _spawn("ray", a | {"tables": tables_dataset(a), "root": str(work / "sets-parquet")}, timeout)
    files = [json.loads((Path(p) / "meta.json").read_text())["files"] for p in (row["path"], npy["path"])]
    row["same_set"] = Path(row["path"]).name == Path(npy["path"]).name and files[0] == files[1]
    row["coordinator_vs_npy"] = row["coordinator_peak_mib"] / npy["coordinator_peak_mib"]
    print(f"{key}: {json.dumps(row)}", flush=True)
    shutil.rmtree(row["path"])
    return {"tables": tables, key: row}


def _beyond_metis(a: dict[str, Any], work: Path, timeout: float, *, keep: bool, reuse: bool) -> int:
    """Chunks, one pipeline run, the streamed check and a training run (``--beyond-metis``)."""
    t0 = time.perf_counter()
    rows: dict[str, dict[str, Any]] = {}
    try:
        rows["chunks"] = _chunks_row(a, timeout, reuse=reuse)
        print(f"chunks: {json.dumps(rows['chunks'])}", flush=True)
        print(f"  {rows['chunks']['edges']:,} stored edges (2^31 - 1 = {2**31 - 1:,}: "
              f"{'above' if rows['chunks']['edges'] > 2**31 - 1 else 'NOT above'})", flush=True)
        for step, kind in ((f"{a['method']} w={a['workers']}", "ray"), ("check", "stream_check"),
                           ("train", "train")):
            with _disk_peak(work) as disk:
                rows[step] = _spawn(kind, a, timeout)
            rows[step] |= disk
            print(f"{step}: {json.dumps(rows[step], default=str)}", flush=True)
            if kind == "ray":
                a = a | {"set": rows[step]["path"]}
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    c = rows["check"]
    failures = [what for what, bad in (("round trip", not c["round_trip"]),
                                       ("a node not owned exactly once", not c["assigned_once"]),
                                       ("meta.json's cut figures differ from the parts'", not c["meta_cuts_hold"]),
                                       ("balance", max(c["imbalance"].values()) > 1.05 + 1e-9),
                                       ("training", not rows["train"].get("final"))) if bad]
    print(f"edge cut {c['edge_cut']:.3f}, imbalance {c['imbalance']}; total {time.perf_counter() - t0:.0f} s")
    held = (f"round trip of {c['sampled_nodes']} sampled nodes, every node once, the meta's cut figures "
            "equal the parts', balance <= 1.05, training ran")
    print(f"correctness (gated): {held if not failures else 'FAILED: ' + '; '.join(failures)}")
    tag = "partition_scale-beyond-smoke" if a["smoke"] else "partition_scale-beyond"
    write_json({"graph": a, "rows": rows, "total_s": time.perf_counter() - t0}, out_path(tag))
    return 1 if failures else 0


def _summarise(base: dict[str, Any], rows: dict[str, dict[str, Any]], checks: dict[str, dict[str, Any]],
               methods: list[str], workers: list[int], total: float, smoke: bool) -> int:
    metis = rows["metis"]
    mc = checks["metis"]
    metis_peak = max(metis["peak_mib"], metis.get("metis_child_peak_mib", 0.0))  # its largest process
    print(f"\ngraph: {base['nodes']:,} nodes, {rows['chunks']['edges']:,} edges, {base['features']} features, "
          f"k={base['parts']}; chunks written in {rows['chunks']['seconds']:.1f} s, peak "
          f"{rows['chunks']['peak_mib']:.0f} MiB ({rows['chunks']['edge_chunks']} edge / "
          f"{rows['chunks']['node_chunks']} node chunks)")
    print(f"{'row':<16} {'seconds':>8} {'peak MiB':>9} {'coord MiB':>9} {'worker MiB':>10} {'mem/metis':>9} "
          f"{'edge cut':>8} {'cut/metis':>9} {'train imb':>9} {'edge imb':>8} {'node imb':>8}")
    print(f"{'metis (whole)':<16} {metis['seconds']:>8.1f} {metis_peak:>9.0f} {'':>9} {'':>10} {1.0:>9.2f} "
          f"{mc['edge_cut']:>8.3f} {1.0:>9.2f} {mc['imbalance']['train']:>9.3f} {mc['imbalance']['edges']:>8.3f} "
          f"{mc['imbalance']['nodes']:>8.3f}")
    if "metis_child_peak_mib" in metis:
        print(f"  metis (whole): the process holding the graph peaks at {metis['peak_mib']:.0f} MiB and "
              f"METIS's own process, beside it, at {metis['metis_child_peak_mib']:.0f} MiB (the path's "
              f"two processes together: up to {metis['peak_mib'] + metis['metis_child_peak_mib']:.0f} MiB); "
              "mem/metis divides by the larger process")
    failures = [f"{n}: {what}" for n, c in checks.items() for what, bad in
                (("round trip", not c["round_trip"]), ("a node not owned exactly once", not c["assigned_once"]),
                 ("balance", max(c["imbalance"].values()) > 1.05 + 1e-9)) if bad]
    for key, r in rows.items():
        if key.startswith("parquet-s3 "):
            npy = rows[key.removeprefix("parquet-s3 ")]
            print(f"{key:<16} {r['seconds']:>8.1f} {r['peak_mib']:>9.0f} {r['coordinator_peak_mib']:>9.0f} "
                  f"{r['worker_peak_mib']:>10.0f}   from Parquet on S3 ({rows['tables']['bytes'] / 2**20:.0f} MiB "
                  f"of tables), {r['open_s']:.1f} s opening them (checks, scan, hash)")
            print(f"  coordinator peak from Parquet on S3 / from local chunks: {r['coordinator_vs_npy']:.2f} "
                  f"({r['coordinator_peak_mib']:.0f} vs {npy['coordinator_peak_mib']:.0f} MiB; target <= 1.0: "
                  f"{'met' if r['coordinator_vs_npy'] <= 1.0 else 'NOT met'}); time {r['seconds'] / npy['seconds']:.2f}x")
            if not r["same_set"]:
                failures.append(f"{key}: its set differs from the one built from the local chunks")
    result: dict[str, Any] = {"graph": base, "rows": rows, "checks": checks, "total_s": total}
    for m in methods:
        c = checks[m]
        for w in workers:
            r = rows[f"{m} w={w}"]
            print(f"{m + ' w=' + str(w):<16} {r['seconds']:>8.1f} {r['peak_mib']:>9.0f} "
                  f"{r['coordinator_peak_mib']:>9.0f} {r['worker_peak_mib']:>10.0f} "
                  f"{r['peak_mib'] / metis_peak:>9.2f} {c['edge_cut']:>8.3f} "
                  f"{c['edge_cut'] / mc['edge_cut']:>9.2f} {c['imbalance']['train']:>9.3f} "
                  f"{c['imbalance']['edges']:>8.3f} {c['imbalance']['nodes']:>8.3f}")
        last = rows[f"{m} w={workers[-1]}"]
        print(f"  {m} steps (coordinator wall s, w={workers[-1]}): {last['steps']}")
        print(f"  {m} coordinator peak MiB per step: {last['coordinator_step_peak_mib']}")
        print(f"  {m} task peak MiB per kind of task: {last['task_peak_mib']}")
        print(f"  {m} anonymous peak MiB (w={workers[-1]}, without mapped file pages): coordinator "
              f"{last['anon_peak_mib']:.0f}, largest other process {last['anon_peak_mib_largest_descendant']:.0f}")
    for m in methods:
        first, last = rows[f"{m} w={workers[0]}"], rows[f"{m} w={workers[-1]}"]
        if len(workers) > 1:
            print(f"  {m}: {workers[0]} -> {workers[-1]} task processes: "
                  f"{first['seconds']:.1f} s -> {last['seconds']:.1f} s "
                  f"({first['seconds'] / last['seconds']:.2f}x)")
    if "multilevel" in methods:
        ml = rows[f"multilevel w={workers[-1]}"]
        cut = checks["multilevel"]["edge_cut"] / mc["edge_cut"]
        mem = ml["peak_mib"] / metis_peak
        print(f"targets (reported): multilevel cut / METIS {cut:.2f} (<= 1.15: {'met' if cut <= 1.15 else 'NOT met'}); "
              f"largest process / METIS path {mem:.2f} (<= 0.5: {'met' if mem <= 0.5 else 'NOT met'})")
    held = "all sets round-trip, every node once, balance <= 1.05" + (
        ", the set from Parquet on S3 equals the one from the chunks, file for file"
        if any(k.startswith("parquet-s3 ") for k in rows) else "")
    print(f"correctness (gated): {held if not failures else 'FAILED: ' + '; '.join(failures)}")
    print(f"total {total:.0f} s")
    write_json(result, out_path("partition_scale", smoke=smoke))
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())

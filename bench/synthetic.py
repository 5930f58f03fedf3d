"""Synthetic generator and CSV loader: time, peak memory, and whether the graph matters.

    python -m bench.synthetic                      # 1M nodes, ~20M edges, 100 features
    python -m bench.synthetic --nodes 10000000 --no-baseline
    python -m bench.synthetic --smoke              # seconds; what CI runs

Three tables, each with a baseline measured in the same run:

1. generation: ``gnntrain.data.synthetic.generate`` (two passes over blocks of
   nodes, CSR filled in place) against ``generate_one_shot`` (every edge in memory,
   then ``csr_from_edges``), each in a fresh subprocess so that its peak RSS
   (``ru_maxrss``) is its own; a third subprocess that only imports gives the floor.
   Both must produce the same content hash.
2. accuracy: on a ~20k-node instance with the default settings, a 2-layer MLP on the
   features against a 3-layer full-batch PyG ``SAGEConv`` model (test accuracy at the
   best validation epoch). The tuned defaults aim at ~0.35 vs ~0.85.
3. CSV parsing: ``gnntrain.data.textio.read_table`` against ``np.loadtxt`` (numpy 2's
   C parser) on the same files: a 1M-row integer edge list and a 100k x 100 float
   feature table; then a 10M-row edge list parsed, and loaded whole with
   ``load_dataset`` (parse + symmetrise + dedup + CSR + split).

JSON goes to ``bench/out/synthetic[-smoke].json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.cli import bench_parser
from bench.harness.paths import out_path
from bench.harness.verdict import check, finish


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _worker(method: str, nodes: int) -> dict[str, Any]:
    """Runs in a subprocess: one generation (or just the imports), its time and peak RSS."""
    from gnntrain.config import SyntheticConfig
    from gnntrain.data.synthetic import generate, generate_one_shot

    cfg = SyntheticConfig(nodes=nodes)
    if method == "imports":
        return {"method": method, "seconds": 0.0, "peak_rss_mb": _maxrss_mb()}
    fn = generate if method == "ours" else generate_one_shot
    fn(SyntheticConfig(nodes=20_000))  # numba compile / cache load, not timed
    t0 = time.perf_counter()
    g = fn(cfg)
    seconds = time.perf_counter() - t0
    return {"method": method, "nodes": g.num_nodes, "edges": g.num_edges,
            "features": g.num_features, "seconds": seconds, "peak_rss_mb": _maxrss_mb(),
            "hash": g.content_hash(),
            "output_mb": (g.indptr.nbytes + g.indices.nbytes + g.x.nbytes + g.y.nbytes) / 2**20}


def _run_worker(method: str, nodes: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.synthetic", "--worker", method, "--nodes", str(nodes)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"method": method, "error": (out.stderr or out.stdout).strip()[-500:]}
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def generation(nodes: int, baseline: bool) -> list[dict[str, Any]]:
    rows = [_run_worker("imports", nodes), _run_worker("ours", nodes)]
    if baseline:
        rows.append(_run_worker("one-shot", nodes))
    return rows


def accuracy(nodes: int, epochs: int, hidden: int) -> dict[str, Any]:
    """Test accuracy (at best validation) of a feature-only MLP and a 3-layer SAGE."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import SAGEConv

    from gnntrain.config import SyntheticConfig
    from gnntrain.data import GraphSummary
    from gnntrain.data.synthetic import generate

    warnings.filterwarnings("ignore", message=".*[Ss]parse.*")
    g = generate(SyntheticConfig(nodes=nodes))
    summary = GraphSummary.of(g)
    x, y = torch.from_numpy(g.x), torch.from_numpy(g.y)
    n = g.num_nodes
    adj = torch.sparse_csr_tensor(torch.from_numpy(g.indptr), torch.from_numpy(g.indices),
                                  torch.ones(g.num_edges), size=(n, n))
    tr, va, te = (torch.from_numpy(g.split_idx(s)) for s in ("train", "val", "test"))

    class Sage(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            dims = [g.num_features, hidden, hidden, g.num_classes]
            self.convs = torch.nn.ModuleList(SAGEConv(a, b) for a, b in zip(dims, dims[1:], strict=False))

        def forward(self, h: torch.Tensor) -> torch.Tensor:
            for i, conv in enumerate(self.convs):
                h = conv(h, adj)
                if i < len(self.convs) - 1:
                    h = F.dropout(F.relu(h), 0.5, self.training)
            return h

    def fit(model: torch.nn.Module, forward: Any, steps: int) -> tuple[float, float]:
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        best_val, best_test = -1.0, 0.0
        for step in range(steps):
            model.train()
            opt.zero_grad()
            F.cross_entropy(forward()[tr], y[tr]).backward()
            opt.step()
            if step % 10 == 9 or step == steps - 1:
                model.eval()
                with torch.no_grad():
                    pred = forward().argmax(1)
                val = float((pred[va] == y[va]).float().mean())
                if val > best_val:
                    best_val, best_test = val, float((pred[te] == y[te]).float().mean())
        return best_val, best_test

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(g.num_features, hidden), torch.nn.ReLU(),
                              torch.nn.Dropout(0.5), torch.nn.Linear(hidden, g.num_classes))
    t0 = time.perf_counter()
    _, mlp_test = fit(mlp, lambda: mlp(x), 2 * epochs)
    t_mlp = time.perf_counter() - t0
    torch.manual_seed(0)
    sage = Sage()
    t0 = time.perf_counter()
    _, sage_test = fit(sage, lambda: sage(x), epochs)
    return {"nodes": n, "edges": g.num_edges, "edge_homophily": summary.edge_homophily,
            "mean_degree": summary.mean_degree, "max_degree": summary.max_degree,
            "mlp_test": mlp_test, "sage_test": sage_test, "mlp_epochs": 2 * epochs,
            "sage_epochs": epochs, "hidden": hidden, "mlp_seconds": t_mlp,
            "sage_seconds": time.perf_counter() - t0}


def _timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def csv_loading(rows: int, baseline_rows: int, nodes: int) -> list[dict[str, Any]]:
    """read_table vs np.loadtxt on the same edge and feature files; a full CSV load."""
    from gnntrain.config import CsvDataset, SyntheticConfig
    from gnntrain.data import load_dataset
    from gnntrain.data.synthetic import generate
    from gnntrain.data.textio import read_table

    g = generate(SyntheticConfig(nodes=nodes, features=100))
    src, dst = g.edge_index()
    keep = src < dst  # each undirected edge once, as edge lists store them
    edges = np.stack([src[keep], dst[keep]], axis=1)
    edges = np.tile(edges, (-(-rows // edges.shape[0]), 1))[:rows]
    feats = g.x[: max(baseline_rows // 10, 1)]
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        small, big, xf = Path(tmp) / "small.csv", Path(tmp) / "big.csv", Path(tmp) / "x.csv"
        np.savetxt(small, edges[:baseline_rows], fmt="%d", delimiter=",")
        np.savetxt(xf, feats, fmt="%.7g", delimiter=",")
        read_table(small, kind="int")  # numba compile / cache load, not timed
        read_table(xf, kind="float")
        for case, path, kind, dtype, n_rows in (
                (f"int edges, {baseline_rows:,} x 2", small, "int", np.int64, baseline_rows),
                (f"float features, {feats.shape[0]:,} x {feats.shape[1]}", xf, "float",
                 np.float32, feats.shape[0])):
            ref, t_ref = _timed(lambda p=path, d=dtype: np.loadtxt(p, dtype=d, delimiter=","))
            ours, t_ours = _timed(lambda p=path, k=kind: read_table(p, kind=k).values)
            assert np.array_equal(ours, ref.reshape(ours.shape))
            out.append({"case": case, "method": "np.loadtxt", "seconds": t_ref,
                        "rows_per_s": n_rows / t_ref, "baseline": True})
            out.append({"case": case, "method": "read_table", "seconds": t_ours,
                        "rows_per_s": n_rows / t_ours, "vs_baseline": t_ref / t_ours})
        np.savetxt(big, edges, fmt="%d", delimiter=",")
        size_mb = big.stat().st_size / 2**20
        _, t_parse = _timed(lambda: read_table(big, kind="int"))
        loaded, t_load = _timed(lambda: load_dataset(
            CsvDataset(name="csv", edges=str(big))))
        out.append({"case": f"int edges, {rows:,} x 2 ({size_mb:.0f} MB)",
                    "method": "read_table", "seconds": t_parse, "rows_per_s": rows / t_parse})
        out.append({"case": f"load_dataset, {rows:,} edge rows", "method": "parse+CSR+split",
                    "seconds": t_load, "rows_per_s": rows / t_load,
                    "csr_edges": loaded.num_edges})
    return out


def _ratio(row: dict[str, Any], base: dict[str, Any] | None, key: str) -> str:
    if base is None or row["method"] == "imports":
        return ""
    return f"{row[key] / base[key]:.2f}x"


def _print(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console(width=130)
    gen = result["generation"]
    base = next((r for r in gen if r["method"] == "one-shot" and "error" not in r), None)
    t = Table(title="generation (subprocess each; peak RSS = ru_maxrss; ratio vs one-shot "
                    "baseline measured in this run)")
    for col in ("method", "nodes", "edges", "seconds", "peak RSS MB", "output MB",
                "time vs one-shot", "RSS vs one-shot", "hash"):
        t.add_column(col)
    for r in gen:
        if "error" in r:
            t.add_row(r["method"], "error: " + r["error"][-80:], *[""] * 7)
            continue
        t.add_row(r["method"], f"{r.get('nodes', 0):,}", f"{r.get('edges', 0):,}",
                  f"{r['seconds']:.2f}", f"{r['peak_rss_mb']:.0f}",
                  f"{r.get('output_mb', 0):.0f}", _ratio(r, base, "seconds"),
                  _ratio(r, base, "peak_rss_mb"), r.get("hash", ""))
    con.print(t)
    if "accuracy" in result:
        a = result["accuracy"]
        t = Table(title=f"does the graph matter? {a['nodes']:,} nodes, {a['edges']:,} edges, "
                        f"edge homophily {a['edge_homophily']:.3f}, mean degree "
                        f"{a['mean_degree']:.1f}, max {a['max_degree']:,} (test acc at best val)")
        for col in ("model", "epochs", "test accuracy", "seconds", "vs MLP"):
            t.add_column(col)
        t.add_row("MLP (2 layers, x only)", str(a["mlp_epochs"]), f"{a['mlp_test']:.3f}",
                  f"{a['mlp_seconds']:.1f}", "1.00x")
        t.add_row("GraphSAGE (3 layers, full batch)", str(a["sage_epochs"]),
                  f"{a['sage_test']:.3f}", f"{a['sage_seconds']:.1f}",
                  f"{a['sage_test'] / max(a['mlp_test'], 1e-9):.2f}x")
        con.print(t)
    if "csv" in result:
        t = Table(title="edge-list / feature CSV parsing (ratio: np.loadtxt time / ours, "
                        "same file, this run)")
        for col in ("case", "method", "seconds", "rows/s", "speed-up"):
            t.add_column(col)
        for r in result["csv"]:
            up = f"{r['vs_baseline']:.1f}x" if "vs_baseline" in r else (
                "1.0x" if r.get("baseline") else "")
            t.add_row(r["case"], r["method"], f"{r['seconds']:.2f}", f"{r['rows_per_s']:,.0f}", up)
        con.print(t)


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="tiny sizes, seconds")
    ap.add_argument("--nodes", type=int, default=None, help="generation size (default 1M)")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the one-shot baseline (needs ~10x the memory at 10M nodes)")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-csv", action="store_true")
    ap.add_argument("--csv-rows", type=int, default=None, help="edge rows (default 10M)")
    ap.add_argument("--worker", choices=["imports", "ours", "one-shot"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    nodes = args.nodes or (20_000 if args.smoke else 1_000_000)
    if args.worker:
        print(json.dumps(_worker(args.worker, nodes)))
        return 0
    result: dict[str, Any] = {"argv": sys.argv[1:], "smoke": args.smoke}
    result["generation"] = generation(nodes, baseline=not args.no_baseline)
    ok = [r for r in result["generation"] if "hash" in r]
    result["same_graph"] = len({r["hash"] for r in ok}) <= 1
    if not args.skip_accuracy:
        result["accuracy"] = (accuracy(2_000, 20, 32) if args.smoke
                              else accuracy(20_000, 150, 128))
    if not args.skip_csv:
        rows = args.csv_rows or (100_000 if args.smoke else 10_000_000)
        result["csv"] = csv_loading(rows, min(rows, 20_000 if args.smoke else 1_000_000),
                                    nodes=20_000 if args.smoke else 1_000_000)
    _print(result)
    gen = result["generation"]
    return finish("synthetic", [
        check("the chunked and one-shot generators build the same graph", result["same_graph"],
              f"content hashes {sorted({r['hash'] for r in ok})}"),
        *[check(f"generation {r['method']} ran", "error" not in r, r.get("error", "")) for r in gen],
    ], result, out_path("synthetic", smoke=True) if args.smoke else out_path(f"synthetic-{nodes}"))


if __name__ == "__main__":
    sys.exit(main())

"""GPU check (run it when a GPU machine is at hand): training on the GPU, host sampling
against device sampling, fp32 against bf16, one process against Ray workers sharing it.

    python -m bench.gpu                                  # synthetic-small, all modes (CUDA)
    python -m bench.gpu --graph products --modes single,1,4 --precision fp32
    python -m bench.gpu --smoke                          # a 3k-node graph on the CPU (seconds)

The workload is ``bench.epoch``'s (GraphSAGE 3x256, fanouts [15, 10, 5], batch 1024 per
worker, Adam) on a synthetic graph from ``--graph``:

* ``small``: synthetic-small, 100k nodes, 2M directed edges, 100 features, 40 classes, 60%
  training nodes;
* ``products``: ogbn-products' shape, 2,449,029 nodes, 100 features, 47 classes, 8% training
  and 1.6% validation nodes, mean in-degree 50.5 as in ogbn-products (its 61.9M undirected
  edges both ways, 123.7M; the generator's graph holds 122.5M once duplicates are merged).

For each graph, ``--precision`` (``train.precision``) and ``--sampler``
(``sampler.backend``: ``numba`` samples on the host; ``torch`` runs the hop loop, the
own rows' feature gather and the cache's hits on the training device, a single process
entirely there, each worker's batches made ahead on a CUDA stream of its own) it
trains each of ``--modes``: the single process, and k Ray workers sharing the device
(``train.device``, ``cuda`` unless ``--device``), and prints one JSON row per run: epoch time
(mean after the first), the time split (sample / fetch / compute / sync / wait), the peak
device memory in use by every process above what was in use before the run, and test
accuracy after ``--epochs``; then the device draw's epoch against the host draw's and bf16's
against fp32's, per mode.

Correctness checks (the exit status, ``bench.harness.verdict``): on the CPU, where float
sums are reproducible, the torch draw trains bit for bit as the numba draw (the same
batches) and 1 worker as the single process (per-epoch losses equal); on CUDA both
differences are printed (scatter sums there are not reproducible). There is no PyG row:
PyG's ``NeighborLoader`` needs pyg-lib or torch-sparse, which the GPU machine lacks, and
the output says whether they import. Without a CUDA device, ``--device cuda`` exits with status 2 and a message.
Record the figures in docs/benchmarks/gpu.md. JSON: bench/out/gpu[-smoke].json.
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from bench.epoch import SMOKE, WORKLOAD
from bench.harness.cli import bench_parser, csv_list
from bench.harness.memory import DeviceMeter
from bench.harness.paths import bench_config, out_path
from bench.harness.runs import quiet, read_metrics, steady_means
from bench.harness.verdict import Check, check, finish

#: ``dataset.synthetic`` overrides per ``--graph``
GRAPHS: dict[str, list[str]] = {
    "small": [],  # synthetic-small.yaml as it is
    "products": ["dataset.synthetic.nodes=2449029", "dataset.synthetic.avg_degree=50.5",
                 "dataset.synthetic.features=100", "dataset.synthetic.classes=47",
                 "dataset.synthetic.train_frac=0.08", "dataset.synthetic.val_frac=0.016"],
}


def pyg_loader_missing() -> str | None:
    """Why PyG's ``NeighborLoader`` cannot sample here (None when it can)."""
    import torch_geometric.typing as pyg_typing

    if pyg_typing.WITH_PYG_LIB or pyg_typing.WITH_TORCH_SPARSE:
        return None
    return ("PyG's NeighborLoader needs pyg-lib or torch-sparse, and neither imports here "
            "(neither has a wheel on PyPI for this torch)")


def run_mode(cfg: Any, graph: Any, *, mode: str, device: str) -> dict[str, Any]:
    """Train ``cfg`` once (``mode``: ``single`` or ``k=<workers>``); its row."""
    import torch

    from gnntrain.runtime.coordinator import run_training

    meter = DeviceMeter() if device == "cuda" else None
    t0 = time.perf_counter()
    with meter.polling(0.05) if meter is not None else nullcontext():
        s = run_training(cfg, graph=graph, single_process=mode == "single", progress=False, console=quiet())
    epochs = read_metrics(s)
    epoch_s, split = steady_means(epochs)
    return {"mode": mode, "epoch_s": epoch_s, "first_epoch_s": epochs[0]["epoch_s"],
            "time_split_s": split, "compute_share": split["compute_s"] / epoch_s if epoch_s else None,
            "device_peak_bytes": meter.peak if meter is not None else None,
            "losses": [e["loss"] for e in epochs], "test_acc": s["final"]["test_acc"],
            "wall_s": time.perf_counter() - t0,
            "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu"}


def compare(rows: list[dict[str, Any]], *, exact: bool) -> list[Check]:
    """The ratio lines (torch draw / numba draw, bf16 / fp32, per mode) and the equality of
    per-epoch losses (the torch draw against the numba draw, 1 worker against the single
    process): checks when ``exact`` (on the CPU), printed otherwise."""
    by = {(r["graph"], r["mode"], r["precision"], r["sampler"]): r for r in rows}
    checks = []

    def same_losses(name: str, a: dict[str, Any], b: dict[str, Any]) -> None:
        same, detail = a["losses"] == b["losses"], f"losses {a['losses']} vs {b['losses']}"
        if exact:
            checks.append(check(name, same, detail))
        else:
            print(f"{name}: {'yes' if same else 'no'} ({detail})")

    for (graph, mode, precision, sampler), r in by.items():
        for what, ref_key in ((f"{precision} / fp32", (graph, mode, "fp32", sampler)),
                              (f"{sampler} draw / numba draw", (graph, mode, precision, "numba"))):
            ref = by.get(ref_key)
            if ref is None or ref is r:
                continue
            print(f"{graph} {mode} {precision} {sampler}: {what}: epoch {r['epoch_s'] / ref['epoch_s']:.2f}x, "
                  f"test accuracy {100 * (r['test_acc'] - ref['test_acc']):+.2f} points", flush=True)
            if ref["sampler"] != sampler:
                same_losses(f"{graph} {mode} {precision}: the {sampler} draw trains as the numba draw", r, ref)
        single = by.get((graph, "single", precision, sampler))
        if mode == "k=1" and single is not None:
            same_losses(f"{graph} {precision} {sampler}: 1 worker trains as the single process", r, single)
    return checks


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="a 3k-node graph on the CPU: single process and 1 worker, both draws (seconds)")
    ap.add_argument("--graph", default="small", help=f"comma-separated: {', '.join(GRAPHS)}")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="train.device")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--modes", default="single,1,2,4",
                    help="comma-separated: single (the single-process trainer) or a Ray worker count")
    ap.add_argument("--precision", default="fp32,bf16", help="comma-separated train.precision values")
    ap.add_argument("--sampler", default="numba,torch", help="comma-separated sampler.backend values")
    ap.add_argument("--out", type=Path, default=None, help="where the JSON goes (default bench/out/gpu[-smoke].json)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.graph, args.device, args.epochs, args.modes, args.precision = "small", "cpu", 2, "single,1", "fp32"
    graphs, modes = csv_list(args.graph), csv_list(args.modes)
    unknown = [g for g in graphs if g not in GRAPHS]
    if unknown:
        ap.error(f"--graph: unknown graph(s) {unknown}; known: {', '.join(GRAPHS)}")
    bad = [m for m in modes if m != "single" and not (m.isdigit() and int(m) > 0)]
    if bad:
        ap.error(f"--modes: {bad} are neither 'single' nor a worker count")
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench.gpu: no CUDA device here; run it on a GPU machine (or --device cpu)", file=sys.stderr)
        return 2
    from gnntrain.data import load_dataset

    rows: list[dict[str, Any]] = []
    for name in graphs:
        base = bench_config("synthetic-small.yaml", [
            *WORKLOAD, *GRAPHS[name], *(SMOKE if args.smoke else []), f"train.device={args.device}",
            f"train.epochs={args.epochs}", f"train.eval_every={args.epochs}"], "gpu")
        t0 = time.perf_counter()
        graph = load_dataset(base.dataset)
        print(f"{name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, built in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        for precision, sampler in itertools.product(csv_list(args.precision), csv_list(args.sampler)):
            for m in modes:
                mode, k = ("single", 1) if m == "single" else (f"k={m}", int(m))
                cfg = base.with_overrides([f"cluster.workers={k}", f"partition.parts={k}",
                                           f"train.precision={precision}", f"sampler.backend={sampler}"])
                row = {"graph": name, "precision": precision, "sampler": sampler,
                       **run_mode(cfg, graph, mode=mode, device=args.device)}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "losses"}), flush=True)
    checks = compare(rows, exact=args.device == "cpu")
    pyg = pyg_loader_missing() or "importable here, but bench.gpu has no PyG loop"
    print(f"PyG NeighborLoader: {pyg}")
    return finish("gpu", checks, {"rows": rows, "pyg_loader": pyg},
                  args.out or out_path("gpu", smoke=args.smoke))


if __name__ == "__main__":
    sys.exit(main())

"""GPU check (run it when a session is lent a GPU machine): the CUDA path end to end.

``python -m bench.gpu [--nodes N] [--epochs E]`` trains GraphSAGE on a synthetic graph with
``train.device=cuda`` for 1, 2 and 4 Ray workers sharing the one GPU (NCCL all-reduce,
pinned-memory copies) plus the single-process trainer, in each ``--precision``
(``train.precision``: fp32, and bf16 autocast) and each ``--sampler`` (``sampler.backend``:
numba on the host, torch on the GPU), and prints epoch time, time split and test accuracy
of each, then bf16's epoch time and accuracy against fp32's and the GPU draw's against the
host's for each mode. It exits with status 2 and a message when no CUDA device is present.
Record its table in docs/benchmarks/gpu.md.
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

from bench.harness.cli import bench_parser


def main(argv: list[str] | None = None) -> int:
    import torch

    ap = bench_parser(__doc__, prog="python -m bench.gpu", out=Path("bench/out/gpu.json"))
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--precision", default="fp32,bf16", help="comma-separated train.precision values")
    ap.add_argument("--sampler", default="numba,torch", help="comma-separated sampler.backend values")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench.gpu: no CUDA device here; run it on a GPU machine", file=sys.stderr)
        return 2
    from gnntrain.config import load_config
    from gnntrain.data import load_dataset
    from gnntrain.runtime.coordinator import run_training

    tmp = Path(tempfile.mkdtemp(prefix="gpu-"))
    raw = {
        "dataset": {"name": "gpu", "source": "synthetic", "synthetic": {"nodes": args.nodes}},
        "partition": {"root": str(tmp / "parts")},
        "sampler": {"fanouts": [15, 10, 5], "batch_size": 1024},
        "model": {"arch": "sage", "hidden": 256, "layers": 3, "dropout": 0.5},
        "train": {"epochs": args.epochs, "device": "cuda", "eval_every": args.epochs,
                  "run_root": str(tmp / "runs")},
    }
    base = load_config(raw=raw)
    graph = load_dataset(base.dataset)
    quiet = Console(file=open("/dev/null", "w"))  # noqa: SIM115
    rows = []
    for precision, backend in itertools.product(args.precision.split(","), args.sampler.split(",")):
        for mode in ["single"] + [f"k={k}" for k in args.workers.split(",")]:
            k = 1 if mode == "single" else int(mode[2:])
            cfg = base.with_overrides([f"cluster.workers={k}", f"partition.parts={k}",
                                       f"train.precision={precision}", f"sampler.backend={backend}"])
            t0 = time.perf_counter()
            s = run_training(cfg, graph=graph, single_process=mode == "single", progress=False, console=quiet)
            epochs = [json.loads(ln) for ln in (Path(s["run_dir"]) / "metrics.jsonl").read_text().splitlines()]
            steady = [e["epoch_s"] for e in epochs[1:]] or [epochs[0]["epoch_s"]]
            rows.append({"mode": mode, "precision": precision, "sampler": backend,
                         "epoch_s": sum(steady) / len(steady), "time_split_s": s.get("time_split_mean_s"),
                         "first_epoch_s": epochs[0]["epoch_s"], "loss": epochs[-1]["loss"],
                         "test_acc": s["final"]["test_acc"], "wall_s": time.perf_counter() - t0,
                         "device": torch.cuda.get_device_name(0)})
            print(json.dumps(rows[-1]), flush=True)
    by = {(r["mode"], r["precision"], r["sampler"]): r for r in rows}
    for (mode, precision, backend), r in by.items():
        for what, ref_key in ((f"{precision}/fp32", (mode, "fp32", backend)),
                              (f"{backend}/numba sampling", (mode, precision, "numba"))):
            if ref_key != (mode, precision, backend) and ref_key in by:
                ref = by[ref_key]
                print(f"{mode} {precision} {backend}: {what}: epoch {r['epoch_s'] / ref['epoch_s']:.2f}x, "
                      f"test accuracy {100 * (r['test_acc'] - ref['test_acc']):+.2f} points", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

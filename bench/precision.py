"""``train.precision``: bf16 against fp32, measured in the same run.

    python -m bench.precision             # step time on the epoch workload + accuracy on Cora
    python -m bench.precision --smoke     # a 3k-node graph (seconds)

* ``steps``: the training step alone (forward, backward, Adam; :func:`gnntrain.engine.train_step`)
  on the same sampled batches of ``bench.epoch``'s workload (synthetic-small, fanouts
  [15, 10, 5], batch 1024, 3-layer GraphSAGE hidden 256), 1 torch thread, fp32 then bf16,
  repeated; the ratio bf16 / fp32 is of the medians.
* ``accuracy``: single-process training runs, fp32 and bf16 with the same seed, on Cora
  (its shipped config) and on synthetic-small at reduced epochs: final test accuracy of
  each and the difference.

The 1-minute load average is printed with every figure. JSON: bench/out/precision.json.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from bench.epoch import SMOKE, WORKLOAD
from bench.harness.cli import bench_parser
from bench.harness.paths import bench_config, out_path, write_json
from bench.harness.runs import quiet, read_metrics
from bench.harness.system import loadavg
from gnntrain.data import load_dataset
from gnntrain.engine import EpochStats, Prepared, make_optimizer, train_step
from gnntrain.models import build_model
from gnntrain.precision import resolve_precision
from gnntrain.tasks import NodeClassification
from samplers import CSRSource, NeighborSampler, prepare
from samplers.config import resolve_fanouts


def step_times(overrides: list[str], batches: int, repeats: int) -> dict[str, Any]:
    cfg = bench_config("synthetic-small.yaml", overrides, "precision")
    graph = load_dataset(cfg.dataset)
    sampler = NeighborSampler(CSRSource.from_graph(graph), resolve_fanouts(cfg.sampler.fanouts, graph.edge_type_names))
    rng = np.random.default_rng(0)
    items = []
    for i in range(batches):
        seeds = np.sort(rng.choice(graph.train_idx, cfg.sampler.batch_size, replace=False))
        sb = sampler.sample(seeds, key=i)
        pb = prepare(sb, graph.x[sb.input_nodes], graph.y[seeds])
        items.append(Prepared(pb, 0.0, 0.0, int(sb.input_nodes.size), sb.num_sampled_edges))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    out: dict[str, Any] = {"loadavg_before": loadavg()}
    try:
        for name in ("fp32", "bf16"):
            prec = resolve_precision(name, torch.device("cpu"))
            model = build_model(cfg.model.arch, cfg.model, graph.num_features, graph.num_classes, 0)
            opt = make_optimizer(model, "adam", cfg.train.lr, 0.0)
            task = NodeClassification()
            times = []
            for r in range(repeats + 1):  # the first pass warms up
                t0 = time.perf_counter()
                for it in items:
                    train_step(model, opt, task, it, lambda t: t, EpochStats(0), precision=prec)
                if r:
                    times.append((time.perf_counter() - t0) / len(items))
            out[name] = float(np.median(times))
    finally:
        torch.set_num_threads(before)
    out["ratio"] = out["bf16"] / out["fp32"]
    out["loadavg_after"] = loadavg()
    return out


def accuracy(yaml_name: str, overrides: list[str]) -> dict[str, Any]:
    from gnntrain.runtime.coordinator import run_training

    res: dict[str, Any] = {"loadavg_before": loadavg()}
    for name in ("fp32", "bf16"):
        cfg = bench_config(yaml_name, [*overrides, f"train.precision={name}"], "precision")
        s = run_training(cfg, single_process=True, progress=False, console=quiet())
        eps = read_metrics(s)
        res[name] = {"test_acc": eps[-1].get("test_acc"), "loss": eps[-1]["loss"],
                     "epoch_s": float(np.mean([e["epoch_s"] for e in eps[1:] or eps]))}
    res["diff_points"] = 100 * (res["bf16"]["test_acc"] - res["fp32"]["test_acc"])
    res["loadavg_after"] = loadavg()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="a small, fast version")
    args = ap.parse_args(argv)
    wl = [*WORKLOAD, *(SMOKE if args.smoke else []), "train.eval_every=100"]
    out: dict[str, Any] = {}
    st = step_times(wl, 2 if args.smoke else 4, 1 if args.smoke else 2)
    out["steps"] = st
    print(f"training step, 1 thread: fp32 {st['fp32']:.3f} s, bf16 {st['bf16']:.3f} s, "
          f"bf16/fp32 = {st['ratio']:.2f}x (load {st['loadavg_before']}-{st['loadavg_after']})")
    runs = ([("synthetic-small.yaml", [*wl, "train.epochs=2"])] if args.smoke else
            [("cora.yaml", []), ("synthetic-small.yaml", [*WORKLOAD, "train.epochs=3", "train.eval_every=3"])])
    for yaml_name, ov in runs:
        r = accuracy(yaml_name, ov)
        out[yaml_name] = r
        print(f"{yaml_name}: test acc fp32 {100 * r['fp32']['test_acc']:.1f}%, bf16 "
              f"{100 * r['bf16']['test_acc']:.1f}% ({r['diff_points']:+.1f} points); epoch s "
              f"fp32 {r['fp32']['epoch_s']:.2f}, bf16 {r['bf16']['epoch_s']:.2f} "
              f"(load {r['loadavg_before']}-{r['loadavg_after']})")
    write_json(out, out_path("precision", smoke=args.smoke))
    ok = all(v["bf16"]["test_acc"] is not None for k, v in out.items() if k != "steps")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

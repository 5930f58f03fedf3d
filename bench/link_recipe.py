"""The shipped link-prediction configs against a full-batch PyG GAE, over seeds, on 1 and
4 workers: what a user gets from ``datasets/ca-*-link.yaml`` as shipped.

    python -m bench.link_recipe                                   # GrQc, HepPh, CondMat; 5 seeds; 1 and 4 workers
    python -m bench.link_recipe --datasets grqc --seeds 5 --workers 1
    python -m bench.link_recipe --datasets hepph --no-reference   # ours only
    python -m bench.link_recipe --datasets hepph --first-seed 5   # seeds 5-9: more seeds for a table
    python -m bench.link_recipe --datasets grqc --set task.options.exclude_targets=true   # a variant
    python -m bench.link_recipe --smoke                           # a small synthetic graph, 2 seeds, 1 process

Per dataset and seed: the reference (``bench.link.pyg_reference``: PyG ``SAGEConv`` over
the whole training graph, dot decoder, BCE with one uniform negative per positive, the
config's width, depth, dropout, learning rate, epochs, batches of positives and early
stopping, evaluated every epoch) and ours
with the config exactly as shipped (sampled training; only ``train.seed``, the worker
count and ``partition.parts`` are set). Ours is read at the best validation epoch (what
``checkpoints/best.pt`` holds and ``gnntrain.predict`` uses) and at the last epoch; the
reference likewise at its best validation epoch.

Targets (reported, not checks): the mean test Hits@K of ours at the best validation epoch
within 2 points of the reference's mean, test AUC within 0.5 points, and no collapse: no
evaluated epoch after the best validation epoch whose test Hits@K falls below half of the
test Hits@K at that epoch. Exit status 1 when a correctness check fails (every training
lowers its loss, every run reports its metrics). JSON: bench/out/link_recipe-<datasets>.json.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Any

from bench.harness.cli import bench_parser, csv_list
from bench.harness.paths import bench_config, out_path
from bench.harness.runs import quiet, read_metrics
from bench.harness.stats import gap, spread
from bench.harness.system import machine
from bench.harness.verdict import Check, check, finish
from bench.link import SMOKE, loaded_task, pyg_reference
from gnntrain.config import RunConfig

DATASETS = {"grqc": "ca-GrQc-link.yaml", "hepph": "ca-HepPh-link.yaml", "condmat": "ca-CondMat-link.yaml"}
HITS_GAP, AUC_GAP, COLLAPSE = 2.0, 0.5, 0.5
"""The targets: points of test Hits@K and of AUC, and the collapse floor (a fraction)."""


def ours(cfg: RunConfig, workers: int) -> dict[str, Any]:
    """One run of the config: test metrics at the best validation epoch and at the last,
    and the lowest test Hits@K after the best epoch as a fraction of its own."""
    from gnntrain.runtime.coordinator import run_training

    t0 = time.perf_counter()
    s = run_training(cfg, single_process=workers == 1, progress=False, console=quiet())
    eps = read_metrics(s)
    ev = [e for e in eps if "val_hits" in e]
    best = next(i for i, e in enumerate(ev) if e["epoch"] == s["best_val"]["epoch"])  # best.pt's epoch
    at = ev[best]
    after = [e["test_hits"] for e in ev[best + 1:]]
    floor = min(after) / at["test_hits"] if after and at["test_hits"] > 0 else 1.0
    return {"test_hits": at["test_hits"], "test_auc": at["test_auc"], "val_hits": at["val_hits"],
            "best_epoch": at["epoch"], "last_test_hits": ev[-1]["test_hits"], "last_test_auc": ev[-1]["test_auc"],
            "collapse_floor": floor, "test_hits_curve": [e["test_hits"] for e in ev],
            "loss_first": eps[0]["loss"], "loss_last": eps[-1]["loss"], "steps": eps[-1]["steps"],
            "seconds": time.perf_counter() - t0}


def run_dataset(name: str, yaml: str, seeds: int, workers: tuple[int, ...], reference: bool,
                smoke: bool, variant: list[str], first_seed: int | None = None) -> tuple[dict[str, Any], list[Check]]:
    from gnntrain.runtime.cluster import ray_session
    from gnntrain.runtime.worker_pool import reuse_workers

    base = [*(SMOKE if smoke else []), "cluster.workers=1", "partition.parts=1",
            *([] if first_seed is None else [f"train.seed={first_seed}"])]
    cfg0 = bench_config(yaml, base, "link_recipe")
    runs: dict[str, list[dict[str, Any]]] = {}
    checks: list[Check] = []
    k_hits = f"Hits@{loaded_task(cfg0)[0].hits_k}"

    def add(label: str, sd: int, r: dict[str, Any]) -> None:
        runs.setdefault(label, []).append({"seed": sd, **{k: v for k, v in r.items() if not k.startswith("_")}})
        checks.append(check(f"{name} seed {sd} {label}: the loss goes down", r["loss_last"] < r["loss_first"],
                            f"{r['loss_first']:.4f} -> {r['loss_last']:.4f}"))
        extra = (f", best epoch {r['best_epoch']}, last {r['last_test_hits']:.3f}, floor after best "
                 f"{r['collapse_floor']:.2f}") if "best_epoch" in r else \
            f", best epoch {r['ref_best_epoch']} of {r['epochs']}, last {r['last_test_hits']:.3f}"
        print(f"{name:<8} seed {sd} {label:<24} test {k_hits} {r['test_hits']:.3f}  AUC {r['test_auc']:.4f}"
              f"{extra} ({r['seconds']:.0f} s)", flush=True)

    if reference:
        task, g = loaded_task(cfg0)
        for i in range(seeds):
            sd = cfg0.train.seed + i
            r = pyg_reference(cfg0, task, g, sd, per_epoch=True)
            b = r["best"]
            add("pyg GAE full-batch", sd, {**r, "test_hits": b["test_hits"], "test_auc": b["test_auc"],
                                           "val_hits": b["val_hits"], "ref_best_epoch": b["epoch"],
                                           "last_test_hits": r["test_hits"]})
    for k in workers:
        session = contextlib.nullcontext() if k == 1 else ray_session(cfg0.cluster, k)
        with session, reuse_workers():  # one group of k across seeds
            for i in range(seeds):
                sd = cfg0.train.seed + i
                cfg = bench_config(yaml, [*base, f"train.seed={sd}", f"cluster.workers={k}",
                                          f"partition.parts={k}", *variant], "link_recipe")
                add(f"ours, {k} worker{'s' if k > 1 else ''}", sd, ours(cfg, k))
    summary: dict[str, Any] = {}
    ref = runs.get("pyg GAE full-batch")
    for label, rows in runs.items():
        h, a = spread([r["test_hits"] for r in rows]), spread([r["test_auc"] for r in rows])
        row: dict[str, Any] = {"hits": h.to_dict(), "auc": a.to_dict()}
        line = f"{name:<8} {label:<24} over {h.n} seeds: test {k_hits} {h.mean:.3f} (std {h.std:.3f}), AUC {a.mean:.4f}"
        if "collapse_floor" in rows[0]:
            row["collapse_floor_min"] = min(r["collapse_floor"] for r in rows)
            line += f", lowest floor after the best epoch {row['collapse_floor_min']:.2f}"
        if ref is not None and rows is not ref:
            hr, ar = spread([r["test_hits"] for r in ref]), spread([r["test_auc"] for r in ref])
            diff, se = gap(h, hr)
            row["hits_gap_points"], row["hits_gap_standard_error_points"] = 100 * diff, 100 * se
            row["auc_gap_points"] = 100 * (a.mean - ar.mean)
            met = (row["hits_gap_points"] >= -HITS_GAP and row["auc_gap_points"] >= -AUC_GAP
                   and row["collapse_floor_min"] >= COLLAPSE)
            row["targets_met"] = met
            line += (f"; gap {100 * diff:+.1f} points (standard error {100 * se:.1f}), AUC "
                     f"{row['auc_gap_points']:+.2f} points: targets {'met' if met else 'MISSED'}")
        summary[label] = row
        print(line, flush=True)
    return {"dataset": name, "config": yaml, "variant": variant, "runs": runs, "summary": summary}, checks


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="a small synthetic graph, 2 seeds, one process", seeds=5,
                      seeds_help="seeds a side (>= 2)")
    ap.add_argument("--datasets", default=",".join(DATASETS), help=f"comma-separated subset of {list(DATASETS)}")
    ap.add_argument("--workers", default="1,4", help="comma-separated worker counts of ours (1 = one process)")
    ap.add_argument("--no-reference", action="store_true", help="ours only")
    ap.add_argument("--first-seed", type=int, default=None, metavar="N",
                    help="seeds N..N+seeds-1 a side (default: the config's train.seed on)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a config override for ours (not the reference): a variant of the shipped recipe")
    args = ap.parse_args(argv)
    names = csv_list(args.datasets)
    if [n for n in names if n not in DATASETS] or args.seeds < 2:
        ap.error(f"--datasets={args.datasets!r} (allowed {','.join(DATASETS)}) and --seeds={args.seeds} (>= 2)")
    workers = (1,) if args.smoke else tuple(int(k) for k in args.workers.split(",") if k.strip())
    if args.smoke:
        names, args.seeds = names[:1], 2
    out: dict[str, Any] = {"machine": machine(), "argv": sys.argv[1:], "datasets": []}
    checks: list[Check] = []
    for name in names:
        res, c = run_dataset("smoke" if args.smoke else name, DATASETS[name], args.seeds, workers, not args.no_reference, args.smoke,
                             args.set, args.first_seed)
        out["datasets"].append(res)
        checks += c
    out["loadavg_after"] = os.getloadavg()[0]
    tag = "link_recipe-smoke" if args.smoke else "link_recipe-" + "-".join(names) + (
        f"-from-seed-{args.first_seed}" if args.first_seed is not None else "")
    return finish("link_recipe", checks, out, out_path(tag))


if __name__ == "__main__":
    sys.exit(main())

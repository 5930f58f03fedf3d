"""No-regression check: sampling, epoch and comm figures at a small fixed size against
``bench/baseline.json``.

    python -m bench.regress                   # measure once, compare (under a minute on 2 cores)
    python -m bench.regress --write-baseline  # measure 3 times, write bench/baseline.json

``python -m bench.smoke`` (``make bench-smoke``) runs it with the other modules.

Runs, in this process, the pieces of three benchmarks at a fixed small size:

* ``bench.sampling``: the 20k-node power-law graph of its ``--smoke`` (fanouts [15, 10, 5],
  batch 1024), its 19 batches best of 10 for ours on one thread, 4 batches for the numpy
  baseline. Figures: ours' seeds/s over the numpy baseline's, measured in the same run
  (``sampling.ours_over_numpy``); sampled edges per seed (``sampling.edges_per_seed``).
* ``bench.epoch``: its ``--smoke`` workload (3k nodes, 3-layer SAGE hidden 64, fanouts
  [15, 10, 5], batch 256), the single-process trainer's run (2 epochs and the
  full-neighbour evaluation, 1 torch thread, ``train.plots`` off) and 10 full-batch PyG
  steps of the same model
  (1 torch thread), each after an unmeasured run of one epoch (one step) that loads the
  code and the compiled kernels; the training step alone on 6 sampled batches (median of
  5 passes) with and without the model's two speed-ups. Figures: the CPU time of our run over that of the PyG steps,
  same run (``epoch.ours_over_pyg``); the step's speed-up, the plain step over the fast
  one, same run (``epoch.step_speedup``); the final loss and test accuracy
  (``epoch.final_loss``, ``epoch.test_acc``).
* ``bench.comm``: its ``--smoke`` bytes rows (5k nodes, k = 4; the chain from a random
  partition with no cache through METIS, a presample cache, locality order, float16 and
  int8 transfer, and int8 alone), simulated with ``gnntrain.simulate.simulate_k``. Figures: feature and sample bytes of
  every row and the cache hit rate (``comm.<row>.feature_bytes`` ...).

Every figure is either a **ratio** against a reference measured in the same run (times
depend on the machine and on what else runs on it; a ratio of two runs side by side
cancels most of that, and the times are CPU times of this process, ``time.process_time``,
which other processes on the machine do not inflate the way they inflate wall time) or
**exact** (byte counts, sampled edges, the loss and accuracy of
a seeded single-thread run: the same code gives the same number). The baseline stores,
per figure, its median over ``--runs`` runs (3, each in a fresh process, as the checked
run is) and its noise band. An exact figure may move by a relative 1e-9 (float rounding).
A ratio may move by a factor of ``1 + band`` either way, ``band`` the larger of 2.5 times
its relative range over the baseline's runs (``max / min - 1``) and a floor of 25%: the
range of 3 draws is about 1.7 standard deviations, so 2.5 ranges are about 4; the floor
because three runs on a shared 2-core machine under-estimate the spread (the load of
other processes changes from minute to minute, and CPU times of a fraction of a second
still move by 10-20% under it: measured, ``bench/baseline.json`` keeps every run). A
move beyond the band fails the check in either direction: a figure that improved beyond
its noise is a change to record with ``--write-baseline``, not noise. The exit status is 1 when a check fails
(``bench.harness.verdict``). JSON: bench/out/regress.json.

The exact figures are exact for one kind of CPU: torch's float kernels follow the vector
instructions the CPU has (AVX-512 with bfloat16, AVX-512, AVX2), and the same code gave
another seeded loss and other byte counts in the locality-ordered comm rows on an AVX2
host than on an AVX-512 one. The baseline file therefore keeps one baseline per CPU class
(:func:`cpu_class`), each measured on a machine of that class; a run is compared with its
own class's, and ``--write-baseline`` replaces only that one. A class's ``pending`` lists
the figures whose measurement changed after its baseline was taken, each with the reason:
they are reported, not checked, on that class until ``--write-baseline`` runs on a machine
of it (which clears the list).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import torch

from bench.harness.cli import bench_parser
from bench.harness.paths import BENCH, bench_config, out_path
from bench.harness.system import loadavg, machine
from bench.harness.verdict import Check, check, finish
from gnntrain.data import load_dataset

BASELINE = BENCH / "baseline.json"
EXACT_BAND = 1e-9
RATIO_FLOOR = 0.25
RATIO_SPREAD_FACTOR = 2.5
PYG_STEPS = 10


def sampling_figures() -> dict[str, float]:
    """``bench.sampling`` on its smoke graph: ours over numpy (1 thread), edges per seed."""
    import bench.sampling as sampling

    rows, checks = sampling.run_graph("20k/400k", 20_000, 19, 4, 1, 10, None, clock=time.process_time)
    if not all(c.ok for c in checks):
        raise RuntimeError(f"bench.sampling's checks failed: {[c.name for c in checks if not c.ok]}")
    ours = next(r for r in rows if r["impl"] == "ours" and r["threads"] == 1)
    base = next(r for r in rows if r["impl"] == "numpy")
    return {"sampling.ours_over_numpy": ours["seeds_per_s"] / base["seeds_per_s"],
            "sampling.edges_per_seed": ours["edges_per_s"] / ours["seeds_per_s"]}


def epoch_figures() -> dict[str, float]:
    """``bench.epoch``'s smoke workload: ours over PyG full batch, the step's speed-up,
    the final loss and accuracy."""
    import bench.epoch as epoch

    # no images at the run's end: drawing them (matplotlib) took 80% of the run's CPU time
    cfg = bench_config("synthetic-small.yaml", [*epoch.WORKLOAD, *epoch.SMOKE, "train.epochs=2",
                                                "train.eval_every=2", "train.plots=false"], "regress")
    graph = load_dataset(cfg.dataset)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # a first run of each loads what the measured runs then find loaded
        epoch.run_ours(cfg.with_overrides(["train.epochs=1", "train.eval_every=1"]), graph,
                       label="warm-up", threads=1)
        epoch.run_pyg_full(cfg, graph, 1)
        t0 = time.process_time()
        ours = epoch.run_ours(cfg, graph, label="ours", threads=1)
        t1 = time.process_time()
        epoch.run_pyg_full(cfg, graph, PYG_STEPS)
        t2 = time.process_time()
    finally:
        torch.set_num_threads(threads)
    steps = epoch.run_steps(cfg, graph, repeats=5, clock=time.process_time)
    return {"epoch.ours_over_pyg": (t1 - t0) / (t2 - t1),
            "epoch.step_speedup": steps["edge_index+F.dropout"] / steps["csr+fused"],
            "epoch.final_loss": ours["loss"][-1], "epoch.test_acc": ours["test_acc"]}


def comm_figures() -> dict[str, float]:
    """``bench.comm``'s smoke bytes chain: feature and sample bytes per row, cache hit rate."""
    import bench.comm as comm

    cfg = bench_config("synthetic-1m.yaml", comm.SMOKE_1M, "regress")
    rows = comm.bytes_section(cfg, load_dataset(cfg.dataset), True)
    out: dict[str, float] = {}
    for r in rows:
        key = f"comm.{r['name']}"
        out[f"{key}.feature_bytes"] = float(r["feature_bytes"])
        out[f"{key}.sample_bytes"] = float(r["bytes_by_category"]["sample"])
        if r["cache_hit_rate"] is not None:
            out[f"{key}.cache_hit_rate"] = float(r["cache_hit_rate"])
    return out


SECTIONS: dict[str, Callable[[], dict[str, float]]] = {
    "sampling": sampling_figures, "epoch": epoch_figures, "comm": comm_figures}
RATIOS = ("sampling.ours_over_numpy", "epoch.ours_over_pyg", "epoch.step_speedup")


def measure() -> dict[str, float]:
    """Every figure of one run, in this process."""
    out: dict[str, float] = {}
    for name, fn in SECTIONS.items():
        t0 = time.perf_counter()
        out.update(fn())
        print(f"  {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def measure_fresh() -> dict[str, float]:
    """:func:`measure` in a fresh process: a baseline run starts as the checked run does,
    with nothing loaded or compiled yet."""
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        return pool.submit(measure).result()


def cpu_class(info: dict[str, str] | None = None) -> str:
    """The class of this CPU whose float kernels give the same bits: ``avx512_bf16``,
    ``avx512``, ``avx2`` or ``other`` (from ``/proc/cpuinfo``'s flags)."""
    from gnntrain.precision import cpu_info

    flags = set((info if info is not None else cpu_info()).get("flags", "").split())
    for name, needs in (("avx512_bf16", {"avx512f", "avx512_bf16"}), ("avx512", {"avx512f"}), ("avx2", {"avx2"})):
        if needs <= flags:
            return name
    return "other"


def read_baselines(path: Path) -> dict[str, dict[str, Any]]:
    """The baselines in ``path`` by CPU class ({} when it is absent)."""
    if not path.is_file():
        return {}
    return dict(json.loads(path.read_text())["baselines"])


def band(name: str, values: list[float]) -> float:
    """The noise band of a figure from its baseline runs (see the docstring)."""
    if name not in RATIOS:
        return EXACT_BAND
    return max(RATIO_FLOOR, RATIO_SPREAD_FACTOR * (max(values) / min(values) - 1))


def baseline(runs: list[dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Per figure: median over ``runs``, the values, the band and its kind."""
    out = {}
    for name in runs[0]:
        values = [r[name] for r in runs]
        out[name] = {"value": statistics.median(values), "runs": values, "band": band(name, values),
                     "kind": "ratio" if name in RATIOS else "exact"}
    return out


def compare(now: dict[str, float], base: dict[str, dict[str, Any]]) -> list[Check]:
    """One check per baseline figure: measured now, within its band of the baseline value."""
    checks = []
    for name, b in base.items():
        if name not in now:
            checks.append(check(f"{name} measured", False, "absent from this run"))
            continue
        v, ref, tol = now[name], b["value"], b["band"]
        if b["kind"] == "ratio":  # a factor either way: x 1.5 and / 1.5 are the same move
            ok = v > 0 and max(v / ref, ref / v) <= 1 + tol
        else:
            ok = abs(v - ref) <= tol * abs(ref)
        rel = (v - ref) / abs(ref) if ref else float(v != ref)
        within = f"a factor {1 + tol:.3g}" if b["kind"] == "ratio" else f"a relative {tol:.0e}"
        checks.append(check(f"{name} within {within} of the baseline ({b['kind']})", ok,
                            f"now {v:.6g}, baseline {ref:.6g} ({100 * rel:+.2f}%)"))
    return checks


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="accepted for the smoke runner; the size is always the small one")
    ap.add_argument("--write-baseline", action="store_true",
                    help=f"measure --runs times and write {BASELINE.relative_to(BENCH.parent)}")
    ap.add_argument("--runs", type=int, default=3, help="runs for --write-baseline (>= 2)")
    ap.add_argument("--baseline", type=Path, default=BASELINE, help="the baseline JSON to compare with")
    args = ap.parse_args(argv)
    if args.runs < 2:
        ap.error(f"--runs={args.runs}: at least 2 runs give a spread")
    info = machine()
    t0 = time.perf_counter()
    runs = []
    for i in range(args.runs if args.write_baseline else 1):
        print(f"run {i + 1} (load {loadavg()})", flush=True)
        runs.append(measure_fresh() if args.write_baseline else measure())
    out: dict[str, Any] = {"machine": info, "runs": runs, "argv": sys.argv[1:] if argv is None else argv}
    checks: list[Check] = []
    cls = cpu_class()
    out["cpu_class"] = cls
    baselines = read_baselines(args.baseline)
    if args.write_baseline:
        baselines[cls] = {"machine": info, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
                          "figures": baseline(runs)}
        doc = {"about": "bench.regress's baselines, one per CPU class; see its docstring for the "
                        "figures and bands", "baselines": dict(sorted(baselines.items()))}
        args.baseline.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote the {cls} baseline to {args.baseline}")
    elif cls not in baselines:
        checks.append(check(f"a baseline for this CPU class ({cls}) exists", False,
                            f"{args.baseline} has {sorted(baselines) or 'none'}: run python -m bench.regress "
                            "--write-baseline on a machine of this class"))
    else:
        print(f"comparing with the {cls} baseline of {baselines[cls]['measured_at']}")
        checks = compare(runs[0], baselines[cls]["figures"])
        for c in checks:
            print(f"{'ok  ' if c.ok else 'MOVED'} {c.name}: {c.detail}")
        for name, why in baselines[cls].get("pending", {}).items():
            print(f"PENDING {name}: now {runs[0].get(name, float('nan')):.6g}, not checked on {cls} ({why})")
    out["total_s"] = time.perf_counter() - t0
    print(f"total {out['total_s']:.0f} s; load average now {loadavg()} (was {info['loadavg_1m']})")
    return finish("regress", checks, out, out_path("regress"))


if __name__ == "__main__":
    raise SystemExit(main())

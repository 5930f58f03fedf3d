"""The communication levers: feature bytes per epoch, one lever at a time and combined.

    python -m bench.comm            # bytes on synthetic-1m (k=4) + accuracy on synthetic-small (k=2)
    python -m bench.comm --smoke    # 5k nodes, tiny model (seconds)
    python -m bench.comm --only bytes
    python -m bench.comm --only sparse  # Cora, HeCo ACM and DBLP: dense vs CSR feature replies
    python -m bench.comm --only typed   # HeCo ACM and DBLP: a dtype and a cache per node type

Bytes (``datasets/synthetic-1m.yaml``: 1M nodes, 100 features, 10% training nodes;
fanouts [15, 10, 5], batch 1024, k=4): ``gnntrain.simulate.simulate_k`` runs every
worker's real sampler, cache and feature reader over one epoch and counts every byte with
the runtime's own counters (tested equal to a real run's). Feature bytes are the rows
(and the id requests) that cross a partition boundary; cache fill is reported apart, it is
paid once per run. Baseline: random partition, no cache, random seed order, float32.
The chain adds METIS, a presample cache of 20% of the remote rows, locality seed order,
float16 transfer, then int8 transfer instead of float16, in that order; variants swap one
step (degree / lru cache, bfloat16) and "alone" rows put one lever on the baseline. A lever's share of the total
reduction depends on the order (a cache saves fewer bytes once METIS removed some).

Same computation (``exact``): a cache only changes where an exact float32 row comes
from, so with the same partition a run with any cache ends with bit-identical
parameters to a run without; checked on a 2k-node graph with 2 Ray workers. The
partition method does change the random stream (nodes are renumbered per partition and
sampling is keyed by (key, node id)) and which worker trains which seed, so METIS vs
random is a different draw of the same estimator: that check reports the loss difference.

Accuracy (``accuracy``): real training on synthetic-small (``datasets/synthetic-small.yaml``,
same model and fanouts as bench.epoch) with 2 Ray workers, METIS, no cache (every
remote row goes through the codec), ``--acc-epochs`` epochs, test accuracy of full
inference: float32 + random order against locality order, float16, bfloat16 and int8.

Sparse rows (``sparse``): HeCo ACM and DBLP and Cora (``datasets/{cora,acm,dblp}.yaml``,
k=4, the configs' own settings; ``--smoke``: Cora only) carry bag-of-words features that
are mostly zeros; one simulated epoch each with every feature reply dense
(``train.sparse_feature_transfer=false``) and with mostly-zero replies sent as CSR, the
default. A graph whose data is absent is skipped, naming the path (without ``--smoke``, a
run that finds none of them fails).

Typed graphs (``typed``): HeCo ACM and DBLP (k=4, ``--smoke``: ACM only), where every node
type travels at its own width: one simulated epoch each with every reply dense, with the
default CSR replies, with a transfer dtype per node type (:data:`TYPED_DATASETS`: the
dense-valued or normalised types at 2 bytes a value, bag-of-words counts kept exact), and
with a presample cache of 20% of the remote rows on top; per row the feature bytes by node
type, and the cache's bytes (every type at its width) next to what the same rows take
zero-padded to the widest type (computed from the same cache's capacity).

Byte ratios and the accuracy deltas are targets, reported. The exit status is 1 when a
correctness check fails (``bench.harness.verdict``): with the same partition, every cache policy
ends with parameters identical to the no-cache run; a row that only adds a cache or a
transfer dtype to another row sends the same sample bytes and no more feature bytes;
CSR replies send no more feature bytes than dense ones, and the same sample bytes and
feature messages; on a typed graph a dtype per type or a cache sends no more feature bytes
and the same sample bytes, and the per-type cache takes no more bytes than padded rows;
every accuracy run lowers its loss; and no worker dies. A worker death is never
recovered here (``train.max_failures=0``): it fails the benchmark.
JSON goes to bench/out/comm.json (``comm-smoke.json``), written after each section; with
``--only`` the sections not run keep their figures from an earlier run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bench.harness.cli import bench_parser, csv_list
from bench.harness.paths import OUT, bench_config, missing_data, out_path
from bench.harness.runs import quiet, read_metrics
from bench.harness.system import machine
from bench.harness.verdict import Check, check, finish
from gnntrain.api import override_items
from gnntrain.config import RunConfig
from gnntrain.data import load_dataset
from gnntrain.report import fmt_bytes
from gnntrain.simulate import simulate_k
from partition.graph import Graph

SECTIONS = ("bytes", "sparse", "typed", "exact", "accuracy")
K_BYTES = 4
BASE = ["partition.method=random", "sampler.cache.policy=none", "sampler.cache.size=0.0",
        "sampler.seed_order=random", "train.feature_dtype=float32",
        "sampler.fanouts=[15,10,5]", "sampler.batch_size=1024"]
METIS = ["partition.method=metis"]
PRESAMPLE = ["sampler.cache.policy=presample", "sampler.cache.size=0.2"]
LOCALITY = ["sampler.seed_order=locality"]
FP16 = ["train.feature_dtype=float16"]
# (row name, overrides on top of BASE, kind): kind "chain" rows are cumulative
INT8 = ["train.feature_dtype=int8"]
DEGREE = ["sampler.cache.policy=degree", "sampler.cache.size=0.2"]
LRU = ["sampler.cache.policy=lru", "sampler.cache.size=0.2"]
LOSSLESS = METIS + PRESAMPLE + LOCALITY
PLAN: list[tuple[str, list[str], str]] = [
    ("baseline: random part., no cache, fp32", [], "chain"),
    ("+ METIS", METIS, "chain"),
    ("+ presample cache 20%", METIS + PRESAMPLE, "chain"),
    ("+ locality seed order", LOSSLESS, "chain"),
    ("+ float16 transfer", LOSSLESS + FP16, "chain"),
    ("+ int8 transfer (instead of float16)", LOSSLESS + INT8, "chain"),
    ("METIS + degree cache 20%", METIS + DEGREE, "variant"),
    ("METIS + lru cache 20% (cold epoch)", METIS + LRU, "variant"),
    ("METIS + presample + locality + bf16", LOSSLESS + ["train.feature_dtype=bfloat16"], "variant"),
    ("presample cache 20% alone", PRESAMPLE, "alone"),
    ("locality seed order alone", LOCALITY, "alone"),
    ("float16 alone", FP16, "alone"),
    ("int8 alone", INT8, "alone"),
]
ACC_PLAN = [("float32, random order", []), ("float32, locality order", LOCALITY),
            ("float16", FP16), ("bfloat16", ["train.feature_dtype=bfloat16"]),
            ("int8", INT8)]
EXACT_PLAN = [("METIS, no cache", METIS), ("METIS, presample 20%", METIS + PRESAMPLE),
              ("METIS, degree 20%", METIS + DEGREE), ("METIS, lru 20%", METIS + LRU),
              ("METIS, fifo 20%", METIS + ["sampler.cache.policy=fifo", "sampler.cache.size=0.2"]),
              ("random partition, no cache", [])]
EXACT_SETTINGS = ["train.epochs=3", "train.eval_every=3", "model.dropout=0.0"]
SMOKE_1M = ["dataset.synthetic.nodes=5000", "dataset.synthetic.features=16",
            "dataset.synthetic.train_frac=0.3"]
SMOKE_BATCH = ["sampler.batch_size=128"]  # after BASE's 1024: several batches per worker
SMOKE_SMALL = ["dataset.synthetic.nodes=2000", "dataset.synthetic.features=16",
               "dataset.synthetic.classes=8", "sampler.batch_size=128", "model.hidden=16"]


# -- bytes ------------------------------------------------------------------------------
def bytes_section(cfg0: RunConfig, graph: Graph, smoke: bool) -> list[dict[str, Any]]:
    plan = PLAN if not smoke else [p for p in PLAN if p[2] == "chain"] + [PLAN[-1]]
    rows = []
    for name, extra, kind in plan:
        t0 = time.perf_counter()
        sim = simulate_k(cfg0.with_overrides(BASE + extra + (SMOKE_BATCH if smoke else [])), graph, K_BYTES)
        rows.append({"name": name, "kind": kind, "overrides": extra, **sim,
                     "feature_bytes": sim["bytes_by_category"]["feature"],
                     "seconds": time.perf_counter() - t0})
        print(f"  {name}: feature {fmt_bytes(rows[-1]['feature_bytes'])} "
              f"({rows[-1]['seconds']:.0f} s)")
    return rows


EXACT_LEVERS = ("sampler.cache.", "train.feature_dtype=")


def bytes_checks(rows: list[dict[str, Any]]) -> list[Check]:
    """For each pair of rows where the second only adds caches or a transfer dtype to the
    first (the same partition and seed order): the same sample bytes, no more feature bytes."""
    out: list[Check] = []
    for a in rows:
        for b in rows:
            extra = set(b["overrides"]) - set(a["overrides"])
            if a is b or not set(a["overrides"]) <= set(b["overrides"]) or not extra \
                    or not all(o.startswith(EXACT_LEVERS) for o in extra):
                continue
            sa, sb = a["bytes_by_category"]["sample"], b["bytes_by_category"]["sample"]
            out.append(check(f"{b['name']!r} samples what {a['name']!r} samples", sa == sb,
                             f"sample bytes {sb} vs {sa}"))
            out.append(check(f"{b['name']!r} sends no more feature bytes than {a['name']!r}",
                             b["feature_bytes"] <= a["feature_bytes"],
                             f"feature bytes {b['feature_bytes']} vs {a['feature_bytes']}"))
    return out


def print_bytes(rows: list[dict[str, Any]]) -> dict[str, Any]:
    base = rows[0]["feature_bytes"]
    chain = [r for r in rows if r["kind"] == "chain"]
    total_cut = base - chain[-1]["feature_bytes"]
    log_total = math.log(base / chain[-1]["feature_bytes"]) if chain[-1]["feature_bytes"] else float("nan")
    prev = base
    for r in rows:
        r["ratio_vs_baseline"] = base / r["feature_bytes"] if r["feature_bytes"] else float("inf")
        if r["kind"] == "chain" and r is not rows[0]:
            r["share_of_reduction"] = (prev - r["feature_bytes"]) / total_cut if total_cut else 0.0
            r["share_of_log_reduction"] = (math.log(prev / r["feature_bytes"]) / log_total
                                           if log_total else 0.0)
            prev = r["feature_bytes"]
    print(f"\nfeature bytes per epoch, k={K_BYTES} (simulate_k, exact counts); baseline = first row")
    print(f"{'configuration':<38} {'feature/epoch':>13} {'fewer':>7} {'share':>6} {'log-sh':>6} "
          f"{'cache hit':>9} {'remote in':>9} {'sample/epoch':>12} {'cache fill':>10}")
    kind = None
    for r in rows:
        if r["kind"] != kind:
            kind = r["kind"]
            print(f"-- {kind}")
        hit = "-" if r["cache_hit_rate"] is None else f"{100 * r['cache_hit_rate']:.1f}%"
        share = f"{100 * r['share_of_reduction']:.0f}%" if "share_of_reduction" in r else ""
        lshare = f"{100 * r['share_of_log_reduction']:.0f}%" if "share_of_log_reduction" in r else ""
        print(f"{r['name']:<38} {fmt_bytes(r['feature_bytes']):>13} {r['ratio_vs_baseline']:>6.2f}x "
              f"{share:>6} {lshare:>6} {hit:>9} {100 * r['remote_input_share']:>8.1f}% "
              f"{fmt_bytes(r['bytes_by_category']['sample']):>12} {fmt_bytes(r['cache_setup_bytes']):>10}")
    by_name = {r["name"]: r["ratio_vs_baseline"] for r in rows}
    lossless = next((r for r in chain if r["overrides"] == LOSSLESS), None)
    fp16 = next((r for r in chain if r["overrides"] == LOSSLESS + FP16), None)
    combined = chain[-1]["ratio_vs_baseline"]
    print(f"\ncombined: {combined:.2f}x fewer feature bytes than the baseline with the whole chain "
          f"(target >= 5x: {'met' if combined >= 5 else 'missed'})")
    if lossless is not None and fp16 is not None:
        print(f"          {lossless['ratio_vs_baseline']:.2f}x with the exact levers only (METIS, "
              f"cache, locality); {fp16['ratio_vs_baseline']:.2f}x with float16 transfer")
    print("share = bytes removed by the step / bytes removed by the whole chain; log-sh = the "
          "step's factor as a share of the chain's; both depend on the order of the steps")
    return {"combined_ratio": combined, "ratios": by_name,
            "lossless_ratio": lossless["ratio_vs_baseline"] if lossless else None,
            "fp16_ratio": fp16["ratio_vs_baseline"] if fp16 else None}


# -- sparse rows --------------------------------------------------------------------------
SPARSE_DATASETS = ("cora", "acm", "dblp")
"""Real graphs with bag-of-words features (``datasets/<name>.yaml``), k=4 each."""


def real_graphs(names: tuple[str, ...], tag: str,
                rows: list[dict[str, Any]]) -> Iterator[tuple[str, RunConfig, Graph]]:
    """``(name, config, graph)`` for each of ``datasets/<name>.yaml`` whose data is here; an
    absent one adds a row to ``rows`` saying it was skipped, naming the path."""
    for name in names:
        cfg = bench_config(f"{name}.yaml", [], tag)
        missing = missing_data(cfg.dataset)
        if missing:
            rows.append({"dataset": name, "skipped": f"no data at {', '.join(missing)}"})
            print(f"  {name}: skipped, no data at {', '.join(missing)}")
            continue
        yield name, cfg, load_dataset(cfg.dataset)


def measured_any(section: str, rows: list[dict[str, Any]]) -> Check:
    """A run that found none of its graphs fails."""
    return check(f"{section}: at least one graph measured", any("skipped" not in r for r in rows),
                 "; ".join(r.get("skipped", "") for r in rows))


def sparse_section(names: tuple[str, ...], tag: str) -> list[dict[str, Any]]:
    """Feature bytes of one simulated epoch with every reply dense, then with mostly-zero
    replies as CSR (``train.sparse_feature_transfer``), on each graph whose data is here."""
    rows: list[dict[str, Any]] = []
    for name, cfg, graph in real_graphs(names, tag, rows):
        nnz = int(np.count_nonzero(graph.x)) / max(1, graph.x.size)
        row: dict[str, Any] = {"dataset": name, "nodes": graph.num_nodes, "width": graph.num_features,
                               "set_share": nnz, "k": K_BYTES}
        for mode in ("dense", "sparse"):
            t0 = time.perf_counter()
            sim = simulate_k(cfg.with_overrides([f"train.sparse_feature_transfer={mode == 'sparse'}"]),
                             graph, K_BYTES)
            row[mode] = {"feature_bytes": sim["bytes_by_category"]["feature"],
                         "sample_bytes": sim["bytes_by_category"]["sample"],
                         "feature_messages": sim["messages_by_category"]["feature"],
                         "seconds": time.perf_counter() - t0}
        d, sp = row["dense"]["feature_bytes"], row["sparse"]["feature_bytes"]
        row["ratio"] = d / sp if sp else float("inf")
        rows.append(row)
        print(f"  {name}: {graph.num_nodes:,} nodes x {graph.num_features:,} features "
              f"({100 * nnz:.2f}% set); feature bytes/epoch dense {fmt_bytes(d)}, sparse "
              f"{fmt_bytes(sp)}: {row['ratio']:.1f}x fewer; simulated epoch "
              f"{row['dense']['seconds']:.1f} s / {row['sparse']['seconds']:.1f} s")
        del graph
    return rows


def sparse_checks(rows: list[dict[str, Any]], require_data: bool) -> list[Check]:
    """Sparse replies never cost more, and the rest of the epoch's traffic is unchanged;
    ``require_data``: a run that found none of the graphs fails."""
    out = []
    for r in rows:
        if "skipped" in r:
            continue
        d, s = r["dense"], r["sparse"]
        out.append(check(f"sparse: {r['dataset']} sends no more feature bytes, the same sample "
                         "bytes and messages", s["feature_bytes"] <= d["feature_bytes"]
                         and s["sample_bytes"] == d["sample_bytes"]
                         and s["feature_messages"] == d["feature_messages"],
                         f"feature {s['feature_bytes']} vs {d['feature_bytes']}"))
    if require_data:
        out.append(measured_any("sparse", rows))
    return out


# -- typed graphs: a dtype and a cache per node type ------------------------------------
TYPED_DATASETS: dict[str, dict[str, str]] = {
    "acm": {"paper": "float16", "author": "float16"},  # normalised bag-of-words (1/n)
    "dblp": {"term": "bfloat16"},  # 50 dense word-vector columns; authors and papers are counts
}
"""Typed graphs (``datasets/<name>.yaml``, k=4) and the transfer dtype per node type tried."""


def typed_section(names: tuple[str, ...], tag: str) -> list[dict[str, Any]]:
    """One simulated epoch per row (dense, CSR, dtype per type, + presample cache) on each
    typed graph whose data is here."""
    rows: list[dict[str, Any]] = []
    for name, cfg, graph in real_graphs(names, tag, rows):
        dtypes = override_items({"train.feature_dtype": TYPED_DATASETS[name]})
        plan = [("float32, dense", ["train.sparse_feature_transfer=false"]),
                ("float32, CSR where it halves", []),
                (f"dtype per type {dtypes[0].split('=', 1)[1]}", dtypes),
                ("+ presample cache 20%", dtypes + PRESAMPLE)]
        row: dict[str, Any] = {"dataset": name, "nodes": graph.num_nodes, "width": graph.num_features,
                               "type_widths": dict(zip(graph.node_type_names, graph.node_type_features,
                                                       strict=True)), "k": K_BYTES, "modes": []}
        print(f"  {name}: {graph.num_nodes:,} nodes; widths per type {row['type_widths']} "
              f"(padded: {graph.num_features})")
        for label, extra in plan:
            t0 = time.perf_counter()
            sim = simulate_k(cfg.with_overrides(extra), graph, K_BYTES)
            mode = {"name": label, "overrides": extra,
                    "feature_bytes": sim["bytes_by_category"]["feature"],
                    "sample_bytes": sim["bytes_by_category"]["sample"],
                    "feature_by_type": sim["bytes_by_node_type"].get("feature", {}),
                    "cache_hit_rate": sim["cache_hit_rate"], "cache_rows": sim["cache_capacity"],
                    "cache_bytes": sim["cache_bytes"],
                    "cache_bytes_padded": 4 * graph.num_features * sim["cache_capacity"],
                    "seconds": time.perf_counter() - t0}
            row["modes"].append(mode)
            by_type = ", ".join(f"{t} {fmt_bytes(b)}" for t, b in mode["feature_by_type"].items())
            cache = (f"; cache {mode['cache_rows']:,} rows in {fmt_bytes(mode['cache_bytes'])} "
                     f"(padded: {fmt_bytes(mode['cache_bytes_padded'])}), hit "
                     f"{100 * (mode['cache_hit_rate'] or 0):.1f}%" if mode["cache_rows"] else "")
            print(f"    {label:<46} feature/epoch {fmt_bytes(mode['feature_bytes']):>10} ({by_type})"
                  f"{cache}")
        rows.append(row)
        del graph
    return rows


def typed_checks(rows: list[dict[str, Any]], require_data: bool) -> list[Check]:
    """Each row after the first two only adds a dtype or a cache: the same sample bytes, no
    more feature bytes than the row before; CSR no more than dense; the cache per type no
    larger than the same rows padded."""
    out = []
    for r in rows:
        if "skipped" in r:
            continue
        m = r["modes"]
        for a, b in zip(m, m[1:], strict=False):
            out.append(check(f"typed: {r['dataset']} {b['name']!r} sends no more feature bytes "
                             f"than {a['name']!r} and samples the same",
                             b["feature_bytes"] <= a["feature_bytes"]
                             and b["sample_bytes"] == a["sample_bytes"],
                             f"feature {b['feature_bytes']} vs {a['feature_bytes']}"))
        c = m[-1]
        out.append(check(f"typed: {r['dataset']} cache per type within the padded rows' bytes",
                         0 < c["cache_bytes"] <= c["cache_bytes_padded"],
                         f"{c['cache_bytes']} vs {c['cache_bytes_padded']}"))
    if require_data:
        out.append(measured_any("typed", rows))
    return out


# -- exactness and accuracy (real training on Ray) --------------------------------------
def final_state(summary: dict[str, Any]) -> dict[str, torch.Tensor]:
    from gnntrain.checkpoint import load_latest
    from gnntrain.rundir import RunDir

    ckpt = load_latest(RunDir(Path(summary["run_dir"])))
    if ckpt is None:
        raise RuntimeError(f"run {summary['run_dir']} wrote no checkpoint")
    return dict(ckpt["model"])


def train(cfg: RunConfig, graph: Graph, keep: bool) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                             dict[str, torch.Tensor]]:
    """One real run on Ray. A worker that dies is not recovered (``max_failures=0``): the
    ``WorkerFailure`` ends the benchmark, which then fails."""
    import shutil

    from gnntrain.runtime.coordinator import run_training

    key = cfg.model_dump_json() + graph.content_hash()
    if key in _RUNS:  # the same run asked for twice (the smoke version does): train once
        return _RUNS[key]
    s = run_training(cfg.with_overrides(["train.max_failures=0", "train.checkpoint_every=1"]),
                     graph=graph, progress=False, console=quiet())
    eps, state = read_metrics(s), final_state(s)
    if not keep:
        shutil.rmtree(s["run_dir"], ignore_errors=True)
    _RUNS[key] = (s, eps, state)
    return _RUNS[key]


_RUNS: dict[str, tuple[dict[str, Any], list[dict[str, Any]], dict[str, torch.Tensor]]] = {}


def exact_section(cfg0: RunConfig, graph: Graph, keep: bool, smoke: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    ref: dict[str, torch.Tensor] | None = None
    plan = EXACT_PLAN[:2] if smoke else EXACT_PLAN
    for name, extra in plan:
        s, eps, state = train(cfg0.with_overrides(BASE + extra), graph, keep)
        if ref is None:
            ref = state
        diff = max(float((state[k] - ref[k]).abs().max()) for k in ref)
        rows.append({"name": name, "identical": all(torch.equal(state[k], ref[k]) for k in ref),
                     "same_partition": _partition(extra) == _partition(plan[0][1]),
                     "max_abs_param_diff": diff, "final_loss": eps[-1]["loss"],
                     "test_acc": eps[-1].get("test_acc"),
                     "cache_hit_rate": eps[-1]["cache_hit_rate"],
                     "feature_bytes": eps[-1]["comm"]["by_category"]["feature"]})
    print(f"\nsame computation? {graph.num_nodes:,}-node graph, 2 Ray workers, "
          f"{cfg0.train.epochs} epochs; reference = first row")
    print(f"{'run':<28} {'final params':>14} {'max |diff|':>11} {'final loss':>11} {'cache hit':>9} "
          f"{'feature/epoch':>13}")
    for r in rows:
        hit = "-" if r["cache_hit_rate"] is None else f"{100 * r['cache_hit_rate']:.1f}%"
        print(f"{r['name']:<28} {'identical' if r['identical'] else 'differ':>14} "
              f"{r['max_abs_param_diff']:>11.2e} {r['final_loss']:>11.6f} {hit:>9} "
              f"{fmt_bytes(r['feature_bytes']):>13}")
    return rows


def _partition(overrides: list[str]) -> list[str]:
    return [o for o in overrides if o.startswith("partition.")]


def exact_checks(rows: list[dict[str, Any]]) -> list[Check]:
    """Rows on the reference's partition end with its parameters, bit for bit."""
    return [check(f"{r['name']}: final parameters identical to {rows[0]['name']}", r["identical"],
                  f"max |diff| {r['max_abs_param_diff']:.3e}")
            for r in rows[1:] if r["same_partition"]]


def accuracy_checks(rows: list[dict[str, Any]]) -> list[Check]:
    return [check(f"accuracy run {r['name']}: loss falls from the first epoch to the last",
                  r["loss"][-1] < r["loss"][0], f"losses {[round(v, 4) for v in r['loss']]}")
            for r in rows if len(r["loss"]) > 1]


def accuracy_section(cfg0: RunConfig, graph: Graph, keep: bool, smoke: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name, extra in ([ACC_PLAN[0], ACC_PLAN[-1]] if smoke else ACC_PLAN):
        t0 = time.perf_counter()
        s, eps, _ = train(cfg0.with_overrides(BASE + METIS + extra), graph, keep)
        rows.append({"name": name, "test_acc": eps[-1]["test_acc"], "val_acc": eps[-1]["val_acc"],
                     "loss": [e["loss"] for e in eps],
                     "epoch_s": float(np.mean([e["epoch_s"] for e in eps])),
                     "feature_bytes": float(np.mean([e["comm"]["by_category"]["feature"] for e in eps])),
                     "seconds": time.perf_counter() - t0})
        print(f"  {name}: test {100 * rows[-1]['test_acc']:.2f}% ({rows[-1]['seconds']:.0f} s)")
    base = rows[0]["test_acc"]
    print(f"\naccuracy effect, {graph.name} ({graph.num_nodes:,} nodes), 2 Ray workers, METIS, no cache, "
          f"{cfg0.train.epochs} epochs; full-inference test accuracy")
    print(f"{'transfer / order':<26} {'test acc':>9} {'delta pts':>9} {'final loss':>10} "
          f"{'feature/epoch':>13}  target |delta| <= 0.5")
    for r in rows:
        r["delta_points"] = 100 * (r["test_acc"] - base)
        ok = "" if r is rows[0] else ("met" if abs(r["delta_points"]) <= 0.5 else "missed")
        print(f"{r['name']:<26} {100 * r['test_acc']:>8.2f}% {r['delta_points']:>+9.2f} "
              f"{r['loss'][-1]:>10.4f} {fmt_bytes(r['feature_bytes']):>13}  {ok}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="small graphs, tiny model (seconds)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}")
    ap.add_argument("--acc-epochs", type=int, default=2, help="epochs of each accuracy run")
    ap.add_argument("--keep-runs", action="store_true", help="keep run directories in bench/out/runs")
    args = ap.parse_args(argv)
    only = csv_list(args.only)
    if [s for s in only if s not in SECTIONS] or args.acc_epochs < 1:
        ap.error(f"--only={args.only!r} (allowed {','.join(SECTIONS)}) and --acc-epochs="
                 f"{args.acc_epochs} (>= 1)")
    tag = "comm-smoke" if args.smoke else "comm"
    t_start = time.perf_counter()
    info = machine()
    OUT.mkdir(parents=True, exist_ok=True)
    path = out_path(tag)
    # sections run now replace those of an earlier run; the others are kept
    out: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    out.update({"machine": info, "argv": sys.argv[1:]})

    def save(section: str) -> None:
        out.setdefault("section_runs", {})[section] = {"at": time.strftime("%Y-%m-%d %H:%M:%S"),
                                                       "loadavg_after": os.getloadavg()[0]}
        path.write_text(json.dumps(out, indent=1, default=str))

    checks: list[Check] = []
    if "bytes" in only:
        cfg = bench_config("synthetic-1m.yaml", SMOKE_1M if args.smoke else [], tag)
        graph = load_dataset(cfg.dataset)
        print(f"{graph.name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
              f"{graph.num_features} features, {graph.train_idx.size:,} training nodes; k={K_BYTES}")
        rows = bytes_section(cfg, graph, args.smoke)
        out["bytes"] = {"graph": graph.name, "nodes": graph.num_nodes, "k": K_BYTES, "rows": rows,
                        **print_bytes(rows)}
        checks += bytes_checks(rows)
        save("bytes")
        del graph
    if "sparse" in only:
        names: tuple[str, ...] = SPARSE_DATASETS[:1] if args.smoke else SPARSE_DATASETS
        print(f"\nmostly-zero feature rows as CSR, k={K_BYTES} (simulate_k, exact counts)")
        out["sparse"] = {"rows": sparse_section(names, tag)}
        checks += sparse_checks(out["sparse"]["rows"], require_data=not args.smoke)
        save("sparse")
    if "typed" in only:
        names = ("acm",) if args.smoke else tuple(TYPED_DATASETS)
        print(f"\ntyped graphs: every node type at its own width, k={K_BYTES} (simulate_k, exact counts)")
        out["typed"] = {"rows": typed_section(names, tag)}
        checks += typed_checks(out["typed"]["rows"], require_data=not args.smoke)
        save("typed")
    if "exact" in only or "accuracy" in only:
        from gnntrain.runtime.cluster import ray_session

        small = bench_config("synthetic-small.yaml",
                             ["model.hidden=256", "model.layers=3", "model.dropout=0.5",
                              "sampler.fanouts=[15,10,5]", "cluster.workers=2", "partition.parts=2",
                              *(SMOKE_SMALL if args.smoke else [])], tag)
        from gnntrain.runtime.ray_group import WorkerFailure

        try:
            with ray_session(small.cluster, 2):
                checks += ray_sections(small, only, args, out, save)
        except WorkerFailure as e:
            checks.append(check("no worker died", False, str(e).splitlines()[0][:500]))
    out["total_s"] = time.perf_counter() - t_start
    print(f"\ntotal {out['total_s']:.0f} s; load average now {os.getloadavg()[0]:.2f} "
          f"(was {info['loadavg_1m']})")
    return finish("comm", checks, out, path)


def ray_sections(small: RunConfig, only: list[str], args: argparse.Namespace, out: dict[str, Any],
                 save: Callable[[str], None]) -> list[Check]:
    """The sections that train on Ray (inside the caller's Ray session); their checks."""
    checks: list[Check] = []
    if "exact" in only:
        tiny = small.with_overrides([*SMOKE_SMALL, *EXACT_SETTINGS])
        g = load_dataset(tiny.dataset)
        out["exact"] = exact_section(tiny, g, args.keep_runs, args.smoke)
        checks += exact_checks(out["exact"])
        save("exact")
    if "accuracy" in only:
        acc = small.with_overrides([f"train.epochs={args.acc_epochs}",
                                    f"train.eval_every={args.acc_epochs}"])
        if args.smoke:  # the exact check's graph and settings: its first run is reused
            acc = small.with_overrides([*SMOKE_SMALL, *EXACT_SETTINGS])
        g = load_dataset(acc.dataset)
        rows = accuracy_section(acc, g, args.keep_runs, args.smoke)
        out["accuracy"] = {"graph": g.name, "nodes": g.num_nodes, "epochs": acc.train.epochs, "rows": rows}
        checks += accuracy_checks(rows)
        save("accuracy")
    return checks


if __name__ == "__main__":
    raise SystemExit(main())

"""Per-epoch traffic of an ogbn-papers100M-sized graph on 16 and 64 workers, extrapolated.

    python -m bench.scale               # 1M, 4M, 10M nodes at k = 16, 64
    python -m bench.scale --sizes 1000000,4000000 --parts 16,64 --json bench/out/scale/small.json
    python -m bench.scale --smoke       # 20k and 40k nodes at k = 2, 4 (seconds)

The default run takes ~1.6 h on 2 cores, 50 min of it METIS at 10M (~40 min once the
partition sets are stored); its peak is ~15 GB of anonymous memory, METIS at 10M nodes.

Target: ogbn-papers100M, 111,059,956 nodes, 1,615,685,872 stored (directed) citation
edges, 128 features, 172 classes, 1,207,179 training nodes (time split). gnntrain loads it
with ``undirected: true``; its mean in-degree after symmetrising is taken as 2 E / N =
29.10, every stored edge doubled. Reciprocal pairs, which the loader's dedup would merge,
are not subtracted: counting them needs the 57 GB download; the figure is an upper bound.

Method. The settings are read from ``datasets/ogbn-papers100M.yaml`` (METIS, fanouts
[15, 10, 5], batch 1024, 3-layer GraphSAGE with hidden 256, degree cache of 5% of each
worker's remote rows, float16 feature transfer), with the dataset swapped for the
synthetic generator (``gnntrain.data.synthetic``) at 128 features, 172 classes and
avg_degree 29.10; its other settings keep their defaults (power law 2.5, homophily 0.55).
For each size n and worker count k the graph is partitioned with METIS and one epoch is
simulated as ``gnntrain.simulate.simulate_k`` does it (every worker's real sampler, cache
and feature reader over all its seeds, every byte counted by category), except that the
workers fill their caches one at a time (``gnntrain.simulate.simulate_set`` with
``one_cache_at_a_time``; by default all k caches are held at once, ~18 GB at k = 64 and 10M
nodes); sizes up to ``--verify-nodes`` also run
``simulate_k`` itself and must give the same bytes. Sample, feature and control bytes are
divided by the epoch's training seeds and fitted per k as ``a + b ln n`` (least squares
over the sizes); the fit at n = 111,059,956, times 1,207,179 seeds, is the per-epoch
estimate. The range around it: the per-seed bytes of the largest measured n (no growth
past it), and an upper end, those bytes times the inputs of a one-seed batch over the
inputs per seed measured: as if no two seeds of a batch shared a sampled node, which is
where the growth with n ends (the remote share falls and the cache hit rate rises with n,
so holding them at the largest n's values errs high). Gradient bytes do not depend on n: the per-step ring all-reduce
bytes of the model that the simulation counts, times k, times papers100M's steps per
epoch, ceil(ceil(1,207,179 / k) / 1024). The cache is the same fraction (5% of the remote
rows) at every n, so it grows with the graph as it would on papers100M; its fill (paid
once per run, not per epoch) is reported apart, scaled to papers100M's remote rows.

Training seeds: per-seed bytes depend on how many seeds share a batch (their sampled
neighbourhoods overlap), so each size's ``train_frac`` is chosen so that at the largest k
every worker holds a whole number of batches, each ~95% full (the number a 10% training
share gives, rounded, at least one); papers100M's batches are 97-100% full at k = 16, 64.
The measured table shows the mean batch of every row.

Caveats: the synthetic graph has classes but no other locality, so METIS cuts far more
edges than on the real citation graph; the remote share, and the feature and sample
bytes, are those of the synthetic model at papers100M's size, i.e. pessimistic. The
simulator makes no coordinator calls, so control bytes are 0 (a real run adds a few per
step).

Memory: each size runs in a fresh process (``--in-process`` keeps them in this one), and
its graph is dropped once the partition sets are written (the simulation reads the sets).
Per step: the peak RSS (``VmHWM``, reset at the step's start), which includes the touched
pages of the memory-mapped partition files that the kernel can drop, and the peak
anonymous memory (``RssAnon``, polled every 0.2 s), which is what has to fit.

JSON goes to ``--json`` (default bench/out/scale/scale.json, ``scale-smoke.json`` with
``--smoke``) and the printed tables beside it (``.txt``). Partition sets are cached by graph
hash under ``--root`` (default bench/out/scale/partitions), so a rerun skips METIS.
"""

from __future__ import annotations

import gc
import json
import math
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from rich.console import Console
from rich.table import Table

from bench.harness.cli import bench_parser
from bench.harness.memory import MIB, own_meter
from bench.harness.paths import DATASETS
from bench.harness.paths import OUT as OUT_ROOT
from gnntrain.config import ConfigError, RunConfig, SyntheticDataset, load_config
from gnntrain.data.synthetic import generate
from gnntrain.report import fmt_bytes
from gnntrain.simulate import simulate_k, simulate_set
from partition import PartitionSet, build_partition_set
from partition.graph import Graph
from partition.steps import StepRecorder
from samplers import CSRSource, NeighborSampler
from samplers.config import resolve_fanouts

OUT = OUT_ROOT / "scale"
TEMPLATE = DATASETS / "ogbn-papers100M.yaml"
PER_SEED = ("sample", "feature", "control")  # categories that scale with the seeds
CATEGORIES = (*PER_SEED, "gradient")
BATCH_FILL = 0.95  # seeds per batch / batch size at the largest k
WIDTH = 230  # the tables are wide; the .txt beside the JSON keeps them whole


@dataclass(frozen=True, kw_only=True)
class Target:
    """The graph the figures are extrapolated to."""

    name: str = "ogbn-papers100M"
    nodes: int = 111_059_956
    stored_edges: int = 1_615_685_872  # directed, as distributed
    train_nodes: int = 1_207_179
    features: int = 128
    classes: int = 172

    @property
    def avg_degree(self) -> float:
        """Mean in-degree after symmetrising: every stored edge both ways (29.10)."""
        return 2 * self.stored_edges / self.nodes

    def steps(self, k: int, batch: int) -> int:
        """Steps per epoch on k workers with the training seeds spread evenly."""
        return math.ceil(math.ceil(self.train_nodes / k) / batch)


PAPERS = Target()


@dataclass(frozen=True)
class LogFit:
    """``value(n) = a + b ln n``, least squares over the measured sizes."""

    a: float
    b: float
    max_rel_residual: float

    def __call__(self, n: float) -> float:
        return self.a + self.b * math.log(n)


def fit_log(ns: list[int], values: list[float]) -> LogFit:
    """Fit ``a + b ln n``; one size gives a flat fit (b = 0)."""
    x, y = np.log(np.asarray(ns, dtype=float)), np.asarray(values, dtype=float)
    if len(ns) < 2:
        a, b = float(y.mean()), 0.0
    else:
        b, a = (float(v) for v in np.polyfit(x, y, 1))
    pred = a + b * x
    rel = np.abs(pred - y) / np.maximum(np.abs(y), 1e-300)
    return LogFit(a=a, b=b, max_rel_residual=float(rel.max()))


# -- configuration ------------------------------------------------------------------------
def train_frac_for(nodes: int, kmax: int, batch: int, share: float) -> float:
    """Training share giving every worker at ``kmax`` a whole number of ~95%-full batches:
    the batch count ``share`` of the nodes would give, rounded, at least one."""
    per_batch = BATCH_FILL * batch * kmax
    m = max(1, round(share * nodes / per_batch))
    return min(0.9, m * per_batch / nodes)


def scale_config(nodes: int, train_frac: float, root: Path, target: Target = PAPERS) -> RunConfig:
    """``datasets/ogbn-papers100M.yaml`` with the dataset swapped for a synthetic graph."""
    raw = yaml.safe_load(TEMPLATE.read_text())
    raw["dataset"] = {"name": f"scale-{nodes}", "source": "synthetic", "synthetic": {
        "nodes": nodes, "avg_degree": round(target.avg_degree, 2), "features": target.features,
        "classes": target.classes, "train_frac": train_frac, "val_frac": 0.0, "seed": 0}}
    raw["partition"]["root"] = str(root)
    raw.setdefault("train", {})["run_root"] = str(root.parent / "runs")
    return load_config(raw=raw)


# -- measurement --------------------------------------------------------------------------
def with_k(cfg: RunConfig, k: int) -> RunConfig:
    return cfg.with_overrides([f"partition.parts={k}", f"cluster.workers={k}"])


SAME_AS_SIMULATE_K = ("bytes_by_category", "bytes_total", "bytes_per_worker_mean",
                      "bytes_per_worker_max", "remote_input_share", "cache_hit_rate",
                      "cache_setup_bytes", "input_nodes", "steps", "train_nodes")


def single_seed_inputs(graph: Graph, cfg: RunConfig, count: int = 1000) -> float:
    """Mean input nodes of a batch of ONE training seed (whole graph, same fanouts): the
    per-seed inputs when no two seeds of a batch share a sampled node."""
    sc = cfg.sampler
    sampler = NeighborSampler(CSRSource(graph.indptr, graph.indices),
                              resolve_fanouts(sc.fanouts, graph.edge_type_names),
                              replace=sc.replace, weighted=sc.weighted)
    rng = np.random.default_rng(0)
    seeds = rng.choice(graph.train_idx, size=min(count, graph.train_idx.size), replace=False)
    return float(np.mean([sampler.sample(seeds[i:i + 1], key=i).input_nodes.shape[0]
                          for i in range(seeds.size)]))


class Meter:
    """Per step: wall time, peak RSS (``VmHWM``, reset at the step's start by
    ``partition.steps.StepRecorder``) and the sampled peak of anonymous memory."""

    def __init__(self) -> None:
        self._rec = StepRecorder()
        self.steps: list[dict[str, Any]] = []

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        with own_meter("RssAnon").polling(0.2) as anon:
            with self._rec(name):
                yield
        s = self._rec.steps[-1]
        self.steps.append({"name": name, "seconds": s.seconds, "rss_peak_mib": s.peak_rss_bytes / MIB,
                           "anon_peak_mib": anon.largest() / MIB})

    @property
    def last(self) -> dict[str, Any]:
        return self.steps[-1]


def _partition(graph: Graph, cfg: RunConfig, k: int, meter: Meter) -> PartitionSet:
    """Build (or reuse) the set; its step reports the set's own steps' peaks too (they
    reset the process peak), and a reused set the time and peak recorded when it was built."""
    with meter(f"partition k={k}"):
        pset = build_partition_set(graph, with_k(cfg, k).partition)
    inner = pset.meta.steps
    built = {"seconds": sum(s.seconds for s in inner),
             "rss_peak_mib": max(s.peak_rss_bytes for s in inner) / MIB}
    if pset.reused:
        meter.last["reused"] = True
        meter.last["when_built"] = built
    else:
        meter.last["rss_peak_mib"] = max(meter.last["rss_peak_mib"], built["rss_peak_mib"])
    return pset


def measure_size(cfg: RunConfig, ks: list[int], verify_nodes: int,
                 con: Console) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Generate one graph and partition it at every k (the graph is then dropped), then
    simulate every k; sizes up to ``verify_nodes`` also run ``simulate_k`` itself."""
    if not isinstance(cfg.dataset, SyntheticDataset):
        raise ValueError(f"dataset.source={cfg.dataset.source!r}: bench.scale generates its graphs (synthetic)")
    syn = cfg.dataset.synthetic
    meter = Meter()
    with meter("generate"):
        graph = generate(syn, name=cfg.dataset.name)
    size: dict[str, Any] = {
        "nodes": graph.num_nodes, "edges": graph.num_edges,
        "mean_degree": graph.num_edges / graph.num_nodes, "max_degree": int(graph.in_degrees().max()),
        "train_frac": syn.train_frac, "train_nodes": int(graph.train_idx.size),
        "graph_mib": (graph.indptr.nbytes + graph.indices.nbytes + graph.x.nbytes) / MIB,
        "single_seed_inputs": single_seed_inputs(graph, cfg)}
    con.print(f"n={graph.num_nodes:,}: {graph.num_edges:,} edges (mean degree "
              f"{size['mean_degree']:.2f}), {size['train_nodes']:,} training nodes; generated in "
              f"{meter.last['seconds']:.0f} s, peak {meter.last['rss_peak_mib']:.0f} MiB", highlight=False)
    psets: dict[int, PartitionSet] = {}
    refs: dict[int, dict[str, Any]] = {}
    for k in ks:
        psets[k] = _partition(graph, cfg, k, meter)
        if graph.num_nodes <= verify_nodes:
            with meter(f"simulate_k k={k}"):
                refs[k] = simulate_k(cfg, graph, k)
    del graph  # the parts are memory-mapped from the sets; the graph's arrays are not needed
    gc.collect()
    rows = []
    for k in ks:
        with meter(f"simulate k={k}"):
            sim = simulate_set(with_k(cfg, k), psets[k], one_cache_at_a_time=True)
        rows.append(per_seed_row(cfg, psets[k], sim, refs.get(k), size, meter, con))
    size["steps"] = meter.steps
    size["seconds"] = sum(s["seconds"] for s in meter.steps)
    size["rss_peak_mib"] = max(s["rss_peak_mib"] for s in meter.steps)
    size["anon_peak_mib"] = max(s["anon_peak_mib"] for s in meter.steps)
    return size, rows


def per_seed_row(cfg: RunConfig, pset: PartitionSet, sim: dict[str, Any], ref: dict[str, Any] | None,
                 size: dict[str, Any], meter: Meter, con: Console) -> dict[str, Any]:
    """One simulated epoch's figures per seed (checked against ``simulate_k`` when it ran)."""
    k = pset.num_parts
    verified = None if ref is None else all(ref[f] == sim[f] for f in SAME_AS_SIMULATE_K)
    if verified is False:
        assert ref is not None
        raise RuntimeError(f"n={pset.num_nodes} k={k}: the lean simulation differs from simulate_k: "
                           + str({f: (ref[f], sim[f]) for f in SAME_AS_SIMULATE_K if ref[f] != sim[f]}))
    seeds, steps = sim["train_nodes"], sim["steps"]
    grad = sim["bytes_by_category"]["gradient"]
    nongrad_mean = sim["bytes_per_worker_mean"] - grad / k
    cached = _cached_rows(cfg, pset.num_nodes, pset.book.offsets)
    part = next(s for s in meter.steps if s["name"] == f"partition k={k}")
    row = {
        "nodes": pset.num_nodes, "edges": pset.meta.num_edges, "k": k, "seeds": seeds, "steps": steps,
        "mean_batch": seeds / (k * steps), "edge_cut": pset.meta.edge_cut_fraction,
        "per_seed": {c: sim["bytes_by_category"][c] / seeds for c in PER_SEED},
        "gradient_per_step_worker": grad / (k * steps),
        "input_nodes_per_seed": sim["input_nodes"] / seeds,
        "single_seed_inputs": size["single_seed_inputs"],
        "nongrad_imbalance": ((sim["bytes_per_worker_max"] - grad / k) / nongrad_mean
                              if nongrad_mean > 0 else 1.0),
        "cache_fill_bytes_per_row": sim["cache_setup_bytes"] / cached if cached else None,
        "verified_against_simulate_k": verified, "partition": part, "simulate": meter.last,
        "sim": sim,
    }
    built = part.get("when_built", part)
    con.print(f"  k={k}: feature {fmt_bytes(row['per_seed']['feature'])}/seed, sample "
              f"{fmt_bytes(row['per_seed']['sample'])}/seed, remote inputs "
              f"{100 * sim['remote_input_share']:.1f}%; partition {built['seconds']:.0f} s"
              f"{' (stored set, time of its build)' if 'when_built' in part else ''}, simulate "
              f"{meter.last['seconds']:.0f} s, peak RSS {meter.last['rss_peak_mib']:.0f} MiB "
              f"(anonymous {meter.last['anon_peak_mib']:.0f} MiB)"
              + ("" if verified is None else "; same bytes as simulate_k"), highlight=False)
    return row


def _cached_rows(cfg: RunConfig, nodes: int, offsets: np.ndarray) -> int:
    """Rows all workers' caches hold (``sampler.cache.size`` as a fraction of remote rows)."""
    cc = cfg.sampler.cache
    if isinstance(cc.size, dict):
        raise ValueError(f"sampler.cache.size={cc.size!r}: a per-type mapping is for typed graphs; "
                         "bench.scale simulates untyped ones (give one fraction)")
    size = float(cc.size)
    if cc.policy == "none" or size > 1 or len(offsets) <= 2:
        return 0
    owned = np.diff(np.asarray(offsets, dtype=np.int64))
    return int(sum(int(size * (nodes - o)) for o in owned))


# -- extrapolation ------------------------------------------------------------------------
def extrapolate(rows: list[dict[str, Any]], cfg: RunConfig, target: Target = PAPERS) -> list[dict[str, Any]]:
    """Per k: the fit of every per-seed category, and target's per-epoch bytes from it
    (``fit``), from the largest measured n (``largest``), and from the largest n with no
    seed of a batch sharing a sampled node (``limit``: its per-seed bytes times the
    single-seed inputs over its inputs per seed)."""
    out = []
    batch = cfg.sampler.batch_size
    for k in sorted({r["k"] for r in rows}):
        rk = sorted((r for r in rows if r["k"] == k), key=lambda r: r["nodes"])
        ns = [r["nodes"] for r in rk]
        fits = {c: fit_log(ns, [r["per_seed"][c] for r in rk]) for c in PER_SEED}
        steps = target.steps(k, batch)
        grad_step = rk[-1]["gradient_per_step_worker"]
        gradient = grad_step * k * steps
        est: dict[str, Any] = {}
        last = rk[-1]
        overlap = last["single_seed_inputs"] / last["input_nodes_per_seed"]
        for how, per_seed in (("fit", {c: fits[c](target.nodes) for c in PER_SEED}),
                              ("largest", dict(last["per_seed"])),
                              ("limit", {c: v * overlap for c, v in last["per_seed"].items()})):
            by_cat = {c: per_seed[c] * target.train_nodes for c in PER_SEED}
            by_cat["gradient"] = gradient
            total = sum(by_cat.values())
            nongrad_worker = (total - gradient) / k
            est[how] = {"per_seed": per_seed, "bytes_by_category": by_cat, "bytes_total": total,
                        "per_worker_mean": total / k,
                        "per_worker_max": nongrad_worker * rk[-1]["nongrad_imbalance"] + gradient / k}
        cached = k * int(cfg.sampler.cache.size * (target.nodes - target.nodes / k))
        fill = rk[-1]["cache_fill_bytes_per_row"]
        out.append({"k": k, "sizes": ns, "largest_n": ns[-1], "steps": steps,
                    "mean_batch": target.train_nodes / (k * steps), "seeds": target.train_nodes,
                    "gradient_per_step_worker": grad_step,
                    "nongrad_imbalance": rk[-1]["nongrad_imbalance"], "overlap_factor": overlap,
                    "fits": {c: asdict(f) for c, f in fits.items()}, **est,
                    "cache_fill_once": cached * fill if fill is not None else None})
    return out


# -- output ---------------------------------------------------------------------------------
def _nodes(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n:,}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def print_measured(rows: list[dict[str, Any]], con: Console) -> None:
    t = Table(title="measured: one simulated epoch per (n, k); bytes per training seed, epoch bytes "
                    "over all workers")
    for col in ("nodes", "mean deg", "k", "seeds", "steps", "batch", "edge cut", "remote in",
                "cache hit", "in/seed", "1-seed in", "sample/seed", "feature/seed", "gradient",
                "total", "worker max", "max/mean", "sim s", "RSS MiB", "anon MiB"):
        t.add_column(col, justify="right")
    for r in rows:
        s = r["sim"]
        t.add_row(_nodes(r["nodes"]), f"{r['edges'] / r['nodes']:.2f}", str(r["k"]), f"{r['seeds']:,}",
                  str(r["steps"]), f"{r['mean_batch']:.0f}", _pct(r["edge_cut"]),
                  _pct(s["remote_input_share"]), _pct(s["cache_hit_rate"]),
                  f"{r['input_nodes_per_seed']:.0f}", f"{r['single_seed_inputs']:.0f}",
                  fmt_bytes(r["per_seed"]["sample"]), fmt_bytes(r["per_seed"]["feature"]),
                  fmt_bytes(s["bytes_by_category"]["gradient"]), fmt_bytes(s["bytes_total"]),
                  fmt_bytes(s["bytes_per_worker_max"]), f"{s['imbalance_bytes']:.3f}",
                  f"{r['simulate']['seconds']:.0f}", f"{r['simulate']['rss_peak_mib']:.0f}",
                  f"{r['simulate']['anon_peak_mib']:.0f}")
    con.print(t)
    if any(r["per_seed"]["control"] for r in rows):
        con.print("  control bytes per seed: " + ", ".join(
            f"n={r['nodes']:,} k={r['k']}: {r['per_seed']['control']:.1f} B" for r in rows), highlight=False)
    else:
        con.print("  control: 0 B in every row (the simulator has no coordinator calls; a real run adds "
                  "its per-step control messages)", highlight=False)
    con.print("  in/seed = distinct input nodes per seed (batched); 1-seed in = inputs of a batch of one "
              "seed on the whole graph (no sharing between seeds); worker max = bytes sent by the "
              "busiest worker; RSS = peak resident memory of the simulation step, including the touched "
              "pages of the memory-mapped partition files; anon = its anonymous part (sampled every "
              "0.2 s), what has to fit", highlight=False)


def print_fits(ext: list[dict[str, Any]], target: Target, con: Console) -> None:
    t = Table(title=f"fit per k: bytes per seed = a + b ln n, evaluated at n = {target.nodes:,}")
    for col in ("k", "category", "a", "b (per doubling of n)", "max residual", "at largest n",
                f"at {target.nodes / 1e6:.0f}M (fit)"):
        t.add_column(col, justify="right")
    for e in ext:
        for c in ("sample", "feature"):
            f = e["fits"][c]
            t.add_row(str(e["k"]), c, f"{f['a']:.1f}", f"{f['b'] * math.log(2):+.2f} B",
                      f"{100 * f['max_rel_residual']:.2f}%", fmt_bytes(e["largest"]["per_seed"][c]),
                      fmt_bytes(e["fit"]["per_seed"][c]))
    con.print(t)


def print_target(ext: list[dict[str, Any]], target: Target, con: Console) -> None:
    t = Table(title=f"{target.name} extrapolated: {target.nodes:,} nodes, {target.train_nodes:,} "
                    f"training seeds per epoch (bytes per epoch, all workers, unless per worker)")
    for col in ("k", "steps", "estimate", "sample", "feature", "control", "gradient", "total",
                "per worker mean", "per worker max", "cache fill (once)"):
        t.add_column(col, justify="right")
    for e in ext:
        for how, label in (("fit", f"fit at {target.nodes / 1e6:.0f}M"),
                           ("largest", f"as n={e['largest_n'] / 1e6:g}M"),
                           ("limit", f"no overlap (x{e['overlap_factor']:.2f})")):
            x = e[how]
            t.add_row(str(e["k"]), str(e["steps"]), label,
                      *(fmt_bytes(x["bytes_by_category"][c]) for c in CATEGORIES),
                      fmt_bytes(x["bytes_total"]), fmt_bytes(x["per_worker_mean"]),
                      fmt_bytes(x["per_worker_max"]),
                      fmt_bytes(e["cache_fill_once"]) if how == "fit" else "")
    con.print(t)
    con.print("  range: 'fit' extrapolates a + b ln n to 111M; 'as n=...' keeps the per-seed bytes of "
              "the largest measured graph (no growth past it); 'no overlap' scales those by the "
              "inputs of a one-seed batch over the inputs per seed measured (no two seeds of a batch "
              "share a sampled node; remote share and cache hit rate held at the largest n's, which "
              "errs high: the upper end). gradient = steps x k x ring all-reduce bytes per worker and step (2(k-1)/k x "
              "the model's float32 gradient), the same in all. per worker max uses the non-gradient "
              "bytes' max/mean of the largest graph; cache fill is once per run.", highlight=False)


def print_sizes(sizes: list[dict[str, Any]], con: Console) -> None:
    t = Table(title="time and memory of every step (peak RSS includes the touched pages of the "
                    "memory-mapped partition files; anonymous memory is what has to fit)")
    for col in ("nodes", "step", "seconds", "peak RSS MiB", "peak anon MiB", "note"):
        t.add_column(col, justify="right")
    for s in sizes:
        for st in s["steps"]:
            b = st.get("when_built")
            t.add_row(_nodes(s["nodes"]), st["name"], f"{st['seconds']:.0f}", f"{st['rss_peak_mib']:.0f}",
                      f"{st['anon_peak_mib']:.0f}",
                      f"stored set; its build took {b['seconds']:.0f} s, peak RSS {b['rss_peak_mib']:.0f} MiB"
                      if b else "")
        t.add_row(_nodes(s["nodes"]), "all", f"{s['seconds']:.0f}", f"{s['rss_peak_mib']:.0f}",
                  f"{s['anon_peak_mib']:.0f}", f"graph arrays {s['graph_mib']:.0f} MiB", end_section=True)
    con.print(t)


# -- entry point --------------------------------------------------------------------------------
def _ints(text: str, flag: str, least: int) -> list[int]:
    try:
        vals = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        vals = []
    if not vals or vals[0] < least:
        raise ConfigError(f"{flag}={text!r}: expected comma-separated integers >= {least}")
    return vals


def _measure_in_child(cfg: RunConfig, ks: list[int], verify_nodes: int) -> tuple[dict[str, Any],
                                                                               list[dict[str, Any]]]:
    """``measure_size`` in a fresh process, so no size inherits another's memory."""
    return measure_size(cfg, ks, verify_nodes, Console(width=WIDTH))


def run(sizes: list[int], ks: list[int], root: Path, share: float, con: Console, *,
        verify_nodes: int = 1_000_000, isolate: bool = True) -> dict[str, Any]:
    """Measure every (size, k), fit and extrapolate; the JSON document. With ``isolate``
    each size runs in its own process, so no size inherits another's memory."""
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    size_info = []
    cfg = scale_config(sizes[0], 0.1, root)
    for n in sizes:
        cfg = scale_config(n, train_frac_for(n, max(ks), cfg.sampler.batch_size, share), root)
        if isolate:
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
                info, size_rows = pool.submit(_measure_in_child, cfg, ks, verify_nodes).result()
        else:
            info, size_rows = measure_size(cfg, ks, verify_nodes, con)
        size_info.append(info)
        rows.extend(size_rows)
    ext = extrapolate(rows, cfg)
    con.print()
    print_measured(rows, con)
    print_fits(ext, PAPERS, con)
    print_target(ext, PAPERS, con)
    print_sizes(size_info, con)
    settings = cfg.model_dump(mode="json")
    settings.pop("dataset")
    return {"method": __doc__.split("Method. ")[1].split("\n\n")[0].replace("\n", " "),
            "target": {**asdict(PAPERS), "avg_degree": PAPERS.avg_degree},
            "settings": settings, "train_share_asked": share, "sizes": size_info,
            "rows": rows, "extrapolated": ext, "total_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="--sizes 20000,40000 --parts 2,4 (under a minute)", prog="python -m bench.scale")
    ap.add_argument("--sizes", default="1000000,4000000,10000000", help="synthetic graph sizes (nodes)")
    ap.add_argument("--parts", default="16,64", help="worker counts k")
    ap.add_argument("--json", type=Path, default=None, help="where the figures go (tables: same name, .txt)")
    ap.add_argument("--root", type=Path, default=OUT / "partitions", help="partition sets (cached by hash)")
    ap.add_argument("--train-share", type=float, default=0.1,
                    help="training share before rounding to whole batches per worker")
    ap.add_argument("--verify-nodes", type=int, default=1_000_000,
                    help="sizes up to this also run simulate_k itself and must give the same bytes")
    ap.add_argument("--in-process", action="store_true",
                    help="measure every size in this process (default: a fresh process per size)")
    args = ap.parse_args(argv)
    con = Console(width=WIDTH, record=True)
    try:
        sizes = [20_000, 40_000] if args.smoke else _ints(args.sizes, "--sizes", 1000)
        ks = [2, 4] if args.smoke else _ints(args.parts, "--parts", 2)
        if not 0 < args.train_share < 1:
            raise ConfigError(f"--train-share={args.train_share}: expected a share in (0, 1)")
    except ConfigError as e:
        con.print(f"[red]error:[/red] {e}")
        return 2
    path = args.json or OUT / ("scale-smoke.json" if args.smoke else "scale.json")
    out = run(sizes, ks, args.root, args.train_share, con, verify_nodes=args.verify_nodes,
              isolate=not (args.in_process or args.smoke))
    out["argv"] = sys.argv[1:] if argv is None else argv
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=str) + "\n")
    con.print(f"wrote {path}")
    path.with_suffix(".txt").write_text(con.export_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())

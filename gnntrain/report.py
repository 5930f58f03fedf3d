"""The run report a user reads: the final summary table and the PNG plots.

``python -m gnntrain.report RUN_DIR [RUN_DIR ...]`` re-renders them from the files a
run wrote (``metrics.jsonl``, ``comm.json``, ``summary.json``, ``partition.json``): a run
with ``train.plots: false`` drew none itself. With two or more run directories it prints
them side by side (e.g. METIS vs random, cache on vs off).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gnntrain import __version__
from gnntrain.runtime.comm import CATEGORIES


def fmt_bytes(n: float | None) -> str:
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def _pct(v: Any) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.2f}%"


def build_summary(cfg_raw: dict[str, Any], epochs: list[dict[str, Any]], *, workers: int,
                  partition: dict[str, Any] | None, cache: list[dict[str, Any]] | None,
                  failures: list[dict[str, Any]] | None = None, metric: str = "acc") -> dict[str, Any]:
    """The figures of a finished run, as written to ``summary.json``; ``metric`` is the
    task's headline metric (higher is better), reported per split."""
    last = epochs[-1] if epochs else {}
    evals = [e for e in epochs if f"test_{metric}" in e]
    best = max(evals, key=lambda e: e.get(f"val_{metric}", 0.0)) if evals else {}
    n = max(1, len(epochs))
    time_split = {k: sum(e["time"][k] for e in epochs) / n for k in
                  ("sample_s", "fetch_s", "compute_s", "sync_s", "wait_s", "total_s")} if epochs else {}
    if time_split:
        busy = time_split["compute_s"] + time_split["sync_s"] + time_split["wait_s"]
        time_split["idle_s"] = max(0.0, sum(e["epoch_s"] for e in epochs) / n - busy)
    by_cat = {c: sum(e["comm"]["by_category"][c] for e in epochs) / n for c in CATEGORIES} if epochs else {}
    ev_comm = [e["eval_comm"] for e in epochs if "eval_comm" in e]
    by_cat_eval = ({c: sum(x["by_category"][c] for x in ev_comm) / len(ev_comm) for c in CATEGORIES}
                   if ev_comm else {})
    part = partition or {}
    typed = [e["comm"]["by_node_type"] for e in epochs if "by_node_type" in e["comm"]]
    by_type = ({c: {t: sum(x[c][t] for x in typed) / n for t in typed[0][c]} for c in typed[0]}
               if typed else {})
    return {
        "version": __version__,  # of the gnntrain that trained the run
        "dataset": cfg_raw.get("dataset", {}).get("name"),
        "workers": workers,
        "partition_method": cfg_raw.get("partition", {}).get("method"),
        "epochs": len(epochs),
        "metric": metric,
        "final": {k: last.get(k) for k in ("loss", f"train_{metric}", f"val_{metric}", f"test_{metric}")},
        "best_val": {k: best.get(k) for k in ("epoch", f"val_{metric}", f"test_{metric}")},
        "stopped_early": last.get("stopped_early"),  # train.patience ran out: {patience, best}
        "epoch_s_mean": sum(e["epoch_s"] for e in epochs) / n if epochs else None,
        "time_split_mean_s": time_split,
        "bytes_per_epoch_by_category": by_cat,
        "bytes_per_epoch_total": sum(by_cat.values()) if by_cat else 0,
        "bytes_per_evaluation_by_category": by_cat_eval,
        "bytes_per_epoch_by_node_type": by_type,
        "remote_input_share": last.get("remote_input_share"),
        "remote_frontier_share": last.get("remote_frontier_share"),
        "cache_hit_rate": last.get("cache_hit_rate"),
        "feature_bytes_saved_by_cache_per_epoch": (sum(e.get("feature_bytes_saved_by_cache", 0) for e in epochs) / n
                                                   if epochs else 0),
        "cache": cache or [],
        "edge_cut_fraction": part.get("edge_cut_fraction"),
        "failures": failures or [],
    }


def print_summary(summary: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    t = Table(title=f"gnntrain run: {summary['dataset']} on {summary['workers']} worker(s)",
              show_header=False)
    t.add_column("what", style="bold")
    t.add_column("value")
    fin, m = summary["final"], summary.get("metric", "acc")
    t.add_row(f"test / val {m} (final)", f"{_pct(fin.get(f'test_{m}'))} / {_pct(fin.get(f'val_{m}'))}")
    bv = summary["best_val"]
    if bv.get("epoch") is not None:
        t.add_row("best val (epoch)", f"{_pct(bv.get(f'val_{m}'))} (epoch {bv['epoch']}, "
                  f"test {_pct(bv.get(f'test_{m}'))})")
    stopped = summary.get("stopped_early")
    t.add_row("epochs, mean epoch time", f"{summary['epochs']}, {summary['epoch_s_mean'] or 0:.2f} s"
              + (f" (stopped early: no better val {m} in {stopped['patience']} evaluations)" if stopped else ""))
    ts = summary["time_split_mean_s"]
    if ts:
        t.add_row("time split per epoch", " / ".join(f"{k[:-2]} {v:.2f}s" for k, v in ts.items() if k != "total_s"))
    bc = summary["bytes_per_epoch_by_category"]
    t.add_row("bytes per epoch", f"{fmt_bytes(summary['bytes_per_epoch_total'])} = "
              + ", ".join(f"{c} {fmt_bytes(v)}" for c, v in bc.items()))
    for c, per in (summary.get("bytes_per_epoch_by_node_type") or {}).items():
        t.add_row(f"{c} bytes per epoch by node type",
                  ", ".join(f"{name} {fmt_bytes(v)}" for name, v in per.items()))
    be = summary.get("bytes_per_evaluation_by_category") or {}
    if be:
        t.add_row("bytes per evaluation", f"{fmt_bytes(sum(be.values()))} = "
                  + ", ".join(f"{c} {fmt_bytes(v)}" for c, v in be.items() if v))
    t.add_row("remote share of input rows", _pct(summary.get("remote_input_share")))
    t.add_row("cache hit rate (remote rows)", _pct(summary.get("cache_hit_rate")))
    held = [c for c in summary.get("cache") or [] if c.get("capacity")]
    if held:
        t.add_row("cache rows / memory (all workers)",
                  f"{sum(c['capacity'] for c in held):,} rows in {fmt_bytes(sum(c.get('bytes', 0) for c in held))}")
    t.add_row("feature bytes saved by cache / epoch", fmt_bytes(summary.get("feature_bytes_saved_by_cache_per_epoch")))
    if summary.get("edge_cut_fraction") is not None:
        t.add_row(f"partition ({summary['partition_method']}) edge cut", _pct(summary["edge_cut_fraction"]))
    if summary.get("failures"):
        t.add_row("worker failures recovered", str(len(summary["failures"])))
    for f in summary.get("failures") or []:
        for m in f.get("moves", []):
            t.add_row(f"worker {m['rank']} moved ({m['kind']})",
                      f"part {m['part']}: node {m['from_node'][:8]} -> {m['to_node'][:8]}; nodes "
                      f"{f['nodes_before']} -> {f['nodes_after']}; epochs redone {f['epochs_redone']}; "
                      f"recovery {f.get('recovery_s', 0.0):.1f} s (waited {f['replace_wait_s']:.1f} s "
                      "for a new node)")
    console.print(t)


def write_plots(run_path: Path, epochs: list[dict[str, Any]]) -> list[Path]:
    """loss/accuracy per epoch, bytes per epoch by category, worker x worker heatmap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out: list[Path] = []
    if not epochs:
        return out
    ep = [e["epoch"] for e in epochs]
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    ax[0].plot(ep, [e["loss"] for e in epochs], marker="o")
    ax[0].set(title="training loss", xlabel="epoch")
    metric_keys = sorted({k for e in epochs for k in e
                          if k.split("_", 1)[0] in ("train", "val", "test")
                          and not k.endswith("_batches") and isinstance(e[k], float)})
    for k in metric_keys:
        pts = [(e["epoch"], e[k]) for e in epochs if k in e]
        ax[1].plot(*zip(*pts, strict=True), marker="o", label=k)
    ax[1].set(title="evaluation", xlabel="epoch")
    if metric_keys:
        ax[1].legend()
    for a in ax:
        a.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    out.append(run_path / "accuracy.png")
    fig.savefig(out[-1], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3.5))
    bottom = [0.0] * len(epochs)
    for c in CATEGORIES:
        vals = [e["comm"]["by_category"][c] / 2**20 for e in epochs]
        ax.bar(ep, vals, bottom=bottom, label=c)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set(title="bytes sent per epoch (MiB)", xlabel="epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)  # beside the bars
    fig.tight_layout()
    out.append(run_path / "bytes.png")
    fig.savefig(out[-1], dpi=100)
    plt.close(fig)

    import numpy as np

    mat = np.sum([np.asarray(e["comm"]["matrix"], dtype=float) for e in epochs], axis=0) / len(epochs)
    fig, ax = plt.subplots(figsize=(4.5, 4))
    mib = mat / 2**20
    im = ax.imshow(mib, cmap="viridis")
    ax.set(title="MiB per epoch, sender -> receiver", xlabel="receiver (worker)", ylabel="sender (worker)")
    ticks = list(range(mib.shape[0]))
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    if mib.shape[0] <= 16:  # values in the cells while they stay readable
        mid = (mib.max() + mib.min()) / 2
        for i in ticks:
            for j in ticks:
                ax.text(j, i, f"{mib[i, j]:.3g}", ha="center", va="center", fontsize=8,
                        color="black" if mib[i, j] > mid else "white")
    fig.colorbar(im)
    fig.tight_layout()
    out.append(run_path / "heatmap.png")
    fig.savefig(out[-1], dpi=100)
    plt.close(fig)
    return out


def load_run(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary = json.loads((path / "summary.json").read_text())
    epochs = [json.loads(ln) for ln in (path / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    return summary, epochs


def compare(runs: list[tuple[str, dict[str, Any]]], console: Console | None = None) -> None:
    console = console or Console()
    t = Table(title="runs side by side")
    t.add_column("figure", style="bold")
    for name, _ in runs:
        t.add_column(name)
    rows: list[tuple[str, Any]] = [
        ("workers", lambda s: str(s["workers"])),
        ("partition", lambda s: str(s["partition_method"])),
        ("test metric", lambda s: f"{s.get('metric', 'acc')} "
                                  f"{_pct(s['final'].get('test_' + s.get('metric', 'acc')))}"),
        ("epoch time", lambda s: f"{s['epoch_s_mean'] or 0:.2f} s"),
        ("bytes / epoch", lambda s: fmt_bytes(s["bytes_per_epoch_total"])),
        ("feature bytes / epoch", lambda s: fmt_bytes(s["bytes_per_epoch_by_category"].get("feature"))),
        ("cache hit rate", lambda s: _pct(s.get("cache_hit_rate"))),
        ("edge cut", lambda s: _pct(s.get("edge_cut_fraction"))),
    ]
    for label, fn in rows:
        t.add_row(label, *[fn(s) for _, s in runs])
    console.print(t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gnntrain.report", description=__doc__)
    ap.add_argument("runs", nargs="+", type=Path, help="run directories")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    loaded = []
    for p in args.runs:
        if not (p / "summary.json").is_file():
            ap.error(f"{p}: not a finished run directory (no summary.json)")
        summary, epochs = load_run(p)
        loaded.append((p.name, summary))
        if len(args.runs) == 1:
            print_summary(summary)
        if not args.no_plots:
            write_plots(p, epochs)
            if (p / "partition.json").is_file():  # a distributed run's
                from partition.report import read_report

                part_report, others = read_report(p / "partition.json")
                part_report.plot(p / "partition.png", compare=others)
    if len(loaded) > 1:
        compare(loaded)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

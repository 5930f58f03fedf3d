"""Terminal tables (rich) and the PNG (matplotlib) of a :class:`~partition.report.PartitionReport`.

Kept apart from the numbers so that computing a report never imports a plotting library.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from partition.report import PartitionReport

__all__ = ["plot_report", "print_comparison", "print_report"]

_MIB = 1 << 20


def _console(console: Any) -> Any:
    if console is not None:
        return console
    from rich.console import Console
    return Console()


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def print_report(r: PartitionReport, console: Any = None) -> None:
    """Summary, per-part table with max/mean row, cut matrix (k <= 16) and build steps."""
    from rich.table import Table

    con = _console(console)
    summary = Table(title=f"partition quality: {r.graph_name} ({r.num_nodes} nodes, "
                          f"{r.num_edges} edges), method={r.method}, k={r.num_parts}")
    summary.add_column("measure")
    summary.add_column("value", justify="right")
    summary.add_row("edge cut", f"{r.edge_cut} ({_pct(r.edge_cut_fraction)})")
    summary.add_row("random baseline, measured", f"{r.random_edge_cut} ({_pct(r.random_edge_cut_fraction)})")
    summary.add_row("random baseline, expected 1-1/k", _pct(r.random_expected_fraction))
    summary.add_row("cut / random cut", f"{r.cut_vs_random:.3f}")
    if r.remote_share is not None:
        hops = ", ".join(_pct(s) for s in r.remote_share_per_hop)
        summary.add_row(f"remote sampled neighbours (est., fanouts {r.fanouts})",
                        f"{_pct(r.remote_share)}  [per hop: {hops}]")
    for m, v in r.imbalance.items():
        summary.add_row(f"imbalance {m} (max/mean)", f"{v:.3f}")
    con.print(summary)

    per_part = Table(title="per part")
    for col in ("part", "nodes", "edges", "train", "val", "test", "halo", "halo/owned", "cut in"):
        per_part.add_column(col, justify="right")
    if r.remote_share_per_part:
        per_part.add_column("remote (est.)", justify="right")
    for p, s in enumerate(r.parts):
        row = [str(p), str(s.nodes), str(s.edges), str(s.train), str(s.val), str(s.test),
               str(s.halo), f"{s.replication:.3f}", str(s.cut_edges)]
        if r.remote_share_per_part:
            row.append(_pct(r.remote_share_per_part[p]))
        per_part.add_row(*row)
    imb = r.imbalance
    last = ["max/mean", *(f"{imb[m]:.3f}" for m in ("nodes", "edges", "train", "val", "test", "halo")),
            "", ""]
    per_part.add_row(*(last + ([""] if r.remote_share_per_part else [])), style="bold")
    con.print(per_part)

    if r.num_parts <= 16 and r.num_parts > 1:
        mat = Table(title="edges into part (row) from part (column)")
        mat.add_column("")
        for q in range(r.num_parts):
            mat.add_column(str(q), justify="right")
        for p, row_vals in enumerate(r.cut_matrix):
            mat.add_row(str(p), *(str(v) for v in row_vals))
        con.print(mat)

    if r.steps:
        st = Table(title="steps")
        for col in ("step", "seconds", "CPU seconds", "peak RSS (MiB)", "RSS at start (MiB)"):
            st.add_column(col, justify="right")
        for step in r.steps:
            st.add_row(step.name, f"{step.seconds:.3f}", f"{step.cpu_seconds:.3f}",
                       f"{step.peak_rss_bytes / _MIB:.0f}", f"{step.start_rss_bytes / _MIB:.0f}")
        st.add_row("total", f"{sum(s.seconds for s in r.steps):.3f}",
                   f"{sum(s.cpu_seconds for s in r.steps):.3f}",
                   f"{max(s.peak_rss_bytes for s in r.steps) / _MIB:.0f}", "", style="bold")
        con.print(st)
    for note in r.notes:
        con.print(f"[dim]note: {note}[/dim]")


def print_comparison(reports: list[PartitionReport], console: Any = None) -> None:
    """Methods side by side (one column each)."""
    from rich.table import Table

    con = _console(console)
    t = Table(title=f"methods compared on {reports[0].graph_name}, k={reports[0].num_parts}")
    t.add_column("measure")
    for r in reports:
        t.add_column(r.method, justify="right")
    rows: list[tuple[str, Any]] = [
        ("edge cut", lambda r: f"{r.edge_cut} ({_pct(r.edge_cut_fraction)})"),
        ("cut / random cut", lambda r: f"{r.cut_vs_random:.3f}"),
        ("remote sampled (est.)", lambda r: _pct(r.remote_share)),
        ("mean replication", lambda r: f"{np.mean([p.replication for p in r.parts]):.3f}"),
        *((f"imbalance {m}", (lambda r, m=m: f"{r.imbalance[m]:.3f}"))
          for m in ("nodes", "train", "edges", "halo")),
        ("build seconds", lambda r: f"{sum(s.seconds for s in r.steps):.2f}" if r.steps else "-"),
        ("peak RSS (MiB)", lambda r: f"{max(s.peak_rss_bytes for s in r.steps) / _MIB:.0f}"
         if r.steps else "-"),
    ]
    for name, fn in rows:
        t.add_row(name, *(fn(r) for r in reports))
    con.print(t)


def plot_report(r: PartitionReport, path: Path, compare: list[PartitionReport]) -> Path:
    """Balance bars (each count / its mean, per part), cut heatmap, and cut by method."""
    from matplotlib.figure import Figure  # no pyplot: no global figure state or backend switch

    panels = 3 if compare else 2
    fig = Figure(figsize=(6 * panels, 4.5))
    axes = fig.subplots(1, panels)
    k = r.num_parts
    metrics = ("nodes", "train", "edges", "halo")
    width = 0.8 / len(metrics)
    for i, m in enumerate(metrics):
        vals = np.array([getattr(p, m) for p in r.parts], dtype=float)
        mean = vals.mean() if vals.size else 0.0
        axes[0].bar(np.arange(k) + i * width, vals / mean if mean > 0 else vals, width, label=m)
    axes[0].axhline(1.0, color="black", lw=0.8)
    axes[0].set_xticks(np.arange(k) + 0.4 - width / 2, [str(p) for p in range(k)])
    axes[0].set_xlabel("part")
    axes[0].set_ylabel("count / mean over parts")
    axes[0].set_title(f"balance ({r.method}, k={k})")
    axes[0].legend(fontsize=8, loc="lower right")

    mat = np.array(r.cut_matrix, dtype=float)
    np.fill_diagonal(mat, np.nan)
    im = axes[1].imshow(mat, cmap="viridis")
    fig.colorbar(im, ax=axes[1], label="edges")
    ticks = np.arange(0, k, max(1, k // 16))
    axes[1].set_xticks(ticks)
    axes[1].set_yticks(ticks)
    axes[1].set_xlabel("from part (source)")
    axes[1].set_ylabel("into part (destination)")
    axes[1].set_title(f"cut edges ({100 * r.edge_cut_fraction:.1f}% of all; diagonal hidden)")

    if compare:
        everyone = [r] + [c for c in compare if c.method != r.method]
        axes[2].bar([c.method for c in everyone], [c.edge_cut_fraction for c in everyone])
        axes[2].axhline(r.random_expected_fraction, color="red", ls="--", label="1 - 1/k")
        axes[2].set_ylabel("edge cut fraction")
        axes[2].set_title("edge cut by method")
        axes[2].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path

"""A finished sweep in one place: each trial's config, best metric, epochs run and why it
stopped, read from the trials' run directories; the best trial; a plot of the metric per
evaluated epoch per trial.

Written into the sweep directory (for a sweep on object storage, into a local copy and
uploaded to the sweep's prefix in the store)::

    <sweep>/
      sweep.json      # metric, mode, best trial, and every trial (the fields of SweepTrial)
      sweep.md        # the table, in Markdown
      sweep.png       # the metric per epoch, one line per trial
      runs/<trial>/   # each trial's run directory (gnntrain.load reads it)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gnntrain.rundir import metrics_in
from partition.storage import Store, is_remote, open_store

__all__ = ["Sweep", "SweepTrial", "markdown_table", "print_sweep", "summarise", "table_rows"]


@dataclass
class SweepTrial:
    """One trial: its Tune id, the values sampled for it (by dotted key), its run
    directory (its URI for a sweep on object storage), the best value of the metric, the
    epochs it ran, why it stopped, and the metric after each evaluated epoch (``[epochs
    done, value]`` pairs)."""

    trial_id: str
    config: dict[str, Any]
    run_dir: str
    best: float | None
    epochs: int
    stopped: str
    history: list[list[float]] = field(default_factory=list)


@dataclass
class Sweep:
    """A finished sweep: its directory on this machine (for a sweep on object storage, the
    local copy of its summary files) and its ``location`` (that directory, or the sweep's
    URI), the metric and mode it was judged by, every trial, the best one, the plot, and
    Tune's own ``ResultGrid`` (``results``)."""

    sweep_dir: Path
    location: str
    metric: str
    mode: str
    trials: list[SweepTrial]
    best: SweepTrial | None
    plot: Path | None
    results: Any = None

    @property
    def best_run_dir(self) -> Path | str | None:
        """The best trial's run directory (its URI for a sweep on object storage:
        :func:`gnntrain.load` reads either)."""
        if self.best is None:
            return None
        return self.best.run_dir if is_remote(self.best.run_dir) else Path(self.best.run_dir)


def _why_stopped(run: Store, records: list[dict[str, Any]], error: Any, scheduler: str) -> str:
    if error is not None:
        return f"error: {type(error).__name__}"
    if run.exists("summary.json"):
        return "early stopping (train.patience)" if records and "stopped_early" in records[-1] else "finished"
    return f"stopped by {scheduler}"


def summarise(results: Any, sweep_dir: Path, location: str, storage_options: dict[str, Any], metric: str,
              mode: str, scheduler: str) -> Sweep:
    """The :class:`Sweep` of Tune's ``ResultGrid`` ``results``, its trials' run directories
    read at ``location`` (the sweep's directory or URI; ``storage_options`` reach it);
    writes ``sweep.json``, ``sweep.md`` and ``sweep.png`` into ``sweep_dir`` and, for a
    sweep on object storage, uploads them to ``location``."""
    trials = []
    for result in results:
        trial_id = str(result.metrics.get("trial_id", "")) if result.metrics else ""
        where = f"{location}/runs/{trial_id}"
        run = open_store(where, storage_options)
        records = metrics_in(run) if trial_id else []
        history = [[int(r["epoch"]) + 1, float(r[metric])] for r in records if metric in r]
        values = [v for _, v in history]
        best = (max(values) if mode == "max" else min(values)) if values else None
        trials.append(SweepTrial(trial_id=trial_id, config=dict(result.config), run_dir=where,
                                 best=best, epochs=len(records), history=history,
                                 stopped=_why_stopped(run, records, result.error, scheduler)))
    trials.sort(key=lambda t: t.trial_id)  # in the order Tune made them, however restored
    scored = [t for t in trials if t.best is not None]
    top = (max if mode == "max" else min)(scored, key=lambda t: t.best) if scored else None  # type: ignore[arg-type, return-value]
    sweep_dir.mkdir(parents=True, exist_ok=True)
    sweep = Sweep(sweep_dir=sweep_dir, location=location, metric=metric, mode=mode, trials=trials, best=top,
                  plot=_plot(trials, sweep_dir / "sweep.png", metric), results=results)
    (sweep_dir / "sweep.json").write_text(json.dumps(
        {"metric": metric, "mode": mode, "best_trial": top.trial_id if top else None,
         "best_run_dir": top.run_dir if top else None, "trials": [asdict(t) for t in trials]}, indent=2))
    (sweep_dir / "sweep.md").write_text(markdown_table(sweep) + "\n")
    if is_remote(location):
        store = open_store(location, storage_options)
        for name in ("sweep.json", "sweep.md", "sweep.png"):
            if (sweep_dir / name).is_file():
                store.put(name, sweep_dir / name)
    return sweep


def table_rows(sweep: Sweep) -> tuple[list[str], list[list[str]]]:
    """The summary table's header and rows: trial, each swept key, best metric, epochs
    run, why stopped; the best trial marked with ``*``."""
    keys = sorted({k for t in sweep.trials for k in t.config})
    header = ["trial", *keys, f"best {sweep.metric}", "epochs", "stopped"]
    rows = []
    for t in sweep.trials:
        mark = " *" if sweep.best is not None and t is sweep.best else ""
        rows.append([t.trial_id + mark, *(_fmt(t.config.get(k)) for k in keys),
                     "-" if t.best is None else f"{t.best:.4f}", str(t.epochs), t.stopped])
    return header, rows


def markdown_table(sweep: Sweep) -> str:
    header, rows = table_rows(sweep)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if sweep.best is not None:
        lines.append(f"\nbest trial (*): {sweep.best.run_dir}")
    return "\n".join(lines)


def print_sweep(sweep: Sweep, console: Any) -> None:
    """The summary table, the best trial's run directory and the plot, on ``console``."""
    from rich.table import Table

    header, rows = table_rows(sweep)
    table = Table(title=f"sweep {sweep.location.rstrip('/').rsplit('/', 1)[-1]}: {sweep.metric} ({sweep.mode})")
    for h in header:
        table.add_column(h)
    for r in rows:
        table.add_row(*r)
    console.print(table)
    if sweep.best is not None:
        console.print(f"best trial: {sweep.best.trial_id} ({sweep.metric} {sweep.best.best:.4f}), "
                      f"run directory {sweep.best.run_dir}")
    if sweep.plot is not None:
        console.print(f"plot: {sweep.plot}")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def _plot(trials: list[SweepTrial], path: Path, metric: str) -> Path | None:
    """The metric per evaluated epoch, one line per trial (PNG); None without data."""
    if not any(t.history for t in trials):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6, 4))
    for t in trials:
        if t.history:
            xs, ys = zip(*t.history, strict=True)
            ax.plot(xs, ys, marker="o", label=f"{t.trial_id} ({t.stopped})")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel(metric)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

"""Every shipped config runs to completion: each ``datasets/*.yaml`` through the real CLI.

    python -m bench.configs                            # every config, 4 workers (hours; not in CI)
    python -m bench.configs --only cora,synthetic-tiny --epochs 2
    python -m bench.configs --smoke                    # synthetic-tiny, 2 epochs (`make bench-smoke`)

For every ``datasets/*.yaml`` (sorted; ``--only`` takes config stems) it runs, in its own
process group and with the output going straight through, what a user would type::

    python -m gnntrain.run --config datasets/X.yaml --workers 4 --no-progress
        --set train.run_root=bench/out/runs/configs/X --set partition.root=bench/out/partitions

(``--epochs N`` adds ``--set train.epochs=N``: the run is then *shortened*, a check that
the config runs, not that it completes; the report says so). Each run has a limit
(``--limit-min``, default 60): past it the process group is killed, and with it every
process ever seen in the run's tree (the embedded Ray's raylet and workers), see
``bench.smoke.run_limited``. While it runs, the tree's summed RSS is sampled twice a second.

Skipped, never silently: a config whose data is not here. Its data paths (``dataset.path``;
for a CSV source also ``edges``, ``labels``, ``features``) are resolved as the loaders resolve them
(``gnntrain.data.load.resolve_path``: ``$GNNTRAIN_DATA``, else the user's cache); the row
says ``skipped: <the missing path>``. Templates are the configs whose YAML starts with a
``# TEMPLATE`` comment (the OGB node-property sets: downloaded and prepared by the user,
absent here); they are excepted. A config with real data here (``ogbl-ddi``: a copy under
the shared datasets) is not a template.

Per config: status (``ok``, ``failed rc N``, ``timed out``, ``skipped: ...``), wall
seconds, epochs run (``summary.json``'s count, else the lines of ``metrics.jsonl``) of
those planned, the final metrics ``summary.json`` reports (loss and val / test of the
task's metric: ``acc`` for node classification, ``hits`` for link prediction), the peak
RSS of the run's process tree and the 1-minute load average before and after.

Checks (``bench.harness.verdict``; exit status 1 when one fails): every config that ran exited 0
within its limit and wrote ``summary.json`` with all its planned epochs; no Ray worker of
any run was left 30 s after it ended; every config that was skipped is a template. JSON:
bench/out/configs.json (``configs-smoke.json``); the run directories are removed unless
``--keep``.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.harness.cli import bench_parser, csv_list
from bench.harness.memory import MIB
from bench.harness.paths import DATASETS, OUT, missing_data, out_path, run_root
from bench.harness.runs import Finished, run_limited
from bench.harness.system import loadavg, machine
from bench.harness.verdict import Check, check, finish
from gnntrain.config import data_root, load_config

RUNS = run_root("configs")


@dataclass(frozen=True)
class Plan:
    """What to do with one config: run it (``missing`` empty) or skip it."""

    stem: str
    template: bool
    epochs: int  # planned: the YAML's train.epochs, or --epochs
    missing: tuple[str, ...]  # data paths, resolved, that do not exist


def is_template(path: Path) -> bool:
    """A template says so in its first line: ``# TEMPLATE: ...`` (data the user fetches)."""
    lines = path.read_text().lstrip().splitlines()
    return bool(lines) and lines[0].startswith("# TEMPLATE")


def plan(path: Path, epochs: int | None) -> Plan:
    cfg = load_config(path)
    return Plan(stem=path.stem, template=is_template(path), epochs=epochs or cfg.train.epochs,
                missing=tuple(missing_data(cfg.dataset)))


def skip_reason(p: Plan) -> str:
    what = "template, data not prepared here" if p.template else "data absent"
    return f"skipped: {what}: {', '.join(p.missing)}"


def command(stem: str, workers: int, epochs: int | None) -> list[str]:
    """The CLI line of one config's run, as a user types it (paths relative to the repo)."""
    cmd = [sys.executable, "-m", "gnntrain.run", "--config", f"datasets/{stem}.yaml",
           "--workers", str(workers), "--no-progress",
           "--set", f"train.run_root={RUNS / stem}", "--set", f"partition.root={OUT / 'partitions'}"]
    return cmd + (["--set", f"train.epochs={epochs}"] if epochs is not None else [])


def read_run(run_root: Path) -> tuple[dict[str, Any] | None, int]:
    """(summary.json of the run under ``run_root`` or None, epochs it ran)."""
    dirs = sorted(run_root.glob("*/"))
    if not dirs:
        return None, 0
    run = dirs[-1]
    metrics = run / "metrics.jsonl"
    lines = sum(1 for ln in metrics.read_text().splitlines() if ln.strip()) if metrics.is_file() else 0
    summary = run / "summary.json"
    if not summary.is_file():
        return None, lines
    s = json.loads(summary.read_text())
    return s, int(s.get("epochs", lines))


def row(p: Plan, done: Finished | None, summary: dict[str, Any] | None, epochs_run: int, limit_s: float,
        load: tuple[float, float]) -> dict[str, Any]:
    """One report row from a run's outcome and its summary.json (``done`` None: skipped)."""
    if done is None:
        return {"config": p.stem, "template": p.template, "status": skip_reason(p), "missing": list(p.missing)}
    status = ("ok" if done.rc == 0 else f"timed out (over {limit_s / 60:g} min)" if done.rc is None
              else f"failed rc {done.rc}")
    metric = (summary or {}).get("metric")
    final = (summary or {}).get("final") or {}
    return {"config": p.stem, "template": p.template, "status": status, "rc": done.rc,
            "wall_s": round(done.seconds, 1), "epochs": epochs_run, "epochs_planned": p.epochs,
            "summary": summary is not None, "metric": metric, "loss": final.get("loss"),
            "val": final.get(f"val_{metric}"), "test": final.get(f"test_{metric}"),
            "peak_rss_mib": round(done.peak_rss / MIB), "workers_seen": done.workers, "workers_left": done.left,
            "loadavg_before": load[0], "loadavg_after": load[1]}


def checks(rows: list[dict[str, Any]]) -> list[Check]:
    ran = [r for r in rows if "rc" in r]
    bad = [f"{r['config']} ({r['status']}, summary {'written' if r['summary'] else 'missing'}, "
           f"{r['epochs']}/{r['epochs_planned']} epochs)" for r in ran
           if not (r["rc"] == 0 and r["summary"] and r["epochs"] == r["epochs_planned"])]
    left = [f"{r['config']}: {r['workers_left']}" for r in ran if r["workers_left"]]
    skipped = [r["config"] for r in rows if "rc" not in r and not r["template"]]
    return [
        check(f"every config that ran ({len(ran)}) exits 0 within its limit and writes summary.json "
              "with all its planned epochs", ran != [] and not bad,
              "; ".join(bad) or ("none ran" if not ran else f"{len(ran)} ok")),
        check("no Ray worker left 30 s after any run", not left, "; ".join(left) or "none left"),
        check("only templates are skipped (every other config's data is here)", not skipped,
              f"data absent for {', '.join(skipped)}" if skipped else "yes"),
    ]


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    return f"{100 * v:.1f}%" if pct else f"{v:.3f}"


def table(rows: list[dict[str, Any]], workers: int, shortened: int | None) -> Table:
    title = (f"shipped configs, {workers} workers" +
             (f", SHORTENED to {shortened} epochs (a check that each runs, not a completion claim)"
              if shortened else ", full runs"))
    t = Table(title=title)
    for col in ("config", "status", "wall s", "epochs", "metric", "loss", "val", "test",
                "peak RSS MiB", "load before -> after"):
        t.add_column(col, justify="left" if col in ("config", "status", "metric") else "right")
    for r in rows:
        if "rc" not in r:
            t.add_row(r["config"], r["status"], *["-"] * 8)
            continue
        t.add_row(r["config"], r["status"], f"{r['wall_s']:.0f}", f"{r['epochs']}/{r['epochs_planned']}",
                  r["metric"] or "-", _fmt(r["loss"]), _fmt(r["val"], True), _fmt(r["test"], True),
                  f"{r['peak_rss_mib']:,}", f"{r['loadavg_before']} -> {r['loadavg_after']}")
    return t


def run_one(p: Plan, workers: int, epochs: int | None, limit_s: float, keep: bool) -> dict[str, Any]:
    if p.missing:
        print(f"\n===== {p.stem}: {skip_reason(p)} =====", flush=True)
        return row(p, None, None, 0, limit_s, (0.0, 0.0))
    cmd = command(p.stem, workers, epochs)
    print(f"\n===== {' '.join(cmd[1:])} =====", flush=True)
    shutil.rmtree(RUNS / p.stem, ignore_errors=True)
    load0 = loadavg()
    done = run_limited(cmd, limit_s, sample_s=0.5)
    summary, epochs_run = read_run(RUNS / p.stem)
    r = row(p, done, summary, epochs_run, limit_s, (load0, loadavg()))
    if keep and summary is not None:
        r["run_dir"] = summary.get("run_dir")
    else:
        shutil.rmtree(RUNS / p.stem, ignore_errors=True)
    return r


def main(argv: list[str] | None = None) -> int:
    ap = bench_parser(__doc__, smoke="synthetic-tiny only, 2 epochs")
    stems = [p.stem for p in sorted(DATASETS.glob("*.yaml"))]
    ap.add_argument("--only", default=None, help="comma-separated config stems (default: all)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=None,
                    help="train N epochs instead of each config's own (a shortened run)")
    ap.add_argument("--limit-min", type=float, default=60.0, help="minutes allowed per config")
    ap.add_argument("--keep", action="store_true", help="keep the run directories under bench/out/runs/configs")
    args = ap.parse_args(argv)
    if args.smoke:
        args.only, args.epochs, args.limit_min = "synthetic-tiny", 2, min(args.limit_min, 10.0)
    names = stems if args.only is None else csv_list(args.only)
    unknown = [n for n in names if n not in stems]
    if unknown:
        ap.error(f"--only: unknown config(s) {unknown}; known: {', '.join(stems)}")
    if args.workers < 1 or (args.epochs is not None and args.epochs < 1) or args.limit_min <= 0:
        ap.error(f"--workers {args.workers}, --epochs {args.epochs}, --limit-min {args.limit_min}: "
                 "all must be positive")
    info = machine()
    rows = [run_one(plan(DATASETS / f"{n}.yaml", args.epochs), args.workers, args.epochs,
                    args.limit_min * 60, args.keep) for n in names]
    Console(width=max(Console().width, 150)).print(table(rows, args.workers, args.epochs))
    if args.epochs is not None:
        print(f"shortened: every run trained {args.epochs} epochs (--epochs), not its config's own; "
              "this checks that the configs run, not that they complete")
    out: dict[str, Any] = {"machine": info, "workers": args.workers, "epochs_override": args.epochs,
                           "shortened": args.epochs is not None, "limit_min": args.limit_min,
                           "data_root": str(data_root()), "rows": rows}
    return finish("configs", checks(rows), out, out_path("configs", smoke=args.smoke))


if __name__ == "__main__":
    raise SystemExit(main())

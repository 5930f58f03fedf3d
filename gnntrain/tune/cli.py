"""``python -m gnntrain.tune``: a Ray Tune sweep of k-worker runs (:func:`gnntrain.tune.sweep`).

The space file maps dotted config keys to values or samplers (:mod:`gnntrain.tune.space`)::

    # space.yaml
    train.lr: {loguniform: [1.0e-3, 1.0e-1]}
    model.hidden: {choice: [16, 32, 64]}

Examples::

    python -m gnntrain.tune --config datasets/cora.yaml --space space.yaml --workers-per-trial 2 --samples 8
    python -m gnntrain.tune --config datasets/cora.yaml --space space.yaml --name lr-sweep --resume

The summary table, the best trial's run directory and the plot are printed and written
into the sweep directory (``--storage``, default ``<train.run_root>/sweeps``, / ``--name``).

"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from gnntrain.config import ConfigError
from gnntrain.run import report_user_error
from gnntrain.tune.space import read_space
from gnntrain.tune.tuner import SCHEDULERS, sweep


def build_parser() -> argparse.ArgumentParser:
    """The command line's arguments."""
    ap = argparse.ArgumentParser(prog="python -m gnntrain.tune", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, required=True, help="the run config (YAML)")
    ap.add_argument("--space", type=Path, required=True, help="the search space (YAML): config key -> sampler")
    ap.add_argument("--workers-per-trial", type=int, default=1, help="workers (= parts) of each trial")
    ap.add_argument("--samples", type=int, default=1, help="trials (per grid point)")
    ap.add_argument("--scheduler", choices=SCHEDULERS, default="asha", help="what ends poor trials early")
    ap.add_argument("--metric", default=None, help="the metric judged (default val_<task metric>)")
    ap.add_argument("--mode", choices=("max", "min"), default="max")
    ap.add_argument("--grace-period", type=int, default=1, help="evaluations before a trial may be stopped")
    ap.add_argument("--cpus-per-worker", type=float, default=None, help="CPUs of each worker (fractions allowed)")
    ap.add_argument("--coordinator-cpus", type=float, default=0.5, help="CPUs of each trial's coordinator")
    ap.add_argument("--max-concurrent", type=int, default=None, help="trials running at once (default: as fit)")
    ap.add_argument("--storage", default=None,
                    help="where sweep directories go: a directory or an object-store URI (s3://bucket/sweeps)")
    ap.add_argument("--name", default=None, help="the sweep directory's name (needed by --resume)")
    ap.add_argument("--resume", action="store_true", help="continue the sweep --name after its driver died")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a config value of every trial (repeatable)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console(stderr=True)
    try:
        from gnntrain.api import resolve_config

        cfg, _ = resolve_config(args.config, args.overrides)
        result = sweep(cfg, read_space(args.space), workers_per_trial=args.workers_per_trial,
                     num_samples=args.samples, scheduler=args.scheduler, metric=args.metric, mode=args.mode,
                     storage=args.storage, name=args.name, cpus_per_worker=args.cpus_per_worker,
                     coordinator_cpus=args.coordinator_cpus, grace_period=args.grace_period,
                     max_concurrent_trials=args.max_concurrent, resume=args.resume, verbose=1, console=console)
    except (ConfigError, FileNotFoundError) as e:
        return report_user_error(console, e)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]: rerun with --name NAME --resume to continue the sweep")
        return 130
    console.print(f"sweep directory: {result.location}")
    return 0


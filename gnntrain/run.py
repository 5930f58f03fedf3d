"""``python -m gnntrain.run``: load -> partition -> start workers -> train -> report.

A thin shell over the Python API: the same :func:`gnntrain.api.resolve_config` and
:func:`gnntrain.api.train` that :func:`gnntrain.fit` runs.

Examples::

    python -m gnntrain.run --config datasets/synthetic-tiny.yaml            # Ray embedded
    python -m gnntrain.run --config datasets/cora.yaml --workers 4 --set train.epochs=3
    python -m gnntrain.run --config datasets/cora.yaml --single-process     # reference loop
    python -m gnntrain.run --config datasets/cora.yaml --workers 2 --address auto  # on a cluster
    python -m gnntrain.run --resume runs/cora-20261130-081500                # after a crash
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from gnntrain import api
from gnntrain.config import ConfigError, RunConfig
from gnntrain.rundir import RunDir

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "datasets" / "synthetic-tiny.yaml"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m gnntrain.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=None,
                    help=f"dataset config YAML (default: {DEFAULT_CONFIG.relative_to(DEFAULT_CONFIG.parent.parent)})")
    ap.add_argument("--workers", type=int, default=None, help="number of workers = parts (cluster.workers)")
    ap.add_argument("--single-process", action="store_true",
                    help="run the single-process reference trainer (no Ray, no partitioning)")
    ap.add_argument("--address", default=None, help="Ray cluster address ('auto', HOST:PORT); default: embedded")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override one config value, e.g. --set train.epochs=3 (repeatable)")
    ap.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                    help="continue a run from its last checkpoint")
    ap.add_argument("--run-dir", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ap.parse_args(argv)


def resolve_config(args: argparse.Namespace) -> tuple[RunConfig, RunDir | None]:
    """The config of this run, validated before any data is read or Ray starts
    (:func:`gnntrain.api.resolve_config`, the same as :func:`gnntrain.fit`'s)."""
    return api.resolve_config(args.config or DEFAULT_CONFIG, args.overrides, workers=args.workers,
                              address=args.address, resume=args.resume)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True)
    try:
        cfg, resumed = resolve_config(args)
    except (ConfigError, FileNotFoundError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    try:
        summary: dict[str, Any] = api.train(
            cfg, single_process=args.single_process, resume=resumed, run_dir=args.run_dir,
            progress=not args.no_progress, console=console)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]: workers released")
        return 130
    except Exception as e:  # noqa: BLE001 - one clear line for the user, details in the log
        from gnntrain.data import DataError, GraphError

        if isinstance(e, ConfigError | DataError | GraphError | ValueError | FileNotFoundError):
            console.print(f"[red]error:[/red] {e}")
            return 2
        raise
    console.print(f"run directory: {summary['run_dir']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

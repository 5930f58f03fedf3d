"""``python -m gnntrain.run``: load -> partition -> start workers -> train -> report.

A thin shell over the Python API: the same :func:`gnntrain.api.resolve_config` and
:func:`gnntrain.api.train` that :func:`gnntrain.fit` runs.

Examples::

    python -m gnntrain.run --config datasets/synthetic-tiny.yaml            # Ray embedded
    python -m gnntrain.run --config datasets/cora.yaml --workers 4 --set train.epochs=3
    python -m gnntrain.run --config datasets/cora.yaml --single-process     # reference loop
    python -m gnntrain.run --config datasets/cora.yaml --workers 2 --address auto  # on a cluster
    python -m gnntrain.run --resume runs/cora-20261130-081500                # after a crash
    python -m gnntrain.run --resume s3://bucket/runs/cora-20261130-081500    # a run in a store
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from gnntrain import __version__, api
from gnntrain.config import ConfigError, RunConfig
from gnntrain.rundir import RunDir

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "datasets" / "synthetic-tiny.yaml"


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m gnntrain.run`` (the reference pages are generated from it)."""
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
    ap.add_argument("--resume", default=None, metavar="RUN_DIR",
                    help="continue a run from its last checkpoint: its directory, or its URI in an "
                    "object store (s3://bucket/runs/NAME; the store's options from --set "
                    "train.storage_options=...)")
    ap.add_argument("--run-dir", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    ap.add_argument("--version", action="version", version=f"gnntrain {__version__}",
                    help="print gnntrain's version and exit")
    return ap


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def resolve_config(args: argparse.Namespace) -> tuple[RunConfig, RunDir | None]:
    """The config of this run, validated before any data is read or Ray starts
    (:func:`gnntrain.api.resolve_config`, the same as :func:`gnntrain.fit`'s)."""
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers={args.workers}: must be >= 1")
    return api.resolve_config(args.config or DEFAULT_CONFIG, args.overrides, workers=args.workers,
                              address=args.address, resume=args.resume)


def one_line(e: BaseException) -> str:
    """An error message on one line (a config error lists one field per line)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} " + "; ".join(lines[1:])
    return "; ".join(lines) or type(e).__name__


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console(stderr=True)
    try:
        cfg, resumed = resolve_config(args)
    except (ValueError, FileNotFoundError) as e:  # ConfigError; a run in a store that is damaged
        return report_user_error(console, e)
    from gnntrain.runtime.cluster import ClusterError

    try:
        summary: dict[str, Any] = api.train(
            cfg, single_process=args.single_process, resume=resumed, run_dir=args.run_dir,
            progress=not args.no_progress, console=console)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]: workers released")
        return 130
    except (ValueError, FileNotFoundError, ClusterError) as e:  # user errors (see report_user_error)
        return report_user_error(console, e)
    console.print(f"run directory: {summary['run_dir']}")
    return 0


def report_user_error(console: Console, e: BaseException) -> int:
    """Print ``error: <message>`` (one line, plus the log's path when the run wrote one); exit 2.

    Every user error is a ``ValueError`` (``ConfigError``, ``DataError``, ``GraphError``,
    ``PartitionError``, ``CheckpointError``, a worker's ``WorkerUserError``), a missing file
    or a cluster that cannot be reached;
    the full traceback is in the run directory's ``error.log``, never on the terminal.
    """
    notes = " ".join(f"({n})" for n in getattr(e, "__notes__", []))
    console.print(f"[red]error:[/red] {escape(one_line(e))}" + (f" {escape(notes)}" if notes else ""),
                  soft_wrap=True, highlight=False)
    return 2


if __name__ == "__main__":
    sys.exit(main())

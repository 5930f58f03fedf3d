"""``python -m gnntrain.run``: load -> partition -> start workers -> train -> report.

Examples::

    python -m gnntrain.run --config datasets/synthetic-tiny.yaml            # Ray embedded
    python -m gnntrain.run --config datasets/cora.yaml --workers 4 --set train.epochs=3
    python -m gnntrain.run --config datasets/cora.yaml --single-process     # reference loop
    python -m gnntrain.run --config datasets/cora.yaml --workers 2 --address auto  # on a cluster
    python -m gnntrain.run --resume runs/cora-20261130-081500                # after a crash
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from gnntrain.checkpoint import list_checkpoints
from gnntrain.config import ConfigError, RunConfig, load_config
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
    """The config of this run, validated before any data is read or Ray starts."""
    overrides = list(args.overrides)
    if args.workers is not None:
        if args.workers < 1:
            raise ConfigError(f"--workers={args.workers}: must be >= 1")
        overrides += [f"cluster.workers={args.workers}", f"partition.parts={args.workers}"]
    if args.address:
        overrides.append(f"cluster.address={args.address}")
    resumed = None
    if args.resume is not None:
        resumed = RunDir.open(args.resume)
        if not list_checkpoints(resumed):
            raise ConfigError(f"--resume {args.resume}: the run has no checkpoint to continue from "
                              f"(nothing in {resumed.path / 'checkpoints'}); start a new run instead")
        cfg = load_config(raw=resumed.read_config_raw(), overrides=overrides)
    else:
        cfg = load_config(args.config or DEFAULT_CONFIG, overrides)
    check_startable(cfg, single_process=args.single_process)
    return cfg, resumed


def check_startable(cfg: RunConfig, *, single_process: bool) -> None:
    """What can be known about this machine before Ray starts: the run root is writable;
    an embedded Ray has the CPUs and the CUDA device the config asks for."""
    root = Path(cfg.train.run_root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"train.run_root={str(root)!r}: cannot create run directories there "
                          f"({e.strerror or e}); choose a writable directory") from None
    embedded = single_process or not (cfg.cluster.address or os.environ.get("RAY_ADDRESS"))
    if not embedded:  # a cluster's CPUs and GPUs are checked when the workers are placed
        return
    if cfg.train.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("train.device='cuda' but this machine has no usable CUDA device "
                              "(torch.cuda.is_available() is False); set train.device=cpu, or "
                              "join a cluster with GPUs (--address)")
    cc = cfg.cluster
    if cc.cpus_per_worker is not None and not single_process:
        total = max(1, round(cc.num_cpus)) if cc.num_cpus else (os.cpu_count() or 1)
        need = cc.cpus_per_worker * cc.workers
        if need > total + 1e-9:
            raise ConfigError(
                f"cluster.cpus_per_worker={cc.cpus_per_worker:g} x {cc.workers} workers needs "
                f"{need:g} CPUs but the embedded Ray has {total}; lower cluster.cpus_per_worker "
                "(or leave it unset to share the CPUs), or use fewer workers")


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
    except (ConfigError, FileNotFoundError) as e:
        return _user_error(console, e)
    from gnntrain.runtime.cluster import ClusterError
    from gnntrain.runtime.coordinator import run_training

    try:
        summary: dict[str, Any] = run_training(
            cfg, single_process=args.single_process, resume=resumed, run_dir=args.run_dir,
            progress=not args.no_progress, console=console)
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]: workers released")
        return 130
    except (ValueError, FileNotFoundError, ClusterError) as e:  # user errors (see _user_error)
        return _user_error(console, e)
    console.print(f"run directory: {summary['run_dir']}")
    return 0


def _user_error(console: Console, e: BaseException) -> int:
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

"""What every benchmark shares: paths (``bench/out``, run roots, configs), the machine the
numbers were measured on, starting runs and reading them back, the one memory meter, the
correctness verdict and the spread over seeds, the DGL peer runner, and the shape of
``main``. Benchmarks import these public names from here; nothing of one benchmark module
is private to another."""

from bench.harness.cli import bench_parser, csv_list
from bench.harness.machine import loadavg, machine
from bench.harness.memory import (
    GIB,
    MIB,
    PeakMeter,
    children_peak,
    descendants_meter,
    own_meter,
    own_peak,
    polled,
    rss,
    status_kib,
    tree,
)
from bench.harness.paths import (
    BENCH,
    DATASETS,
    OUT,
    REPO,
    bench_config,
    data_paths,
    missing_data,
    out_path,
    run_root,
)
from bench.harness.peer import (
    ABSENT,
    dgl_python,
    last_json,
    peer_environ,
    run_peer,
    script,
    start_peer,
)
from bench.harness.procs import kill, wait_gone
from bench.harness.runs import Finished, drop_run, quiet, read_metrics, run_limited, timed
from bench.harness.spread import Spread, gap, spread
from bench.harness.verdict import Check, check, conclude, failed, finish

__all__ = [
    "ABSENT", "BENCH", "DATASETS", "GIB", "MIB", "OUT", "REPO", "Check", "Finished", "PeakMeter",
    "Spread", "bench_config", "data_paths", "missing_data", "bench_parser", "check", "children_peak", "conclude", "csv_list",
    "descendants_meter", "dgl_python", "drop_run", "failed", "finish", "gap", "kill",
    "last_json", "loadavg", "machine", "out_path", "own_meter", "own_peak", "peer_environ",
    "polled", "quiet", "read_metrics", "rss", "run_limited", "run_peer", "run_root", "script",
    "spread", "start_peer", "status_kib", "timed", "tree", "wait_gone",
]

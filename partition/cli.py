"""``python -m partition``: partition a dataset and print/write the quality report.

    python -m partition --config datasets/cora.yaml --parts 4
    python -m partition --config datasets/cora.yaml --parts 8 --compare metis,random,ldg
    python -m partition --config datasets/synthetic-1m.yaml --set partition.imbalance=1.03 --force

Builds (or reuses) the partition set of every method asked for, prints the report as
tables, and writes ``partition.json`` and ``partition.png`` into ``--out`` (default
``<train.run_root>/partition-<dataset>-k<k>-<timestamp>/``). Exit status 2 on a
configuration, data or partitioning error, with the message on stderr.

A chunked dataset (``dataset.source: chunks``, local or a URI) is partitioned by the Ray
pipeline (:mod:`partition.parallel`: ``random``, ``stream`` or ``multilevel``) on the running
Ray instance, or a local one, without loading the graph, and reported from the written set
alone (no remote-share estimate).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from partition.build import build_partition_set
from partition.config import METHODS, PartitionConfig
from partition.report import PartitionReport, quality_report, set_report, write_report
from partition.steps import StepRecorder
from partition.storage import is_remote
from partition.store import PartitionSet

# The one module of ``partition`` that imports upward: a thin entry point that reaches
# for the dataset loaders and the run config of ``gnntrain`` (tests/test_layering.py).


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m partition`` (the reference pages are generated from it)."""
    p = argparse.ArgumentParser(
        prog="python -m partition", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Partition a dataset's graph (or reuse its stored partition set) and print "
                    "and write the partition-quality report. A chunked dataset (source: chunks) is "
                    "partitioned by the Ray pipeline (random, stream or multilevel) without loading it.",
        epilog="examples:\n" + "\n".join(line for line in (__doc__ or "").splitlines()
                                          if line.startswith("    python")))
    p.add_argument("--config", required=True, help="dataset config (datasets/<name>.yaml)")
    p.add_argument("--parts", type=int, help="number of parts k (overrides partition.parts)")
    p.add_argument("--method", choices=METHODS, help="partitioner (overrides partition.method)")
    p.add_argument("--compare", help="comma-separated methods to put side by side, e.g. metis,random,ldg")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config value, e.g. partition.imbalance=1.03 (repeatable)")
    p.add_argument("--root", help="partition root directory (overrides partition.root)")
    p.add_argument("--out", help="directory for partition.json and partition.png")
    p.add_argument("--force", action="store_true", help="rebuild the partition set even if it exists")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    return p


def _methods(args: argparse.Namespace, default: str) -> list[str]:
    if not args.compare:
        return [default]
    methods = [m.strip() for m in args.compare.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"--compare {args.compare!r}: unknown method(s) {bad}; choose from {', '.join(METHODS)}")
    if default in methods:  # the configured method leads (its report is the main one)
        methods.remove(default)
        methods.insert(0, default)
    return list(dict.fromkeys(methods))


def run(argv: list[str] | None = None) -> list[PartitionReport]:
    """Everything ``main`` does, returning the reports (first: the configured method)."""
    from rich.console import Console

    from gnntrain.config import HETERO_SOURCES, ChunksDataset, load_config
    from gnntrain.data import load_dataset
    from partition.render import print_comparison
    from samplers.config import hop_fanouts

    args = build_parser().parse_args(argv)
    overrides = list(args.set)
    if args.parts is not None:
        overrides.append(f"partition.parts={args.parts}")
    parts = [o.partition("=")[2] for o in overrides if o.strip().startswith("partition.parts=")]
    if parts:  # the sets are for a run with one worker per part, which the config requires
        overrides.append(f"cluster.workers={parts[-1]}")
    if args.method is not None:
        overrides.append(f"partition.method={args.method}")
    cfg = load_config(args.config, overrides)
    methods = _methods(args, cfg.partition.method)
    if args.out is None and is_remote(cfg.train.run_root):
        raise ValueError(f"train.run_root={cfg.train.run_root!r} is an object-store URI and the "
                         "partition report is written to a local directory: give --out DIR")
    console = Console()
    if cfg.dataset.source in HETERO_SOURCES:  # a typed graph: typed set and per-type report
        _run_typed(cfg, args, methods, console)
        return []
    if isinstance(cfg.dataset, ChunksDataset):  # chunks: the Ray pipeline, the report from the set
        reports = _chunk_reports(cfg, args, methods, console)
    else:
        rec = StepRecorder()
        with rec("load"):
            graph = load_dataset(cfg.dataset)
        console.print(f"loaded {graph.name}: {graph.num_nodes} nodes, {graph.num_edges} edges, "
                      f"{graph.num_features} features ({rec.steps[0].seconds:.2f} s)")
        reports = []
        for method, pcfg in _each_method(cfg, methods):
            pset = build_partition_set(graph, pcfg, args.root, force=args.force)
            reports.append(quality_report(
                graph, pset.assignment(), fanouts=hop_fanouts(cfg.sampler.fanouts), replace=cfg.sampler.replace,
                method=method, num_parts=pcfg.parts, steps=rec.steps + pset.meta.steps,
                partition_path=pset.location, notes=_reuse_notes(pset)))
    reports[0].print(console)
    if len(reports) > 1:
        print_comparison(reports, console)
    out = _out_dir(args, cfg, reports[0].graph_name)
    written = write_report(reports[0], out, compare=reports[1:], plot=not args.no_plot)
    console.print("wrote " + ", ".join(str(p) for p in written.values()))
    return reports


def _out_dir(args: argparse.Namespace, cfg: Any, graph_name: str) -> Path:
    """Where the report goes: ``--out``, else a new ``partition-<graph>-k<k>-<time>`` directory
    under ``train.run_root``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(args.out) if args.out else (
        Path(cfg.train.run_root) / f"partition-{graph_name}-k{cfg.partition.parts}-{stamp}")


def _each_method(cfg: Any, methods: list[str]) -> Iterator[tuple[str, PartitionConfig]]:
    """Each method asked for, with the config's partition settings for it."""
    for method in methods:
        yield method, cfg.partition.model_copy(update={"method": method})


def _reuse_notes(pset: PartitionSet) -> list[str]:
    return [f"partition set reused from {pset.location}; its step times are from the build at "
            f"{pset.meta.created_utc} (use --force to rebuild)"] if pset.reused else []


def _chunk_reports(cfg: Any, args: argparse.Namespace, methods: list[str], console: Any) -> list[PartitionReport]:
    """``run`` for ``dataset.source: chunks``: each method's set built (or reused) by the Ray
    pipeline on the running Ray instance (a local one if none), never loading the graph, and
    reported from the set alone (:func:`~partition.report.set_report`: no remote-share estimate)."""
    from gnntrain.data.load import open_chunk_dataset
    from partition.parallel import CHUNKED_METHODS, run_chunks  # imports Ray: only for chunks

    whole = [m for m in methods if m not in CHUNKED_METHODS]
    if whole:
        raise ValueError(f"partition.method={whole[0]!r} needs the whole graph in one process; "
                         f"dataset.source='chunks' is partitioned with one of {', '.join(CHUNKED_METHODS)}")
    cg = open_chunk_dataset(cfg.dataset)
    console.print(f"opened chunks of {cg.name}: {cg.num_nodes} nodes, {cg.num_edges} edges, "
                  f"{cg.num_features} features ({cg.location})")
    reports = []
    for _, pcfg in _each_method(cfg, methods):
        pset = run_chunks(cg, pcfg, args.root, force=args.force).pset
        reports.append(set_report(pset, notes=_reuse_notes(pset)))
    return reports


def _run_typed(cfg: Any, args: argparse.Namespace, methods: list[str], console: Any) -> None:
    """``run`` for a typed dataset: build (or reuse) the typed set of each method, print the
    per-type and per-relation report of each, write them as ``partition.json``."""
    from gnntrain.data.hetero import load_hetero
    from partition.hetero_methods import hetero_quality_report
    from partition.hetero_store import build_hetero_partition_set

    graph = load_hetero(cfg.dataset)
    console.print(f"loaded {graph.name}: {graph.num_nodes} nodes, {graph.total_edges} edges in "
                  f"{len(graph.relations)} relations")
    reports = []
    for method, pcfg in _each_method(cfg, methods):
        pset = build_hetero_partition_set(graph, pcfg, args.root, force=args.force)
        rep = hetero_quality_report(graph, pset.assignment(), num_parts=pcfg.parts, method=method)
        rep.print(console)
        console.print(f"partition set {'reused from' if pset.reused else 'written to'} {pset.path}")
        reports.append(rep.model_dump(mode="json"))
    out = _out_dir(args, cfg, graph.name)
    out.mkdir(parents=True, exist_ok=True)
    (out / "partition.json").write_text(json.dumps(reports[0] if len(reports) == 1 else reports, indent=1))
    console.print(f"wrote {out / 'partition.json'}")


def main(argv: list[str] | None = None) -> int:
    try:
        run(argv)
    except ValueError as e:  # config, data and partition errors all name the field and the fix
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0

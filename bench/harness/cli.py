"""The shape of every benchmark's ``main``::

    def main(argv: list[str] | None = None) -> int:
        ap = bench_parser(__doc__, smoke="3k-node graph, tiny model (seconds)")
        ap.add_argument(...)                      # the benchmark's own flags
        args = ap.parse_args(argv)
        ...                                       # measure; collect Check values
        return finish("epoch", checks, out, out_path("epoch", smoke=args.smoke))

:func:`bench_parser` gives the description (the docstring's first paragraph) and the
common flags; :func:`bench.harness.verdict.finish` prints the verdict, writes
``bench/out/<name>[-smoke].json`` and returns the exit status (1 when a correctness check
failed)."""

from __future__ import annotations

import argparse
from pathlib import Path


def bench_parser(doc: str | None, *, smoke: str | None = None, seeds: int | None = None,
                 seeds_help: str = "seeds per row", out: Path | None = None,
                 prog: str | None = None) -> argparse.ArgumentParser:
    """An argument parser described by ``doc``'s first paragraph, with ``--smoke`` (help
    ``smoke``) when given, ``--seeds N`` (default ``seeds``) when given, and ``--out PATH``
    (default ``out``) when given."""
    ap = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n\n")[0])
    if smoke is not None:
        ap.add_argument("--smoke", action="store_true", help=smoke)
    if seeds is not None:
        ap.add_argument("--seeds", type=int, default=seeds, metavar="N", help=seeds_help)
    if out is not None:
        ap.add_argument("--out", type=Path, default=out, help="where the JSON goes")
    return ap


def csv_list(text: str) -> list[str]:
    """The non-empty, stripped items of a comma-separated flag value."""
    return [s.strip() for s in text.split(",") if s.strip()]

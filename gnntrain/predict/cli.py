"""``python -m gnntrain.predict``: the command line of :func:`~gnntrain.predict.nodes.predict`
and, with ``--pairs``, :func:`~gnntrain.predict.pairs.predict_pairs`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gnntrain.checkpoint import CHECKPOINT_CHOICES
from gnntrain.predict.format import PredictError
from gnntrain.predict.nodes import WHATS, predict
from gnntrain.predict.pairs import predict_pairs

__all__ = ["build_parser", "main", "parse_args"]


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m gnntrain.predict`` (the reference pages are generated from it)."""
    import gnntrain.predict as package  # its docstring is the CLI's description

    doc = package.__doc__ or ""
    ap = argparse.ArgumentParser(prog="python -m gnntrain.predict", description="\n\n".join(doc.split("\n\n")[:3]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", help="a run directory (runs/<name>-<timestamp>), or a run's URI in an "
                    "object store (s3://bucket/runs/<name>-<timestamp>; then --out is required)")
    ap.add_argument("--what", default="logits", help=f"what to write: {' | '.join(WHATS)} (default logits)")
    ap.add_argument("--layer", type=int, default=None,
                    help="embeddings: the rows after layer L, 0 < L <= num_layers (default num_layers-1)")
    ap.add_argument("--out", default=None,
                    help="output directory, or an object-store URI (s3://bucket/predictions/logits) each "
                    "worker uploads its shard to (default RUN_DIR/predictions/<what>)")
    ap.add_argument("--force", action="store_true", help="replace an existing output directory")
    ap.add_argument("--format", dest="fmt", default="npy", help="npy (default) | parquet (needs pyarrow)")
    ap.add_argument("--pairs", default=None,
                    help="link runs: score the pairs of this CSV/TSV ('src dst') or .npy [2, P] "
                    "file (a path or an object-store URI); --out is then a .csv, .tsv or .npy file, "
                    "local or a URI (default RUN_DIR/predictions/pair-scores.csv)")
    ap.add_argument("--checkpoint", default="best", choices=CHECKPOINT_CHOICES,
                    help="best: the epoch with the best validation metric (checkpoints/best.pt, "
                    "else the newest); last: the newest checkpoint (default best)")
    ap.add_argument("--single-process", action="store_true",
                    help="one in-process worker over the whole graph (no Ray, no partition set)")
    ap.add_argument("--storage-options", type=_options, default=None, metavar="JSON",
                    help="a run or --out in an object store: the store's options as a JSON mapping, e.g. "
                    "'{\"endpoint_url\": \"http://minio:9000\"}' (credentials: the standard places)")
    return ap


def _options(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON mapping, got {type(value).__name__}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from gnntrain.config import ConfigError
    from gnntrain.data import DataError
    from gnntrain.rundir_store import RunStoreError
    from partition import PartitionError

    try:
        if args.pairs is not None:
            if args.what != "logits" or args.layer is not None:
                raise PredictError("--pairs writes pair scores: --what and --layer do not apply")
            predict_pairs(args.run_dir, args.pairs, args.out, force=args.force,
                          single_process=args.single_process, checkpoint=args.checkpoint,
                          storage_options=args.storage_options)
        else:
            predict(args.run_dir, args.what, args.layer, args.out, force=args.force, fmt=args.fmt,
                    single_process=args.single_process, checkpoint=args.checkpoint,
                    storage_options=args.storage_options)
    except (PredictError, ConfigError, DataError, PartitionError, RunStoreError, FileNotFoundError) as e:
        print("error: " + " ".join(str(e).split()), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: workers released, nothing written", file=sys.stderr)
        return 130
    return 0

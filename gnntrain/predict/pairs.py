"""``python -m gnntrain.predict RUN_DIR --pairs FILE``: scores of given node pairs from a
trained link-prediction run.

``FILE`` holds the pairs in the dataset's own ids: a CSV or TSV of ``src dst`` rows
(comma, tab or spaces; one header line allowed), or a ``.npy`` int array ``[2, P]``. In a
user-item run (``dataset.source: lightgcn``) ``src`` is a user and ``dst`` an item, each
in its own id space as in the dataset's files. Every check (a link run, the file's shape,
ids in range) runs before any work. Then every node's output rows come from exact
layer-wise inference (:func:`gnntrain.predict.predict`, the run's workers), and the pairs
are scored with the task's decoder (:meth:`LinkPrediction.score`, the model's own
``decoder`` for ``decoder: mlp``) on the same rows evaluation scores: the score of a
pair equals the run's own evaluation score of it. The output rows of every node are read
into this process (``N x hidden`` floats).

Output (``--out``, default ``RUN_DIR/predictions/pair-scores.csv``): ``.csv`` (``src,dst,
score``, one row per input pair in input order; ``.tsv`` tab-separated) or ``.npy`` (the
scores, float32 ``[P]``, in input order). The scores are logits (a sigmoid gives the
probability a BCE-trained model assigns).

``FILE`` and ``--out`` may be object-store URIs (``s3://bucket/pairs.csv``, reached with
``storage_options``): the pairs are read as one object, and the scores written to a local
temporary file and uploaded as one object (a single put: the object is complete or absent).
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gnntrain.predict.format import PredictError, read_predictions
from gnntrain.predict.nodes import open_run, predict
from partition.storage import StorageError, is_remote, open_parent

if TYPE_CHECKING:
    from gnntrain.models import ModelSpec
    from gnntrain.tasks import Task
    from partition.graph import Graph

__all__ = ["predict_pairs", "read_pairs"]

OUT_SUFFIXES = (".csv", ".tsv", ".npy")


def read_pairs(path: str | Path, storage_options: Mapping[str, Any] | None = None) -> np.ndarray:
    """The pairs of ``path`` (a local file, or an object-store URI reached with
    ``storage_options``) as int64 ``[P, 2]`` (see the module docstring for the formats)."""
    where = str(path)
    try:
        if is_remote(where):
            store, name = open_parent(where, storage_options)
            data = store.read_bytes(name)
        else:
            data = Path(path).read_bytes()
    except (StorageError, OSError) as e:
        raise PredictError(f"--pairs {where!r}: {'no such file' if isinstance(e, FileNotFoundError) else e}") from None
    if where.endswith(".npy"):
        try:
            a = np.load(io.BytesIO(data), allow_pickle=False)
        except ValueError as e:
            raise PredictError(f"--pairs {where!r}: not a plain .npy array ({e})") from None
        if a.ndim != 2 or a.shape[0] != 2:
            raise PredictError(f"--pairs {where!r}: array of shape {a.shape}, expected [2, P] "
                               "(row 0 sources, row 1 destinations)")
        if not np.issubdtype(a.dtype, np.integer):
            raise PredictError(f"--pairs {where!r}: dtype {a.dtype}, expected integer node ids")
        return np.ascontiguousarray(a.T, dtype=np.int64)
    lines = [ln for ln in data.decode().splitlines() if ln.strip()]
    rows = [ln.replace(",", " ").split() for ln in lines]
    if rows and not all(t.lstrip("-").isdigit() for t in rows[0]):
        rows = rows[1:]  # a header
    for i, r in enumerate(rows):
        if len(r) != 2 or not all(t.lstrip("-").isdigit() for t in r):
            raise PredictError(f"--pairs {where!r}: line {i + 1 + (len(lines) - len(rows))} is "
                               f"{' '.join(r)[:60]!r}; expected two integer ids 'src dst' "
                               "(comma, tab or space separated)")
    if not rows:
        raise PredictError(f"--pairs {where!r}: no pairs in the file")
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def _to_graph_ids(task: Any, pairs: np.ndarray, where: str) -> np.ndarray:
    """The pairs in the run's graph ids, every id checked against its range."""
    split = task.split
    n = int(split.num_nodes)
    lo, hi = split.dst_range
    if lo > 0:  # user-item: users 0..lo-1, items lo..hi-1 in the graph
        ranges = (("src", 0, (0, lo), "users"), ("dst", 1, (0, hi - lo), "items"))
        shift = np.array([0, lo], dtype=np.int64)
    else:
        ranges = (("src", 0, (0, n), "nodes"), ("dst", 1, (0, n), "nodes"))
        shift = np.zeros(2, dtype=np.int64)
    for name, col, (a, b), what in ranges:
        bad = np.flatnonzero((pairs[:, col] < a) | (pairs[:, col] >= b))
        if bad.size:
            raise PredictError(f"--pairs {where}: pair {int(bad[0])} has {name} id "
                               f"{int(pairs[bad[0], col])}, outside [{a}, {b}) ({b - a:,} {what} "
                               f"in the run's dataset); {bad.size} pair(s) out of range")
    return pairs + shift


def predict_pairs(run_dir: str | Path, pairs_file: str | Path, out: str | Path | None = None, *,
                  force: bool = False, single_process: bool = False, model: ModelSpec | None = None,
                  task: Task | None = None, graph: Graph | None = None,
                  progress: bool = True, checkpoint: str = "best",
                  storage_options: Mapping[str, Any] | None = None) -> Path | str:
    """Score the pairs of ``pairs_file`` with the run in ``run_dir``; returns the written file
    (its URI for an ``out`` in an object store). ``pairs_file`` and ``out`` may be URIs
    (module doc). ``model``/``task``/``graph``/``checkpoint``/``storage_options`` as in
    :func:`gnntrain.predict.predict`."""
    import torch

    from gnntrain.api import _trained_model
    from gnntrain.tasks import LinkPrediction, build_task

    run, cfg = open_run(run_dir, storage_options, out)
    task = task if task is not None else build_task(cfg.task.kind, dict(cfg.task.options))
    if not isinstance(task, LinkPrediction):
        raise PredictError(f"--pairs: the run's task.kind={cfg.task.kind!r} does not score node "
                           "pairs; --pairs needs a link-prediction run (task.kind: link)")
    where = str(out) if out is not None else str(run.path / "predictions" / "pair-scores.csv")
    if Path(where).suffix not in OUT_SUFFIXES:
        raise PredictError(f"--out {where!r}: with --pairs the output is a file ending in "
                           f"one of {', '.join(OUT_SUFFIXES)}")
    dest = None  # the store an output URI goes to, and its object's name
    if is_remote(where):
        try:
            dest = open_parent(where, storage_options)
            exists = dest[0].exists(dest[1])
        except StorageError as e:
            raise PredictError(f"--out {where!r}: {e}") from None
    else:
        exists = Path(where).exists()
    if exists and not force:
        raise PredictError(f"--out {where!r} exists; pass --force to replace it")
    pairs = read_pairs(pairs_file, storage_options)
    num_nodes = task.load_graph(cfg.dataset, graph).num_nodes  # the run's graph and split
    gids = _to_graph_ids(task, pairs, repr(str(pairs_file)))
    try:
        net, _ = _trained_model(run, cfg, model, checkpoint)  # model.json's widths, the checkpoint
    except (FileNotFoundError, ValueError) as e:
        raise PredictError(str(e)) from None

    local = Path(where) if dest is None else Path(tempfile.mkdtemp(prefix="gnntrain-pairs-")) / dest[1]
    local.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-pair-rows-", dir=local.parent))
    try:
        rows = predict(run.path, "logits", out=tmp / "rows", single_process=single_process,
                       model=model, task=task, graph=graph, progress=progress)
        ids, values = read_predictions(rows)  # a local directory
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert np.array_equal(ids, np.arange(num_nodes)), "every node's row, once"
    with torch.no_grad():
        target = torch.from_numpy(gids)
        scores = task.score(net, torch.from_numpy(np.ascontiguousarray(values)), target)
    s = scores.float().cpu().numpy()
    if local.suffix == ".npy":
        np.save(local, s)
    else:
        sep = "\t" if local.suffix == ".tsv" else ","
        with local.open("w") as f:
            f.write(sep.join(("src", "dst", "score")) + "\n")
            for (u, v), x in zip(pairs.tolist(), s.tolist(), strict=True):
                f.write(f"{u}{sep}{v}{sep}{x:.9g}\n")
    if dest is None:
        return local
    try:
        dest[0].put(dest[1], local)  # one object: complete or absent
    finally:
        shutil.rmtree(local.parent, ignore_errors=True)
    return f"{dest[0].uri}/{dest[1]}"

"""Optional TensorBoard log of the per-epoch metrics record, in ``<run_dir>/tb/``.

TensorBoard is an optional dependency (``pip install 'gnntrain[tensorboard]'``). When the
``tensorboard`` package is importable, :meth:`TensorBoardLog.log_epoch` appends one
epoch's scalars to ``<run_dir>/tb/events.out.tfevents.gnntrain``; otherwise it does nothing
and returns 0. View with ``tensorboard --logdir runs/``.

Each call opens the event file in append mode, writes the epoch's records and closes it:
there is no writer to keep open or to close, a crash loses nothing already logged, and
the coordinator needs one call per epoch (after ``run.append_metrics(rec)``)::

    TensorBoardLog(run.path).log_epoch(rec)

Epochs redone after a worker failure or a resume are appended again. Every epoch's
scalars follow a ``SessionLog.START`` event at the same step, TensorBoard's restart
marker: a reader drops the points logged earlier at that step and after, so each curve
shows the run that survived (in a run without restarts there is nothing to drop).

Tags (step = ``rec["epoch"]``; a field that is absent or ``None`` is skipped):

==========================  ==============================================================
``train/loss``              mean training loss over the epoch's batches
``train/acc_batches``       accuracy on the training batches (dropout on)
``acc/{train,val,test}``    accuracy of the evaluation after the epoch (when it ran)
``time/epoch_s``            epoch wall time; ``time/eval_s`` the evaluation's
``time/{sample,fetch,compute,sync,wait,total}_s``  per-worker means of the time split
``bytes/{sample,feature,gradient,control,total}``  bytes sent in the epoch, all workers
``bytes/feature_without_cache``  feature bytes had there been no cache
``cache/hit_rate``          hits / remote feature reads (only with a cache)
``cache/feature_bytes_saved``  feature bytes the cache saved
``comm/remote_input_share`` share of input rows owned by another worker
``comm/remote_frontier_share``  share of sampled frontier nodes owned by another worker
==========================  ==============================================================
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

EVENT_FILE = "events.out.tfevents.gnntrain"
"""Name of the one event file (TensorBoard reads any file whose name contains ``tfevents``)."""

_TOP = {"loss": "train/loss", "train_acc_batches": "train/acc_batches", "train_acc": "acc/train",
        "val_acc": "acc/val", "test_acc": "acc/test", "epoch_s": "time/epoch_s",
        "eval_s": "time/eval_s", "cache_hit_rate": "cache/hit_rate",
        "feature_bytes_saved_by_cache": "cache/feature_bytes_saved",
        "feature_bytes_without_cache": "bytes/feature_without_cache",
        "remote_input_share": "comm/remote_input_share",
        "remote_frontier_share": "comm/remote_frontier_share"}


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def scalars(rec: Mapping[str, Any]) -> dict[str, float]:
    """The TensorBoard scalars of one metrics.jsonl record (see the module's tag table)."""
    out: dict[str, float] = {}
    for key, tag in _TOP.items():
        v = _number(rec.get(key))
        if v is not None:
            out[tag] = v
    for key, val in (rec.get("time") or {}).items():
        v = _number(val)
        if v is not None:
            out[f"time/{key}"] = v
    comm = rec.get("comm") or {}
    for cat, val in (comm.get("by_category") or {}).items():
        v = _number(val)
        if v is not None:
            out[f"bytes/{cat}"] = v
    total = _number(comm.get("total_bytes"))
    if total is not None:
        out["bytes/total"] = total
    return out


def tensorboard_available() -> bool:
    """Whether the optional ``tensorboard`` package (and the parts used here) imports."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2  # noqa: F401
        from tensorboard.summary.writer.record_writer import RecordWriter  # noqa: F401
    except ImportError:
        return False
    return True


class TensorBoardLog:
    """Appends epoch records to ``<run_dir>/tb/`` when TensorBoard is installed; else a no-op."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(run_dir) / "tb"
        self.enabled = tensorboard_available()

    @property
    def path(self) -> Path:
        return self.dir / EVENT_FILE

    def log_epoch(self, rec: Mapping[str, Any]) -> int:
        """Write ``rec``'s scalars at step ``rec["epoch"]``; returns how many were written."""
        epoch = rec.get("epoch")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"rec['epoch']={epoch!r}: a metrics record needs an integer epoch >= 0")
        if not self.enabled:
            return 0
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        values = scalars(rec)
        now = time.time()
        events = []
        new = not self.path.exists()
        if new:  # every event file starts with its format version
            events.append(event_pb2.Event(wall_time=now, file_version="brain.Event:2"))
        summary = summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=tag, simple_value=v) for tag, v in values.items()])
        # SessionLog.START at this step: a reader drops points at steps >= epoch logged
        # before (a redone epoch replaces its first attempt); a no-op in a normal run
        events.append(event_pb2.Event(wall_time=now, step=epoch, session_log=event_pb2.SessionLog(
            status=event_pb2.SessionLog.START)))
        events.append(event_pb2.Event(wall_time=now, step=epoch, summary=summary))
        self.dir.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as f:
            writer = RecordWriter(f)
            for ev in events:
                writer.write(ev.SerializeToString())
            f.flush()
        return len(summary.value)


__all__ = ["EVENT_FILE", "TensorBoardLog", "scalars", "tensorboard_available"]

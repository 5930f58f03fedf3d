"""Tasks: what differs between learning problems (see :mod:`gnntrain.tasks.base`)."""

from __future__ import annotations

from typing import Any

from gnntrain.config import ConfigError
from gnntrain.config.plugins import TASK_KINDS, import_object
from gnntrain.tasks.base import SPLITS, MetricState, SeedBatch, StepOutput, Task
from gnntrain.tasks.link import LinkPrediction
from gnntrain.tasks.link_options import LinkOptions
from gnntrain.tasks.node import NodeClassification

BUILTIN: dict[str, type[Task]] = {kind: import_object(path, "task.kind") for kind, path in TASK_KINDS.items()}
"""``task.kind`` names of the built-in tasks (:data:`gnntrain.config.plugins.TASK_KINDS`) and their classes."""


def build_task(kind: str, options: dict[str, Any] | None = None) -> Task:
    """The task ``task.kind`` names (built-in or ``package.module:factory``), made with
    ``options`` as keyword arguments."""
    factory = BUILTIN.get(kind) or import_object(kind, "task.kind")
    try:
        task = factory(**(options or {}))
    except ValueError as e:  # an option's value: the task names it
        raise ConfigError(str(e)) from None
    except TypeError as e:
        raise ConfigError(f"task.options={options!r}: {kind} does not take them ({e})") from None
    if not isinstance(task, Task):
        raise ConfigError(f"task.kind={kind!r} made {type(task).__name__}, not a gnntrain Task")
    return task


__all__ = ["BUILTIN", "SPLITS", "LinkOptions", "LinkPrediction", "MetricState", "NodeClassification", "SeedBatch", "StepOutput",
           "Task", "build_task"]

"""gnntrain: distributed mini-batch GNN training on Ray.

The public API (version 0.5), importable from the package itself:

* :func:`fit` — train as ``python -m gnntrain.run`` does, from a YAML path, a mapping or a
  :class:`~gnntrain.config.RunConfig`, with config overrides as keywords
  (``train__epochs=3``); returns a :class:`Run` (run directory, summary, config, the
  trained model on the CPU). ``model=`` takes a user model (factory or module), ``task=``
  a user :class:`Task`.
* :func:`load` — a run directory's config and trained model, without Ray (:class:`Loaded`).
* :class:`Task` — the task contract (:mod:`gnntrain.tasks.base`): subclass it, or override
  :meth:`Task.loss` / :meth:`Task.training_step` of :class:`NodeClassification`, for a
  custom loss or step.
* :class:`NodeClassification` — the built-in task.
* :func:`reuse_workers` — a block in which runs of the same shape on the same Ray reuse
  the worker processes of earlier runs (seed sweeps; :mod:`gnntrain.runtime.worker_pool`).
* :func:`sweep` — a Ray Tune sweep whose trials are k-worker runs, each in its own
  placement group (:mod:`gnntrain.tune`; ``pip install gnntrain[tune]``); returns a
  :class:`~gnntrain.tune.Sweep` (table, best trial, plot). ``python -m gnntrain.tune``
  on the command line.
* :class:`PygLayers` — the adapter that makes plain PyG layers (``conv(x, edge_index)``)
  a gnntrain model (:mod:`gnntrain.models.protocol` is the model protocol).
* ``__version__`` — the package version, set once in ``pyproject.toml``
  (:mod:`gnntrain.version`); ``python -m gnntrain.run --version`` prints it and every
  run's ``summary.json`` records it.

Importing this package is cheap: it loads neither Ray nor torch (the names above are
imported on first use). It sets ``THP_MEM_ALLOC_ENABLE=1`` in the environment unless set
(huge pages for torch's large CPU tensors, :mod:`gnntrain.allocator`). The data path
reads ``partition`` -> ``samplers`` -> ``gnntrain.runtime``;
``gnntrain.runtime.coordinator`` shows it whole.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gnntrain.allocator import use_huge_pages
from gnntrain.version import package_version

__version__ = package_version()
"""The version of this package: ``pyproject.toml``'s ``version`` (:mod:`gnntrain.version`)."""

use_huge_pages()  # before torch's first allocation, when gnntrain is imported first

if TYPE_CHECKING:
    from gnntrain.api import Loaded, Run, fit, load
    from gnntrain.models.pyg import PygLayers
    from gnntrain.runtime.worker_pool import reuse_workers
    from gnntrain.tasks.base import Task
    from gnntrain.tasks.node import NodeClassification
    from gnntrain.tune import sweep

_EXPORTS = {
    "fit": "gnntrain.api",
    "load": "gnntrain.api",
    "Run": "gnntrain.api",
    "Loaded": "gnntrain.api",
    "Task": "gnntrain.tasks.base",
    "NodeClassification": "gnntrain.tasks.node",
    "PygLayers": "gnntrain.models.pyg",
    "reuse_workers": "gnntrain.runtime.worker_pool",
    "sweep": "gnntrain.tune",
}

__all__ = ["Loaded", "NodeClassification", "PygLayers", "Run", "Task", "__version__", "fit", "load",
           "reuse_workers", "sweep"]


def __getattr__(name: str) -> Any:
    """Import an exported name on first use (PEP 562), so ``import gnntrain`` stays light."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gnntrain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])

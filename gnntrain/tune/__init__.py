"""Hyper-parameter sweeps of distributed runs with Ray Tune (``pip install gnntrain[tune]``).

:func:`sweep` (exported as ``gnntrain.sweep``; ``python -m gnntrain.tune`` on the command
line, :mod:`~gnntrain.tune.cli`) runs one Tune trial per sampled config, each an ordinary k-worker gnntrain run
placed in the trial's own placement group. The package by job:
:mod:`~gnntrain.tune.space` (the search space: parsing and checks),
:mod:`~gnntrain.tune.trial` (one trial: its resources, config and trainable),
:mod:`~gnntrain.tune.tuner` (the sweep: checks, shared partition sets, the Tuner) and
:mod:`~gnntrain.tune.summary` (the table, best trial and plot). Ray Tune is imported only
when a sweep runs.
"""

from gnntrain.tune.summary import Sweep, SweepTrial
from gnntrain.tune.tuner import sweep

__all__ = ["Sweep", "SweepTrial", "sweep"]

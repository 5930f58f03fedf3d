"""Hyper-parameter sweeps of distributed runs with Ray Tune (``pip install gnntrain[tune]``).

:func:`tune` (exported as ``gnntrain.tune``; ``python -m gnntrain.tune`` on the command
line) runs one Tune trial per sampled config, each an ordinary k-worker gnntrain run
placed in the trial's own placement group. The package by job:
:mod:`~gnntrain.sweep.space` (the search space: parsing and checks),
:mod:`~gnntrain.sweep.trial` (one trial: its resources, config and trainable),
:mod:`~gnntrain.sweep.tuner` (the sweep: checks, shared partition sets, the Tuner) and
:mod:`~gnntrain.sweep.summary` (the table, best trial and plot). Ray Tune is imported only
when a sweep runs.
"""

from gnntrain.sweep.summary import Sweep, SweepTrial
from gnntrain.sweep.tuner import tune

__all__ = ["Sweep", "SweepTrial", "tune"]

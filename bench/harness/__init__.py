"""What every benchmark shares, one module per job; benchmarks import public names from
these modules, and nothing of one benchmark module is private to another.

- ``paths``: the repository, ``bench/out``, run roots, ``out_path``, ``bench_config``,
  the data files a dataset config names that are absent here
- ``system``: the machine the numbers were measured on, the load on it
- ``runs``: a command run with a time limit (``run_limited``), a training run's metrics
- ``memory``: the one memory meter (``PeakMeter``) and the kernel's own peaks
- ``procs``: waiting for processes to go, killing them
- ``verdict``: correctness checks and the exit status they give
- ``stats``: a figure's mean and spread over seeds, the gap between two runs
- ``peer``: the DGL peer runner and what the peers read
- ``cli``: the parser every ``main`` starts from (the shape of ``main`` is in its docstring)
"""

"""torch's CPU allocator setting that gnntrain gives its processes: huge pages for large
tensors (:data:`TORCH_ALLOC_ENV`, applied by :func:`use_huge_pages`).

With ``THP_MEM_ALLOC_ENABLE=1`` torch's CPU allocator asks the kernel for transparent huge
pages for every allocation of 2 MiB or more (``madvise(MADV_HUGEPAGE)``; a kernel whose
``transparent_hugepage/enabled`` is ``never`` ignores it). A training step
allocates its layer outputs and their gradients afresh, and glibc maps allocations over
32 MiB anew every time: each first touch then faulted in 4 KiB pages. Allocating and
filling a 50,374 x 256 float32 tensor took ~22 ms with 4 KiB pages and ~5 ms with huge
pages at one thread, and a float32 training step of ``bench.epoch``'s workload ~0.67x as
long (``docs/benchmarks/epoch.md``). torch reads the variable once, at its first CPU
allocation, so importing ``gnntrain`` sets it (before any tensor exists, when gnntrain is
imported before torch allocates) and the worker actors start with it in their environment
(:data:`gnntrain.runtime.cluster.WORKER_MALLOC_ENV`). A value already in the
environment wins: ``THP_MEM_ALLOC_ENABLE=0`` turns it off. Other allocators (CUDA's,
pinned memory) are not affected.
"""

from __future__ import annotations

import os

TORCH_ALLOC_ENV: dict[str, str] = {"THP_MEM_ALLOC_ENABLE": "1"}
"""Environment of torch's CPU allocator: large tensors backed by transparent huge pages."""


def use_huge_pages() -> None:
    """Put :data:`TORCH_ALLOC_ENV` into this process's environment where it is not set.
    Takes effect only if torch has not allocated a CPU tensor yet."""
    for key, value in TORCH_ALLOC_ENV.items():
        os.environ.setdefault(key, value)

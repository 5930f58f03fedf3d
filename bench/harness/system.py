"""What the numbers were measured on: the machine, its software and the load on it."""

from __future__ import annotations

import os
import platform
from typing import Any

import torch


def loadavg() -> float:
    """The 1-minute load average, rounded: other processes share the machine."""
    return round(os.getloadavg()[0], 2)


def machine() -> dict[str, Any]:
    """What the numbers were measured on, including the load other processes put on it."""
    mem = 0
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        pass
    from gnntrain.precision import bf16_native, cpu_info

    cpu = cpu_info()
    return {"cpus": os.cpu_count(), "cpu_model": cpu.get("model name") or platform.processor(),
            "cpu_bf16": bf16_native(cpu),
            "mem_gib": round(mem / 2**30, 1),
            "loadavg_1m": loadavg(), "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(), "torch": torch.__version__,
            "gpu": torch.cuda.is_available()}

"""Mixed precision for the model's compute (``train.precision``).

``fp32`` (the default) runs everything in float32, exactly as without this module.
``bf16`` runs the model's forward (training and evaluation) under
``torch.autocast(device_type, torch.bfloat16)``: matrix products and the aggregation over
the block's CSR take bfloat16 operands and accumulate in float32 (oneDNN and the sparse
``mm`` reduce kernel do), the cross-entropy runs in float32 (autocast's float32 list), and
the fused ReLU + dropout kernel (:mod:`gnntrain.ops`) works on bfloat16 activations
directly. What stays float32: the parameters, their gradients (autocast's casts give
back float32 gradients), the flat buffer the workers all-reduce, and the optimizer state;
so ``1 worker == single process`` holds bit for bit in bf16 too.

bf16 pays on CPUs with bfloat16 instructions (x86 ``avx512_bf16`` or ``amx_bf16``, Arm
``bf16``); on others (AVX2-only x86 such as many AMD EPYC) the bfloat16 matrix products are
emulated and a step takes several times the float32 one: :func:`cpu_bf16_native` tells
which, and start-up warns (:func:`gnntrain.api.check_startable`).

On a CUDA device without bfloat16 (compute capability < 8.0) ``bf16`` falls back to
float16 with a :class:`torch.amp.GradScaler`: the loss is scaled before backward, the
all-reduced (still scaled) gradients are unscaled by the scaler, and a step whose summed
gradients hold an inf/NaN is skipped on every worker alike (they all see the same sum).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

PRECISIONS = ("fp32", "bf16")
"""Values of ``train.precision``."""


@dataclass(frozen=True)
class Precision:
    """How one worker runs the model: ``dtype`` None is plain float32 (no autocast)."""

    name: str
    device_type: str
    dtype: torch.dtype | None = None
    scaler: torch.amp.GradScaler | None = None

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """The model's forward (and the loss) run inside this."""
        if self.dtype is None:
            yield
            return
        with torch.autocast(self.device_type, dtype=self.dtype):
            yield

    def backward(self, loss: Tensor) -> None:
        """``loss.backward()``, scaled first when a gradient scaler is on."""
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def step(self, opt: torch.optim.Optimizer, clip_norm: float | None = None) -> None:
        """``opt.step()`` on the (all-reduced) gradients; with a scaler, unscale them, skip
        the step if they hold an inf/NaN, and update the scale. ``clip_norm``: first scale
        the optimizer's gradients down to at most that total 2-norm
        (``torch.nn.utils.clip_grad_norm_``; every worker holds the same summed gradients,
        so all clip alike)."""
        if clip_norm is not None:
            if self.scaler is not None:
                self.scaler.unscale_(opt)  # clip the true gradients; step() then skips unscaling
            params = [p for group in opt.param_groups for p in group["params"]]
            torch.nn.utils.clip_grad_norm_(params, clip_norm)
        if self.scaler is None:
            opt.step()
            return
        self.scaler.step(opt)  # unscales, checks for inf/NaN, steps or skips
        self.scaler.update()


FP32 = Precision("fp32", "cpu")

CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})
"""CPU feature flags (``/proc/cpuinfo``) that mean native bfloat16 arithmetic."""


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, str]:
    """The first processor's ``key: value`` lines of ``cpuinfo`` (Linux); {} when it cannot
    be read."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out.setdefault(key.strip(), value.strip())
    return out


def bf16_native(info: dict[str, str]) -> bool | None:
    """Whether the CPU that :func:`cpu_info` describes has bfloat16 instructions, from its
    ``flags`` (x86) or ``Features`` (Arm); None when neither is there."""
    flags = info.get("flags", info.get("Features"))
    return None if flags is None else bool(CPU_BF16_FLAGS & set(flags.split()))


def cpu_bf16_native(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool | None:
    """Whether this CPU has bfloat16 instructions (None when that cannot be read)."""
    return bf16_native(cpu_info(cpuinfo))


def resolve_precision(precision: str, device: torch.device,
                      bf16_supported: bool | None = None) -> Precision:
    """The :class:`Precision` for ``train.precision`` on ``device``.

    ``bf16_supported`` overrides the CUDA capability probe (tests choose the fp16 path
    with it on a machine without a GPU).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"train.precision={precision!r}: expected one of {', '.join(PRECISIONS)}")
    if precision == "fp32":
        return Precision("fp32", device.type)
    if device.type == "cpu":
        return Precision("bf16", "cpu", torch.bfloat16)
    if device.type != "cuda":
        raise ValueError(f"train.precision='bf16' on device {device.type!r}: mixed precision is "
                         "supported on 'cpu' and 'cuda'; use train.precision=fp32")
    if bf16_supported is None:
        bf16_supported = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if bf16_supported:
        return Precision("bf16", "cuda", torch.bfloat16)
    # no bfloat16 on this GPU: float16 needs loss scaling (its range is far narrower)
    return Precision("bf16", "cuda", torch.float16, torch.amp.GradScaler("cuda"))

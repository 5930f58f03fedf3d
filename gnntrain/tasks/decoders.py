"""Pair decoders of link prediction: modules that turn two node rows into one score.

:class:`HadamardMLP` scores ``h_u * h_v`` with an MLP; :func:`with_mlp_decoder` is the model
factory that puts one on a built-in model as its ``decoder`` attribute (the model protocol's
way for a model to bring its own decoder, which then trains and all-reduces with it). The
factory is documented under its link-task path, ``gnntrain.tasks.link:with_mlp_decoder``,
which re-exports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor, nn

from gnntrain.ops import ReluDropout

if TYPE_CHECKING:
    from gnntrain.config import ModelConfig

__all__ = ["HadamardMLP", "with_mlp_decoder"]


class HadamardMLP(nn.Module):
    """``decoder``: an MLP on ``h_u * h_v`` giving one score per pair: ``layers`` (>= 1)
    linear layers, each but the last followed by ReLU and (in training) ``dropout``, fused
    in one pass (:class:`gnntrain.ops.ReluDropout`; torch's CPU dropout took most of an
    ogbl-ddi step). :func:`with_mlp_decoder` checks both where they come from the config."""

    def __init__(self, dim: int, hidden: int | None = None, layers: int = 2, dropout: float = 0.0) -> None:
        super().__init__()
        hidden = hidden or dim
        mods: list[nn.Module] = []
        width = dim
        for _ in range(layers - 1):
            mods += [nn.Linear(width, hidden), ReluDropout(dropout)]
            width = hidden
        mods.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*mods)

    def forward(self, h: Tensor) -> Tensor:
        return self.net(h).reshape(-1)


def with_mlp_decoder(in_dim: int, out_dim: int, cfg: ModelConfig) -> nn.Module:
    """Model factory (``model.arch: gnntrain.tasks.link:with_mlp_decoder``): the built-in
    ``model.options.base`` (default ``sage``) plus a :class:`HadamardMLP` ``decoder`` with
    ``model.options.decoder_layers`` linear layers (default 2) and dropout
    ``model.options.decoder_dropout`` after each hidden one (default 0)."""
    from gnntrain.models import resolve_factory

    opts = dict(cfg.options)
    base = str(opts.pop("base", "sage"))
    layers, dropout = opts.pop("decoder_layers", 2), opts.pop("decoder_dropout", 0.0)
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 1:
        raise ValueError(f"model.options.decoder_layers={layers!r}: must be an integer >= 1")
    if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"model.options.decoder_dropout={dropout!r}: must be a number in [0, 1)")
    model = resolve_factory(base)(in_dim, out_dim, cfg.model_copy(update={"options": opts}))
    model.decoder = HadamardMLP(out_dim, layers=layers, dropout=float(dropout))
    return model

"""Which model ``model.arch`` names, and building it.

:data:`BUILTIN` maps the built-in names to their factories, resolved from the plug-in
registry (:data:`gnntrain.config.plugins.MODEL_ARCHS`, whose names the config checks
``model.arch`` against); any other ``model.arch`` is an import path
``package.module:factory`` (:func:`~gnntrain.config.plugins.import_object`).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from gnntrain.config import ConfigError, ModelConfig
from gnntrain.config.plugins import MODEL_ARCHS, import_object
from gnntrain.models.protocol import ModelFactory, ModelSpec

__all__ = ["BUILTIN", "build_model", "resolve_factory"]

BUILTIN: dict[str, ModelFactory] = {name: import_object(path, "model.arch")
                                    for name, path in MODEL_ARCHS.items()}
"""``model.arch`` names of the built-in models and their factories."""


def resolve_factory(arch: str) -> ModelFactory:
    """The factory ``model.arch`` names: a built-in or an imported callable."""
    if arch in BUILTIN:
        return BUILTIN[arch]
    factory = import_object(arch, "model.arch")
    if not callable(factory):
        raise ConfigError(f"model.arch={arch!r} is not callable (got {type(factory).__name__})")
    return factory  # type: ignore[no-any-return]


def build_model(spec: ModelSpec, cfg: ModelConfig, in_dim: int, out_dim: int, seed: int) -> nn.Module:
    """The model ``spec`` names, with initial parameters fixed by ``seed`` (the same in every
    process). A module instance is deep-copied and keeps its own parameters."""
    if isinstance(spec, nn.Module):
        return copy.deepcopy(spec)
    factory = resolve_factory(spec) if isinstance(spec, str) else spec
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = factory(in_dim, out_dim, cfg)
    if not isinstance(model, nn.Module):
        raise ConfigError(f"model factory {getattr(factory, '__name__', factory)!r} returned "
                          f"{type(model).__name__}, not a torch.nn.Module")
    return model

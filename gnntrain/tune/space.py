"""A sweep's search space: dotted config keys mapped to values or Ray Tune samplers.

In YAML (read with ``yaml.safe_load``; nothing is evaluated), each key is a config key
and each value either a plain value (the same in every trial) or a one-key mapping that
names a sampler from :data:`SAMPLERS` with its arguments as a list::

    train.lr: {loguniform: [1.0e-3, 1.0e-1]}
    model.hidden: {choice: [16, 32, 64]}
    model.dropout: {grid_search: [0.2, 0.5]}
    sampler.batch_size: 35

In Python the values may also be Ray Tune's own samplers (``tune.loguniform(1e-3, 1e-1)``,
``tune.grid_search([...])``). Every key is checked against the run config before any
trial starts (:func:`check_space`): an unknown key, or a value the config refuses, fails
naming the key. Settings that change the partition set (``dataset.*``, ``partition.*``,
``cluster.workers``) must come from a finite list (``choice`` or ``grid_search``), so that
each distinct set is built once before the trials (:func:`partition_settings`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gnntrain.config import ConfigError, RunConfig
from gnntrain.config.loading import read_yaml

__all__ = ["PARTITION_KEYS", "SAMPLERS", "check_space", "parse_space", "partition_settings", "probe_values", "read_space",
           "spec_items"]

SAMPLERS: dict[str, str] = {
    "grid_search": "values", "choice": "values", "uniform": "low, high", "quniform": "low, high, q",
    "loguniform": "low, high", "qloguniform": "low, high, q", "randint": "low, high",
    "lograndint": "low, high", "randn": "mean, sd",
}
"""The samplers a space may name, with the arguments each takes (Ray Tune's functions of
the same name)."""

PARTITION_KEYS = ("dataset.", "partition.", "cluster.workers")
"""Config keys whose value changes the partition set a trial trains on."""


def read_space(path: str | Path) -> dict[str, Any]:
    """The space of a YAML file (``--space``), as :func:`parse_space` returns it."""
    return parse_space(read_yaml(path, "space file", "it maps config keys to values or samplers"))


def parse_space(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with every ``{sampler: [args]}`` value made the Ray Tune sampler it names;
    other values (plain ones, Tune samplers given in Python) are kept as they are."""
    space: dict[str, Any] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or "." not in key:
            raise ConfigError(f"space key {key!r}: expected a dotted config key (train.lr, model.hidden)")
        space[key] = _sampler(key, value) if _names_sampler(value) else value
    return space


def _names_sampler(value: Any) -> bool:
    return isinstance(value, Mapping) and len(value) == 1 and next(iter(value)) in SAMPLERS


def _sampler(key: str, value: Mapping[str, Any]) -> Any:
    from ray import tune

    name, args = next(iter(value.items()))
    if not isinstance(args, list) or not args:
        raise ConfigError(f"space key {key!r}: {name} takes a list [{SAMPLERS[name]}], got {args!r}")
    if name in ("grid_search", "choice"):
        return getattr(tune, name)(list(args))
    try:
        return getattr(tune, name)(*args)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"space key {key!r}: {name}{args} is not a valid sampler ({e}); it takes "
                          f"[{SAMPLERS[name]}]") from None


def _finite_values(value: Any) -> list[Any] | None:
    """Every value ``value`` can take when that is a finite list (a plain value, a grid,
    a choice); None for a continuous sampler."""
    from ray.tune.search.sample import Categorical, Domain

    if isinstance(value, Mapping) and set(value) == {"grid_search"}:
        return list(value["grid_search"])
    if isinstance(value, Categorical):
        return list(value.categories)
    if isinstance(value, Domain):
        return None
    return [value]


def probe_values(value: Any) -> list[Any]:
    """The values checked against the config: every one of a finite list, else the
    bounds of a continuous sampler (or one draw when it has none)."""
    finite = _finite_values(value)
    if finite is not None:
        return finite
    lower, upper = getattr(value, "lower", None), getattr(value, "upper", None)
    if lower is not None and upper is not None:
        return [lower, upper - 1 if isinstance(upper, int) else upper]
    return [value.sample()]


def spec_items(spec: Mapping[str, Any]) -> list[str]:
    """A trial's sampled values as ``KEY=VALUE`` overrides (values written as JSON)."""
    return [f"{k}={json.dumps(_plain(v))}" for k, v in spec.items()]


def _plain(value: Any) -> Any:
    """numpy scalars (Tune's samplers draw them) as Python ones."""
    return value.item() if hasattr(value, "item") and not isinstance(value, list | dict | str) else value


def check_space(space: Mapping[str, Any], trial_config: Callable[[dict[str, Any]], RunConfig]) -> None:
    """Refuse a space the trials' config cannot take, naming the key: an unknown key, or a
    value (every one of a list, the bounds of a range) the config refuses.
    ``trial_config`` makes a trial's config from its sampled values."""
    for key, value in space.items():
        for v in probe_values(value):
            try:
                trial_config({key: v})
            except ConfigError as e:
                raise ConfigError(f"space key {key!r} (value {_plain(v)!r}): {e}") from None


def partition_settings(space: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the space's values that change the partition set (one dict of
    ``{key: value}`` per distinct set; ``[{}]`` when the space changes none). A
    continuous sampler on such a key is refused: each set is built before the trials."""
    keys = [k for k in space if k.startswith(PARTITION_KEYS)]
    lists = []
    for k in keys:
        values = _finite_values(space[k])
        if values is None:
            raise ConfigError(f"space key {k!r}: it changes the partition set, so it takes a finite list "
                              "({choice: [...]} or {grid_search: [...]}), not a continuous sampler")
        lists.append(values)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*lists)]

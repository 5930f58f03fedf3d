"""The plug-in registry: every built-in model and task by name, with the import path of its
factory, and how a name or a user's ``package.module:attr`` becomes the object.

One table per kind of plug-in. The config checks ``model.arch`` and ``task.kind`` against
these names without importing torch; :data:`gnntrain.models.registry.BUILTIN` and
:data:`gnntrain.tasks.BUILTIN` resolve the same entries to their factories, so a name is
registered here only.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

from gnntrain.config.base import ConfigError

__all__ = ["IMPORT_PATH", "MODEL_ARCHS", "TASK_KINDS", "check_name", "import_object"]

IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
"""The form of a user plug-in's name: ``package.module:attr``."""

MODEL_ARCHS: Mapping[str, str] = {
    "sage": "gnntrain.models.builtin:sage",
    "gcn": "gnntrain.models.builtin:gcn",
    "gat": "gnntrain.models.builtin:gat",
    "rgcn": "gnntrain.models.typed:rgcn",
    "hsage": "gnntrain.models.hetero_sage:hsage",
}
"""``model.arch`` names of the built-in models -> their factories' import paths."""

TASK_KINDS: Mapping[str, str] = {
    "node_classification": "gnntrain.tasks.node:NodeClassification",
    "link": "gnntrain.tasks.link:LinkPrediction",
}
"""``task.kind`` names of the built-in tasks -> their classes' import paths."""


def check_name(value: str, builtin: Mapping[str, str], field: str) -> str:
    """``value`` if it is a built-in name or has an import path's form; else ValueError
    naming ``field`` and what is allowed (a config validator's check: nothing is imported)."""
    if value not in builtin and not IMPORT_PATH.match(value):
        raise ValueError(f"{field}={value!r}: expected one of {list(builtin)} or an import path "
                         "'package.module:name'")
    return value


def import_object(path: str, what: str) -> Any:
    """``package.module:attr`` -> the object; errors name the path and what was wrong."""
    if not IMPORT_PATH.match(path):
        raise ConfigError(f"{what}={path!r}: expected a built-in name or an import path "
                          "'package.module:name'")
    mod_name, _, attr = path.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ConfigError(f"{what}={path!r}: cannot import module {mod_name!r} ({e}); it must be "
                          "importable where the run starts and on every worker (on a cluster: "
                          "ship it with `ray job submit --working-dir`)") from None
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise ConfigError(f"{what}={path!r}: module {mod_name!r} has no attribute {attr!r}") from None


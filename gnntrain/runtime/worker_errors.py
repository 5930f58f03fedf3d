"""What a worker's failure says about its cause: the user error (bad data, partition set or
config) that ends its traceback, which retrying cannot help."""

from __future__ import annotations

import builtins
import importlib
import re

__all__ = ["user_error"]

# "module.Class: message" -- the exception line that ends a worker's traceback
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*(?:Error|Exception))(?:\([^)]*\))?: ", re.M)
_OURS = ("partition.", "samplers.", "gnntrain.")


def user_error(cause: str) -> str | None:
    """The message of the user error (a ``ValueError`` raised by builtins or by our own
    packages) that ends a worker's traceback ``cause``; None for any other failure."""
    body = cause.split("\nworkers at failure:")[0]
    matches = list(_EXC_LINE.finditer(body))
    if not matches:
        return None
    last = matches[-1]
    name = last.group(0).split("(")[0].rstrip(": ")
    if not issubclass(_exception_class(name), ValueError):
        return None
    message = body[last.end():].strip()
    return message or None


def _exception_class(qualified: str) -> type:
    """The class named ``qualified`` (``ValueError``, ``partition.errors.PartitionError``);
    ``object`` when it is not a builtin or not from our packages (never imports others)."""
    module, _, name = qualified.rpartition(".")
    try:
        if not module:
            cls = getattr(builtins, name, object)
        elif module.startswith(_OURS):
            cls = getattr(importlib.import_module(module), name, object)
        else:
            return object
    except ImportError:
        return object
    return cls if isinstance(cls, type) else object

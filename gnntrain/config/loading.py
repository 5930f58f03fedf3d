"""Reading a config: YAML files, ``KEY=VALUE`` overrides, and validation errors that name
the field.

Generic over the root model, so the run config (:func:`gnntrain.config.load_config`) and a
lone dataset section (:func:`gnntrain.config.parse_dataset`) read and report alike. An
override of a union section's key (``dataset.X``) must name a key of the model that the
section's tag (``source``) selects; setting the tag switches the model and drops the keys
the new member does not have.
"""

from __future__ import annotations

import copy
import os
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, get_args

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from gnntrain.config.base import ConfigError

__all__ = ["apply_override", "format_errors", "read_yaml", "validate"]

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: str | os.PathLike[str], what: str = "config file",
              hint: str = "dataset configs live in datasets/*.yaml") -> dict[str, Any]:
    """The mapping a YAML file holds (read with ``safe_load``: nothing is evaluated);
    ``what`` and ``hint`` name the file and where to look in the errors."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{what} {p} does not exist; {hint}")
    with p.open() as f:
        loaded = yaml.safe_load(f)
    if not isinstance(loaded, dict):
        raise ConfigError(f"{what} {p}: expected a mapping, got {type(loaded).__name__}")
    return loaded


def validate(root: type[M], raw: Mapping[str, Any], overrides: Sequence[str], source: str) -> M:
    """``raw`` (left as it is) with ``overrides`` applied, validated into ``root``; every
    problem raises :class:`ConfigError` naming ``source`` and the field."""
    data = copy.deepcopy(dict(raw))
    for item in overrides:
        apply_override(data, item, root)
    try:
        return root.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_errors(e, source, root)) from None


def _members(field: FieldInfo) -> dict[str, type[BaseModel]]:
    """For a field holding a union discriminated on a key: tag -> member model; else {}."""
    key = field.discriminator
    if not isinstance(key, str):
        return {}
    return {m.model_fields[key].default: m for m in get_args(field.annotation)}


def _walk(loc: tuple[int | str, ...],
          root: type[BaseModel]) -> tuple[str, str | None, FieldInfo | None]:
    """The field path of a pydantic error location without union tags, the tag (with its
    key) of the union member that holds the last element if any, and the last field."""
    node: Any = root
    path: list[str] = []
    tag: str | None = None  # the tag of the union member ``node`` is, if it is one
    holder: str | None = None
    field: FieldInfo | None = None
    i = 0
    while i < len(loc):
        part = loc[i]
        path.append(str(part))
        i += 1
        fields = getattr(node, "model_fields", None)
        field = fields.get(part) if isinstance(fields, dict) and isinstance(part, str) else None
        holder, tag = tag, None
        if field is None:
            node = None
            continue
        members = _members(field)
        if members and i < len(loc) and loc[i] in members:
            node, tag = members[str(loc[i])], f"{field.discriminator}={loc[i]!r}"
            i += 1
        else:
            node = field.annotation
    return ".".join(path) or "(top level)", holder, field


def format_errors(err: ValidationError, source: str, root: type[BaseModel]) -> str:
    """A validation error of ``root`` as one line per problem, each naming the field's path
    (``train.epochs``, union tags left out) and what is allowed."""
    lines = [f"invalid config {source}:"]
    for e in err.errors():
        path, tag, field = _walk(tuple(e["loc"]), root)
        if e["type"] == "extra_forbidden":
            if tag is not None:
                owner = path.rsplit(".", 1)[0]
                lines.append(f"  {path}: not a setting of {owner}.{tag} (value {e.get('input')!r}); "
                             "check the spelling or the source's settings in its loader module")
            else:
                lines.append(f"  {path}: unknown key (value {e.get('input')!r}); check the spelling")
        elif e["type"] in ("union_tag_invalid", "union_tag_not_found"):
            key = field.discriminator if field is not None else "source"
            got = (e.get("ctx") or {}).get("tag")
            seen = "missing" if got is None else f"got {got!r}"
            tags = ", ".join(_members(field)) if field is not None else ""
            lines.append(f"  {path}.{key}: {seen}; expected one of {tags}")
        elif e["type"] == "missing":
            lines.append(f"  {path}: required{' for ' + tag if tag else ''}, but missing")
        elif e["type"] == "value_error":  # our validators already name field and value
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"  {path}: {msg}")
        else:
            lines.append(f"  {path}: {e['msg']} (got {e.get('input')!r})")
    return "\n".join(lines)


def apply_override(raw: dict[str, Any], item: str, root: type[BaseModel]) -> None:
    """Set one ``KEY=VALUE`` item (``--set``'s form; the value is read as YAML) in ``raw``, a
    mapping of ``root``'s fields, in place; a key ``root`` does not have is refused here,
    naming the keys known at that level."""
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. train.epochs=3")
    key, _, value = item.partition("=")
    parts = key.strip().split(".")
    node: Any = root
    target = raw
    where = ""  # names the union member whose keys apply, when the section is one
    members: dict[str, type[BaseModel]] = {}
    tag_key = ""
    for i, part in enumerate(parts):
        if node is dict:  # inside a free-form mapping (model.options, task.options): any key
            if i == len(parts) - 1:
                target[part] = yaml.safe_load(value)
            else:
                target = target.setdefault(part, {})
            continue
        fields = getattr(node, "model_fields", None)
        if fields is None or part not in fields:
            known = ", ".join(sorted(fields)) if fields else "(none: not a section)"
            raise ConfigError(
                f"--set {key}: no such key {'.'.join(parts[:i + 1])!r}; known keys here{where}: {known}")
        if i == len(parts) - 1:
            target[part] = yaml.safe_load(value)
            if where and part == tag_key and target[part] in members:
                # switching the source: keep the keys the new source has, drop the old one's
                keep = members[target[part]].model_fields
                for k in [k for k in target if k not in keep]:
                    del target[k]
        else:
            target = target.setdefault(part, {})
            if not isinstance(target, dict):
                raise ConfigError(f"--set {key}: {'.'.join(parts[:i + 1])} is not a section")
            members = _members(fields[part])
            if members:  # a union section: its keys are those of the member the raw tag names
                tag_key = str(fields[part].discriminator)
                tag = target.get(tag_key)
                if tag not in members and parts[i + 1] != tag_key:
                    raise ConfigError(
                        f"--set {key}: {'.'.join(parts[:i + 1])}.{tag_key}={tag!r} names none of "
                        f"{sorted(members)}; set it first")
                node = members.get(str(tag), next(iter(members.values())))
                where = f" (for {'.'.join(parts[:i + 1])}.{tag_key}={tag!r})"
            else:
                ann = fields[part].annotation
                optional = [a for a in get_args(ann) if a is not type(None)]
                if type(None) in get_args(ann) and len(optional) == 1:
                    ann = optional[0]  # an optional section (model.node_embedding): its keys
                node, where = (dict if typing.get_origin(ann) is dict else ann), ""

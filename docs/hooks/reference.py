"""Pages generated from the code at build time, so the site cannot drift from it.

A page asks for generated text with a marker line (an HTML comment, invisible when the
page is read on GitHub), which :func:`on_page_markdown` replaces before Markdown runs:

* ``<!-- gen:config -->``: every field of :class:`gnntrain.config.RunConfig`, section by
  section, with its type, default, constraints and description, from the pydantic models;
* ``<!-- gen:cli MODULE:FUNCTION -->``: a command line from its argparse parser builder
  (``gnntrain.run:build_parser``);
* ``<!-- gen:api PACKAGE -->``: one mkdocstrings block per name in ``PACKAGE.__all__``;
* ``<!-- gen:formats -->``: the on-disk formats with their current versions;
* ``<!-- gen:moduledoc MODULE -->``: a module's docstring (the on-disk formats are
  documented field by field where they are written), literal blocks as code;
* ``<!-- gen:bench FILE -->``: the tables of a benchmark run from its JSON under
  ``docs/benchmarks/data/`` (:mod:`bench_tables`).

:func:`on_pre_build` fails the build when a public name of ``gnntrain``, ``partition`` or
``samplers`` has no docstring (read by griffe, as mkdocstrings reads it).
``tests/test_docs.py`` runs the same functions without MkDocs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent
REPO = DOCS.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from bench_tables import render_bench  # noqa: E402
from rst import md_text, rst_to_md  # noqa: E402


def use_checkout() -> None:
    """Import this checkout's packages, not another installed copy: put the checkout first
    on ``sys.path`` (MkDocs restores ``sys.path`` after loading a hook, so each hook calls it)."""
    if sys.path[:1] != [str(REPO)]:
        sys.path.insert(0, str(REPO))


PACKAGES = ("gnntrain", "partition", "samplers")
MARKER = re.compile(r"^<!-- gen:(\w+)\s*(\S*)\s*-->$", re.MULTILINE)


# --- text helpers -------------------------------------------------------------------------

def cell(text: str) -> str:
    """Text for one Markdown table cell (one line, pipes escaped)."""
    return " ".join(text.split()).replace("|", "\\|")


# --- config reference ---------------------------------------------------------------------

def type_name(t: Any) -> str:
    """A field's annotation as a reader writes it in YAML terms."""
    origin, args = get_origin(t), get_args(t)
    if t is type(None):
        return "null"
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join('...' if a is Ellipsis else type_name(a) for a in args)}]"
    if isinstance(t, type):
        return t.__name__
    return str(t).replace("typing.", "")


def constraints(field: FieldInfo) -> str:
    """The numeric and length bounds pydantic checks, as ``>= 1, < 2``."""
    ops = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "min_length": "min length",
           "max_length": "max length"}
    out = []
    for meta in field.metadata:
        for attr, op in ops.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{op} {value}")
    return ", ".join(out)


def default_text(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if isinstance(value, BaseModel):
        return "(section below)"
    if value is PydanticUndefined:
        return ""
    return f"`{json.dumps(value, default=str)}`"


def nested_models(t: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``X``, ``X | None``, ``list[X]``)."""
    if isinstance(t, type) and issubclass(t, BaseModel):
        return [t]
    return [m for a in get_args(t) for m in nested_models(a)]


def model_sections(model: type[BaseModel], path: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """``(path, model)`` for ``model`` and every model nested in its fields, depth first."""
    yield path, model
    for name, field in model.model_fields.items():
        for sub in nested_models(field.annotation):
            suffix = "[]" if get_origin(field.annotation) is list else ""
            yield from model_sections(sub, f"{path}.{name}{suffix}")


def field_table(model: type[BaseModel], path: str) -> list[str]:
    lines = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        desc = field.description or ""
        bounds = constraints(field)
        if bounds:
            desc = f"{desc} ({bounds})" if desc else f"({bounds})"
        lines.append(f"| `{path}.{name}` | {cell(type_name(field.annotation))} | "
                     f"{cell(default_text(field))} | {cell(md_text(desc))} |")
    return lines


def config_fields() -> list[str]:
    """Every config field's dotted path (``train.epochs``, ``dataset.synthetic.nodes``),
    as the reference lists them; the dataset's fields once per source."""
    return [f"{path}.{name}" for path, model in config_models() for name in model.model_fields]


def config_models() -> list[tuple[str, type[BaseModel]]]:
    """``(path, model)`` of every section of :class:`RunConfig`, dataset sources included."""
    from gnntrain.config import RunConfig

    out: list[tuple[str, type[BaseModel]]] = []
    for section, field in RunConfig.model_fields.items():
        for model in nested_models(field.annotation):
            out += [(p, m) for p, m in model_sections(model, section)]
    return out


def render_config() -> str:
    from gnntrain.config import RunConfig

    out: list[str] = []
    for section, field in RunConfig.model_fields.items():
        models = nested_models(field.annotation)
        out += [f"## `{section}`", ""]
        if len(models) > 1:
            out += [f"`{section}.source` picks one model; each takes only its own fields (a key "
                    "of another source is refused, naming its path).", ""]
        for model in models:
            for path, sub in model_sections(model, section):
                source = f" (`source: {_source(model)}`)" if len(models) > 1 else ""
                out += [f"### `{path}`{source}: `{sub.__name__}`", ""]
                doc = md_text(sub.__dict__.get("__doc__"))
                if doc:
                    out += [doc, ""]
                out += [*field_table(sub, path), ""]
    return "\n".join(out)


def _source(model: type[BaseModel]) -> str:
    field = model.model_fields.get("source")
    return str(field.default) if field is not None else model.__name__


# --- command lines ------------------------------------------------------------------------

def render_cli(target: str) -> str:
    """``module:function`` returning an ``ArgumentParser``, as usage, description and a
    table of its arguments."""
    module, func = target.split(":")
    parser: argparse.ArgumentParser = getattr(importlib.import_module(module), func)()
    parser.formatter_class = argparse.HelpFormatter
    out = ["```text", parser.format_usage().strip().replace("usage: ", "", 1), "```", ""]
    if parser.description:
        out += ["```text", parser.description.strip(), "```", ""]
    out += ["| argument | value | default | description |", "|---|---|---|---|"]
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(f"`{s}`" for s in action.option_strings) or f"`{action.dest}`"
        if action.nargs == 0:
            value = ""
        elif action.choices:
            value = " \\| ".join(f"`{c}`" for c in action.choices)
        else:
            value = f"`{action.metavar or action.dest.upper()}`"
        default = "" if action.default in (None, False, argparse.SUPPRESS, []) else f"`{action.default}`"
        help_text = (action.help or "") % {"default": action.default, "prog": parser.prog}
        out.append(f"| {names} | {value} | {cell(default)} | {cell(help_text)} |")
    if parser.epilog:
        out += ["", "```text", parser.epilog.strip(), "```"]
    return "\n".join(out)


# --- module docstrings -------------------------------------------------------------------

FORMATS = (  # (format, module, version constant, written by)
    ("partition set", "partition.format", "FORMAT_VERSION", "`partition.build_partition_set`"),
    ("typed partition set", "partition.hetero_store", "TYPED_FORMAT_VERSION",
     "`partition.hetero_store.build_hetero_partition_set`"),
    ("chunks", "partition.chunked", "CHUNK_FORMAT_VERSION", "`partition.chunked.write_chunks`"),
    ("predictions", "gnntrain.predict.nodes", "FORMAT_VERSION", "`python -m gnntrain.predict`"),
    ("run directory", "gnntrain", "__version__", "`gnntrain.fit`, `python -m gnntrain.run` "
     "(`summary.json`'s `version`)"),
)


def render_formats() -> str:
    """The on-disk formats and their versions, read from the constants the writers use."""
    out = ["| format | version | constant | written by |", "|---|---|---|---|"]
    for name, module, const, writer in FORMATS:
        value = getattr(importlib.import_module(module), const)
        out.append(f"| {name} | {value} | `{module}.{const}` | {writer} |")
    return "\n".join(out)


def render_moduledoc(module: str) -> str:
    return rst_to_md(importlib.import_module(module).__doc__ or "")


# --- Python API ---------------------------------------------------------------------------

def public_names(package: str) -> list[str]:
    return list(importlib.import_module(package).__all__)


def render_api(package: str) -> str:
    out = []
    for name in public_names(package):
        out += [f"::: {package}.{name}", "    options:", "      heading_level: 3", ""]
    return "\n".join(out)


def undocumented(packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Names in each package's ``__all__`` whose object has no docstring, read by griffe
    (the reader mkdocstrings uses, so attributes count their docstring after the value)."""
    import griffe

    missing = []
    for package in packages:
        tree = griffe.load(package, search_paths=[str(REPO)], resolve_aliases=True,
                           resolve_external=False)
        for name in public_names(package):
            try:
                obj = tree[name]
                doc = obj.docstring
            except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                missing.append(f"{package}.{name} (not found by griffe)")
                continue
            if doc is None or not doc.value.strip():
                missing.append(f"{package}.{name}")
    return missing


# --- MkDocs hooks -------------------------------------------------------------------------

GENERATORS: dict[str, Callable[[str], str]] = {
    "config": lambda _: render_config(),
    "cli": render_cli,
    "api": render_api,
    "moduledoc": render_moduledoc,
    "formats": lambda _: render_formats(),
    "bench": lambda name: render_bench(DOCS / "benchmarks" / "data" / name),
}


def expand(markdown: str) -> str:
    """``markdown`` with every marker line replaced by its generated text."""
    def one(m: re.Match[str]) -> str:
        kind, arg = m.group(1), m.group(2)
        if kind not in GENERATORS:
            raise ValueError(f"unknown generated section {kind!r}; known: {sorted(GENERATORS)}")
        return GENERATORS[kind](arg)
    return MARKER.sub(one, markdown)


def on_pre_build(config: Any) -> None:
    from mkdocs.exceptions import PluginError

    use_checkout()
    missing = undocumented()
    if missing:
        raise PluginError("public names without a docstring (write one where each is defined): "
                          + ", ".join(missing))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    use_checkout()
    return expand(markdown)

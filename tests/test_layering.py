"""The package layers: ``partition`` <- ``samplers`` <- ``gnntrain``, no circles, light configs.

A lower layer never imports a higher one, at module level or inside a function, so no
package-level import cycle can form. The one exemption is the ``python -m partition``
entry point, which reaches up for the dataset loaders and the run config. Inside a package
no modules import each other in a circle either (a function-level import counts; an import
under ``if TYPE_CHECKING:`` and a module importing its own parent package do not).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("partition", "samplers", "gnntrain")  # bottom to top
ENTRY_POINTS = {"partition/cli.py", "partition/__main__.py"}  # may import gnntrain (thin CLI)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for annotations only)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            inside |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return inside


def _imported_modules(tree: ast.AST, module: str, *, typing_too: bool = True) -> list[tuple[int, str]]:
    """Every module an ``import`` or ``from ... import`` names, at any depth (function-level
    and, unless ``typing_too`` is off, ``TYPE_CHECKING`` imports included), relative imports
    resolved against ``module``."""
    found = []
    skip = set() if typing_too else _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[:-node.level]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return found


def upward_imports(root: Path = REPO, exempt: frozenset[str] = frozenset(ENTRY_POINTS)) -> list[str]:
    """``file:line imports module`` for each import of a higher layer by a lower one."""
    bad = []
    for rank, pkg in enumerate(LAYERS):
        higher = LAYERS[rank + 1:]
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in exempt:
                continue
            module = rel.removesuffix(".py").replace("/", ".")
            if path.name == "__init__.py":
                module = module.removesuffix(".__init__") + ".__init__"
            for line, name in _imported_modules(ast.parse(path.read_text(), rel), module):
                top = name.split(".")[0]
                if top in higher:
                    bad.append(f"{rel}:{line} imports {name} ({pkg} is below {top})")
    return bad


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the three packages (a package is
    named by its ``__init__.py``)."""
    out = {}
    for pkg in LAYERS:
        for path in sorted((root / pkg).rglob("*.py")):
            name = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
            out[name.removesuffix(".__init__")] = path
    return out


def import_circles(root: Path = REPO) -> list[list[str]]:
    """The circles of the import graph inside each package: its strongly connected
    components of more than one module (Tarjan), each sorted."""
    mods = _modules(root)

    def target(name: str) -> str | None:  # the longest module prefix of an imported name
        parts = name.split(".")
        return next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in mods), None)

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        own = m + ".__init__" if path.name == "__init__.py" else m
        for _, name in _imported_modules(ast.parse(path.read_text()), own, typing_too=False):
            t = target(name)
            if t and t != m and t.split(".")[0] == m.split(".")[0] and not m.startswith(t + "."):
                edges[m].add(t)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in mods:
        if v not in index:
            visit(v)
    return circles


def test_no_import_circle_inside_a_package() -> None:
    circles = import_circles()
    assert not circles, "modules importing each other in a circle:\n" + "\n".join(map(" <-> ".join, circles))


def test_the_circle_finder_sees_function_level_imports_and_skips_typing_ones(tmp_path: Path) -> None:
    for pkg in LAYERS:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "gnntrain" / "a.py").write_text("from gnntrain.b import f\n")
    (tmp_path / "gnntrain" / "b.py").write_text("def f():\n    from gnntrain.c import g\n")
    (tmp_path / "gnntrain" / "c.py").write_text("import gnntrain.a\nimport gnntrain\n")
    (tmp_path / "partition" / "x.py").write_text("from partition.y import Y\n")
    (tmp_path / "partition" / "y.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                 "    from partition.x import X\n")
    assert import_circles(tmp_path) == [["gnntrain.a", "gnntrain.b", "gnntrain.c"]]


def test_no_layer_imports_upward() -> None:
    bad = upward_imports()
    assert not bad, "upward imports (layers: partition <- samplers <- gnntrain):\n" + "\n".join(bad)


def test_the_walk_sees_function_level_imports(tmp_path: Path) -> None:
    """The checker itself: a lazy import inside a function of a lower layer is caught,
    and the entry-point exemption covers only the files it names."""
    for pkg in LAYERS:
        (tmp_path / pkg).mkdir()
    (tmp_path / "samplers" / "x.py").write_text("def f():\n    from gnntrain.config import load_config\n")
    (tmp_path / "partition" / "cli.py").write_text("import gnntrain.data\n")
    (tmp_path / "partition" / "y.py").write_text("from samplers import base\n")
    (tmp_path / "gnntrain" / "z.py").write_text("import partition, samplers\nfrom . import z\n")
    bad = upward_imports(tmp_path)
    assert [b.split(" imports ")[0] for b in bad] == ["partition/y.py:1", "samplers/x.py:2"]


@pytest.mark.parametrize("module", ["gnntrain.config", "partition", "samplers"])
def test_config_import_is_light(module: str) -> None:
    """Reading a config (or the bottom layers' package namespaces) loads neither torch,
    numba nor Ray, checked in a fresh interpreter."""
    code = (f"import sys, {module}; "
            "print(sorted(m for m in ('torch', 'numba', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", f"import {module} loaded {out.stdout.strip()}"


def test_lazy_names_resolve() -> None:
    """Every name a package exports lazily is really there (a typo would only show on use)."""
    import partition
    import samplers

    for pkg in (partition, samplers):
        missing = [n for n in pkg.__all__ if getattr(pkg, n, None) is None]
        assert not missing, f"{pkg.__name__} lacks {missing}"

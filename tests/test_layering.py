"""The package layers: ``partition`` <- ``samplers`` <- ``gnntrain``, and light configs.

A lower layer never imports a higher one, at module level or inside a function, so no
package-level import cycle can form. The one exemption is the ``python -m partition``
entry point, which reaches up for the dataset loaders and the run config.
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


def _imported_modules(tree: ast.AST, module: str) -> list[tuple[int, str]]:
    """Every module an ``import`` or ``from ... import`` names, at any depth (function-level
    and ``TYPE_CHECKING`` imports included), relative imports resolved against ``module``."""
    found = []
    for node in ast.walk(tree):
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

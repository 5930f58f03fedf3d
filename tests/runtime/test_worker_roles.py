"""The worker's roles as one run uses them: the cache the config asks for, the one list of
calls, and the rule that nothing outside the model module branches on a built-in model."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from gnntrain.runtime.loopback import LoopbackGroup
from gnntrain.runtime.worker import CALLS, SERVE_CALLS
from gnntrain.tasks import NodeClassification
from partition import build_partition_set
from tests.conftest import REPO, make_graph
from tests.runtime.helpers import tiny_cfg


def _two_workers(tmp_path: Path, *overrides: str) -> LoopbackGroup:
    g = make_graph(400, num_features=8, seed=3)
    cfg = tiny_cfg(tmp_path, *overrides, workers=2)
    pset = build_partition_set(g, cfg.partition)
    parts = [pset.load_part(p) for p in range(2)]
    return LoopbackGroup(cfg, parts, np.asarray(pset.global_degrees()), g.num_classes,
                         cfg.model.arch, NodeClassification())


@pytest.mark.parametrize(("size", "unit", "rows"), [(64, "auto", 64), (64, "rows", 64),
                                                    (64 * 8 * 4, "bytes", 64), (96, "bytes", 3)])
def test_a_run_honours_the_cache_unit(tmp_path: Path, size: float, unit: str, rows: int) -> None:
    """``sampler.cache.unit`` decides how ``size`` is read (8 float32 features = 32 bytes
    per row); the runtime builds its cache with ``samplers.build_cache``."""
    group = _two_workers(tmp_path, "sampler.cache.policy=degree", f"sampler.cache.size={size}",
                         f"sampler.cache.unit={unit}")
    try:
        infos = group.call("setup_cache", phase="cache setup")
        for w, info in zip(group.workers, infos, strict=True):
            assert info["capacity"] == rows
            cache = w.access.reader.cache
            assert cache is not None and len(cache) == rows
    finally:
        group.shutdown()


def test_every_call_names_a_real_role_method(tmp_path: Path) -> None:
    group = _two_workers(tmp_path)
    try:
        w = group.workers[0]
        for table in (CALLS, SERVE_CALLS):
            for name, (role, method) in table.items():
                assert callable(getattr(getattr(w, role) if role else w, method)), name
        with pytest.raises(KeyError):
            w.call("no_such_call")
    finally:
        group.shutdown()


def test_no_builtin_model_checks_outside_the_model_module() -> None:
    """``arch == 'gcn'``-style branches live only in gnntrain/models (user models take the
    same road as built-ins)."""
    offenders = []
    for path in (REPO / "gnntrain").rglob("*.py"):
        if "models" in path.relative_to(REPO / "gnntrain").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                consts = [c.value for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
                if any(v in ("sage", "gcn", "gat") for v in consts):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not offenders, f"built-in model names compared outside gnntrain/models: {offenders}"


"""The scale simulator predicts a real run's per-epoch bytes (it runs the same code)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnntrain.runtime.coordinator import run_training
from gnntrain.simulate import simulate_k
from tests.conftest import make_graph
from tests.runtime.helpers import tiny_cfg


@pytest.mark.parametrize(("k", "cache", "table"), [(2, "none", False), (4, "presample", False),
                                                   (2, "none", True)])
def test_simulated_bytes_match_a_real_run(ray_local: None, tmp_path: Path, k: int, cache: str,
                                          table: bool) -> None:
    g = make_graph(500, seed=11)
    extra = ["model.node_embedding={dim: 5}"] if table else []
    cfg = tiny_cfg(tmp_path, "train.epochs=1", f"sampler.cache.policy={cache}", "sampler.cache.size=0.2",
                   *extra, workers=k)
    real = run_training(cfg, graph=g, progress=False)
    rec = json.loads((Path(real["run_dir"]) / "metrics.jsonl").read_text().splitlines()[0])
    sim = simulate_k(cfg, g, k)
    cats = ("sample", "feature", "gradient", "embedding", "embedding_grad")
    for cat in cats:
        assert sim["bytes_by_category"][cat] == rec["comm"]["by_category"][cat], cat
    assert sim["bytes_by_category"]["feature"] > 0
    assert (sim["bytes_by_category"]["embedding"] > 0) == table
    assert (sim["bytes_by_category"]["embedding_grad"] > 0) == table
    assert sim["remote_input_share"] == pytest.approx(rec["remote_input_share"])


def test_simulator_cli_writes_json(tmp_path: Path) -> None:
    import yaml

    from gnntrain.simulate import main

    cfg = tiny_cfg(tmp_path).model_dump(mode="json")
    cfg["dataset"]["synthetic"].update({"nodes": 2000, "avg_degree": 8, "features": 8, "classes": 4})
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    assert main(["--config", str(p), "--parts", "2,4", "--json", str(tmp_path / "s.json")]) == 0
    rows = json.loads((tmp_path / "s.json").read_text())["rows"]
    assert [r["k"] for r in rows] == [2, 4]
    assert rows[1]["remote_input_share"] > rows[0]["remote_input_share"] > 0


def test_simulated_link_bytes_match_a_real_run(ray_local: None, tmp_path: Path) -> None:
    """A link task that holds its split (``simulate_k(task=...)``) simulates exactly the
    sample, feature and gradient bytes a real 2-worker link epoch sends, negatives included
    (what bench.link's negative-bytes figure is measured with)."""
    from gnntrain.tasks import build_task

    g = make_graph(500, seed=11)
    cfg = tiny_cfg(tmp_path, "train.epochs=1", "task.kind=link", "task.options={hits_k: 5}", workers=2)
    real = run_training(cfg, graph=g, progress=False)
    rec = json.loads((Path(real["run_dir"]) / "metrics.jsonl").read_text().splitlines()[0])
    task = build_task("link", {"hits_k": 5})
    sim = simulate_k(cfg, task.load_graph(cfg.dataset, g), 2, task=task)
    for cat in ("sample", "feature", "gradient"):
        assert sim["bytes_by_category"][cat] == rec["comm"]["by_category"][cat], cat
    assert sim["bytes_by_category"]["feature"] > 0

"""``python -m partition``: config in, partition sets + partition.json + PNG out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from partition import open_partition_set, quality_report
from partition.cli import main, run
from partition.graph import Graph
from tests.conftest import REPO


def _config(tmp_path: Path, **partition: object) -> Path:
    cfg = {
        "dataset": {"name": "syn", "source": "synthetic",
                    "synthetic": {"nodes": 600, "avg_degree": 6, "features": 4, "classes": 3}},
        "partition": {"root": str(tmp_path / "parts"), **partition},
        "sampler": {"fanouts": [5, 3]},
        "model": {"layers": 2},
        "train": {"run_root": str(tmp_path / "runs")},
    }
    path = tmp_path / "syn.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_compare_writes_sets_and_report(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    out = tmp_path / "report"
    reports = run(["--config", str(cfg), "--parts", "3", "--compare", "random,metis,ldg",
                   "--out", str(out)])
    assert [r.method for r in reports] == ["metis", "random", "ldg"]  # configured method leads
    body = json.loads((out / "partition.json").read_text())
    assert body["method"] == "metis" and body["num_parts"] == 3
    assert [c["method"] for c in body["compare"]] == ["random", "ldg"]
    assert body["steps"][0]["name"] == "load"
    assert (out / "partition.png").stat().st_size > 0
    sets = sorted((tmp_path / "parts").iterdir())
    assert len(sets) == 3
    for r in reports:
        assert r.partition_path is not None
        assert open_partition_set(r.partition_path).meta.method == r.method
    metis, rnd = reports[0], reports[1]
    assert metis.edge_cut_fraction < rnd.edge_cut_fraction


def test_second_run_reuses_the_set_and_says_so(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    run(["--config", str(cfg), "--parts", "2", "--out", str(tmp_path / "a"), "--no-plot"])
    (again,) = run(["--config", str(cfg), "--parts", "2", "--out", str(tmp_path / "b"), "--no-plot"])
    assert any("reused" in n for n in again.notes)
    assert not (tmp_path / "b" / "partition.png").exists()
    (forced,) = run(["--config", str(cfg), "--parts", "2", "--force", "--out", str(tmp_path / "c"),
                     "--no-plot"])
    assert not any("reused" in n for n in forced.notes)


def test_errors_exit_2_with_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path)
    assert main(["--config", str(cfg), "--parts", "1000"]) == 2
    assert "partition.parts=1000" in capsys.readouterr().err
    assert main(["--config", str(cfg), "--compare", "metis,spectral"]) == 2
    assert "spectral" in capsys.readouterr().err
    assert main(["--config", str(cfg), "--set", "partition.imbalance=3"]) == 2
    assert "partition.imbalance" in capsys.readouterr().err


def test_module_entry_point_on_cora(data_root: Path, tmp_path: Path) -> None:
    cora = REPO / "datasets" / "cora.yaml"
    if not cora.is_file():  # dataset configs are written alongside; fall back to the documented form
        cora = tmp_path / "cora.yaml"
        cora.write_text(yaml.safe_dump({"dataset": {"name": "cora", "source": "planetoid",
                                                    "path": "planetoid", "planetoid_name": "Cora"}}))
    proc = subprocess.run(
        [sys.executable, "-m", "partition", "--config", str(cora), "--parts", "4",
         "--set", f"partition.root={tmp_path / 'parts'}", "--out", str(tmp_path / "out")],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    body = json.loads((tmp_path / "out" / "partition.json").read_text())
    assert body["num_nodes"] == 2708 and body["num_parts"] == 4
    assert body["edge_cut_fraction"] < 0.5 * body["random_edge_cut_fraction"]
    assert "edge cut" in proc.stdout


def test_chunks_are_partitioned_by_the_ray_pipeline_and_reported_from_the_set(
        ray_tasks: None, tmp_path: Path, messy_graph: Graph) -> None:
    """``source: chunks``: the pipeline builds the set (never the whole graph in this
    process), the report comes from the set and equals the whole-graph report of its
    assignment; a whole-graph method is refused before any work."""
    from partition.chunked import ChunkedGraph, write_chunks

    write_chunks(messy_graph, tmp_path / "chunks", edges_per_chunk=97, nodes_per_chunk=25)
    cfg = {"dataset": {"name": messy_graph.name, "source": "chunks", "path": str(tmp_path / "chunks")},
           "partition": {"root": str(tmp_path / "parts"), "method": "stream"},
           "sampler": {"fanouts": [5, 3]}, "model": {"layers": 2}, "train": {"run_root": str(tmp_path / "runs")}}
    path = tmp_path / "chunks.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ChunkedGraph, "to_graph", lambda self: pytest.fail("the whole chunked graph was loaded"))
        (report,) = run(["--config", str(path), "--parts", "3", "--out", str(tmp_path / "out"), "--no-plot"])
    pset = open_partition_set(report.partition_path)
    want = quality_report(messy_graph, pset.assignment(), num_parts=3, method="stream")
    assert report.method == "stream" and pset.meta.method == "stream"
    for key in ("edge_cut", "random_edge_cut", "cut_matrix", "parts", "imbalance"):
        assert getattr(report, key) == getattr(want, key), key
    assert json.loads((tmp_path / "out" / "partition.json").read_text())["edge_cut"] == report.edge_cut
    assert main(["--config", str(path), "--parts", "3", "--method", "metis", "--root", str(tmp_path / "m")]) == 2
    assert not (tmp_path / "m").exists()

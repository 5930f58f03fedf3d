"""bench.scale: tiny mode end to end; the extrapolation is the arithmetic it claims to be."""

from __future__ import annotations

import json
import math

import pytest

from bench.scale import PAPERS, PER_SEED, fit_log, main, train_frac_for


@pytest.fixture(scope="module")
def two_sizes(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("scale")
    path = tmp / "scale.json"
    assert main(["--sizes", "3000,6000", "--parts", "2", "--json", str(path),
                 "--root", str(tmp / "parts")]) == 0
    assert path.with_suffix(".txt").read_text().count(PAPERS.name) >= 1
    return json.loads(path.read_text())


def test_measured_bytes_per_seed_are_positive(two_sizes: dict) -> None:
    rows = two_sizes["rows"]
    assert [(r["nodes"], r["k"]) for r in rows] == [(3000, 2), (6000, 2)]
    for r in rows:
        assert r["verified_against_simulate_k"] is True  # the lean epoch counts what simulate_k does
        assert r["per_seed"]["feature"] > 0 and r["per_seed"]["sample"] > 0
        assert r["single_seed_inputs"] > r["input_nodes_per_seed"]  # seeds of a batch share nodes
        for c in PER_SEED:  # per seed is the simulator's epoch count over the epoch's seeds
            assert r["per_seed"][c] * r["seeds"] == pytest.approx(r["sim"]["bytes_by_category"][c])
        assert r["sim"]["bytes_by_category"]["gradient"] == pytest.approx(
            r["gradient_per_step_worker"] * r["k"] * r["steps"])


def test_extrapolated_epoch_is_per_seed_times_seeds_plus_gradient(two_sizes: dict) -> None:
    (e,) = two_sizes["extrapolated"]
    k = e["k"]
    assert e["steps"] == math.ceil(math.ceil(1_207_179 / k) / 1024) == 590
    for how in ("fit", "largest", "limit"):
        x = e[how]
        for c in PER_SEED:
            assert x["bytes_by_category"][c] == pytest.approx(x["per_seed"][c] * 1_207_179)
        assert x["bytes_by_category"]["gradient"] == pytest.approx(e["gradient_per_step_worker"] * k * 590)
        assert x["bytes_total"] == pytest.approx(sum(x["bytes_by_category"].values()))
        assert x["per_worker_mean"] * k == pytest.approx(x["bytes_total"])
        assert x["per_worker_max"] >= x["per_worker_mean"] * (1 - 1e-9)
    last = two_sizes["rows"][-1]
    assert e["largest"]["per_seed"] == last["per_seed"]
    ratio = last["single_seed_inputs"] / last["input_nodes_per_seed"]
    for c in PER_SEED:  # the ceiling: no two seeds of a batch share an input node
        assert e["limit"]["per_seed"][c] == pytest.approx(last["per_seed"][c] * ratio)
    assert e["limit"]["bytes_total"] > e["largest"]["bytes_total"]


def test_fit_reproduces_the_points_it_was_fitted_on(two_sizes: dict) -> None:
    (e,) = two_sizes["extrapolated"]
    for c in ("sample", "feature"):
        f = e["fits"][c]
        for r in two_sizes["rows"]:
            assert f["a"] + f["b"] * math.log(r["nodes"]) == pytest.approx(r["per_seed"][c], rel=1e-9)
        assert f["max_rel_residual"] < 1e-9
        at_target = f["a"] + f["b"] * math.log(PAPERS.nodes)
        assert e["fit"]["per_seed"][c] == pytest.approx(at_target)
    # three points on a line in ln n: still exact; off the line: the residual says so
    line = fit_log([10, 100, 1000], [1.0, 2.0, 3.0])
    assert line(10_000) == pytest.approx(4.0) and line.max_rel_residual < 1e-12
    assert fit_log([10, 100, 1000], [1.0, 3.0, 3.0]).max_rel_residual > 0.05


def test_train_share_gives_whole_batches_at_the_largest_k() -> None:
    for n, k in ((3000, 2), (1_000_000, 64), (4_000_000, 64), (10_000_000, 64)):
        frac = train_frac_for(n, k, 1024, 0.1)
        batches = frac * n / (0.95 * 1024 * k)
        assert batches == pytest.approx(round(batches)) and round(batches) >= 1
    assert train_frac_for(3000, 64, 1024, 0.1) == 0.9  # too small for one batch each: capped

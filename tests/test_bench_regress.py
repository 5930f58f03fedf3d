"""bench.regress without measuring: the bands a baseline gets, and what counts as a move."""

from __future__ import annotations

from bench.regress import (
    BASELINE,
    EXACT_BAND,
    RATIO_FLOOR,
    RATIOS,
    band,
    baseline,
    compare,
    cpu_class,
    read_baselines,
)


def test_a_ratio_band_is_its_spread_with_a_floor_and_an_exact_band_is_rounding() -> None:
    assert band("epoch.ours_over_pyg", [4.0, 4.1, 4.2]) == RATIO_FLOOR  # 5% range: the floor
    assert band("epoch.ours_over_pyg", [1.0, 1.5, 2.0]) == 2.5  # 2.5 x (2.0 / 1.0 - 1)
    assert band("comm.x.feature_bytes", [7.0, 7.0, 7.0]) == EXACT_BAND


def test_a_move_beyond_the_band_fails_either_way_within_passes() -> None:
    base = baseline([{"epoch.ours_over_pyg": 4.0, "comm.x.feature_bytes": 100.0}] * 3)
    assert base["epoch.ours_over_pyg"] == {"value": 4.0, "runs": [4.0] * 3, "band": RATIO_FLOOR,
                                           "kind": "ratio"}

    def moved(now: dict[str, float]) -> list[str]:
        return [c.name.split()[0] for c in compare(now, base) if not c.ok]

    assert moved({"epoch.ours_over_pyg": 4.9, "comm.x.feature_bytes": 100.0}) == []
    assert moved({"epoch.ours_over_pyg": 4.0 / 1.2, "comm.x.feature_bytes": 100.0}) == []
    assert moved({"epoch.ours_over_pyg": 5.1, "comm.x.feature_bytes": 100.0}) == ["epoch.ours_over_pyg"]
    assert moved({"epoch.ours_over_pyg": 4.0 / 1.3, "comm.x.feature_bytes": 101.0}) == [
        "epoch.ours_over_pyg", "comm.x.feature_bytes"]
    assert moved({"epoch.ours_over_pyg": 4.0}) == ["comm.x.feature_bytes"]  # absent: fails


def test_every_committed_baseline_has_every_ratio_and_exact_byte_counts() -> None:
    baselines = read_baselines(BASELINE)
    assert baselines, "no baseline committed"
    for cls, base in baselines.items():
        figures = base["figures"]
        assert cls in ("avx512_bf16", "avx512", "avx2", "other"), cls
        pending = base.get("pending", {})  # measurement changed since: each with its reason
        assert set(RATIOS) <= set(figures) | set(pending) and all(pending.values()), cls
        assert not set(pending) & set(figures), cls
        assert all(len(f["runs"]) >= 3 and f["band"] >= RATIO_FLOOR for n, f in figures.items() if n in RATIOS)
        assert all(f["kind"] == "exact" and len(set(f["runs"])) == 1
                   for n, f in figures.items() if n.startswith("comm."))


def test_the_cpu_class_follows_the_vector_instructions() -> None:
    assert cpu_class({"flags": "sse avx2 avx512f avx512_bf16"}) == "avx512_bf16"
    assert cpu_class({"flags": "sse avx2 avx512f"}) == "avx512"
    assert cpu_class({"flags": "sse avx2 fma"}) == "avx2"
    assert cpu_class({"flags": "neon"}) == "other" and cpu_class({}) == "other"

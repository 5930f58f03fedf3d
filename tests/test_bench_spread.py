"""bench.harness.stats: the mean and spread over seeds, and the gap of two means with its error."""

from __future__ import annotations

import math

import pytest

from bench.harness.stats import gap, spread


def test_spread_uses_the_sample_standard_deviation() -> None:
    s = spread([1.0, 2.0, 3.0, 6.0])
    assert (s.n, s.mean, s.min, s.max) == (4, 3.0, 1.0, 6.0)
    assert s.std == pytest.approx(math.sqrt(14 / 3))  # sum of squares 14 over n - 1
    assert spread([5.0]).std == 0.0
    with pytest.raises(ValueError, match="no values"):
        spread([])


def test_gap_is_the_difference_of_means_with_the_standard_error_of_independent_sides() -> None:
    ours, ref = spread([80.0, 82.0, 84.0]), spread([79.0, 81.0])
    diff, se = gap(ours, ref)
    assert diff == pytest.approx(2.0)
    assert se == pytest.approx(math.sqrt(4.0 / 3 + 2.0 / 2))  # std^2 / n on each side
    assert gap(ref, ours)[0] == pytest.approx(-2.0)

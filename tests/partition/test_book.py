"""The partition book: owner, part ranges, local <-> global ids, halo grouping."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from partition import Part, PartitionBook, PartitionError, PartitionFormatError, PartitionSet


@pytest.fixture
def book_with_empty_parts() -> PartitionBook:
    return PartitionBook([0, 0, 3, 3, 7, 10])  # parts 0 and 2 own nothing


def test_owner_matches_the_ranges(book_with_empty_parts: PartitionBook) -> None:
    b = book_with_empty_parts
    brute = np.concatenate([np.full(hi - lo, p) for p, (lo, hi) in
                            enumerate(zip(b.offsets[:-1], b.offsets[1:], strict=True))])
    assert np.array_equal(b.owner(np.arange(b.num_nodes)), brute)
    assert (b.num_parts, b.num_nodes) == (5, 10)
    assert b.part_sizes().tolist() == [0, 3, 0, 4, 3]
    assert b.owner(np.empty(0, np.int64)).shape == (0,)


@pytest.mark.parametrize("bad", [-1, 10])
def test_owner_refuses_ids_outside_the_graph(book_with_empty_parts: PartitionBook, bad: int) -> None:
    with pytest.raises(PartitionError, match=rf"node id {bad} is outside \[0, num_nodes=10\)"):
        book_with_empty_parts.owner(np.array([0, bad]))


def test_local_global_round_trip(book_with_empty_parts: PartitionBook) -> None:
    b = book_with_empty_parts
    assert b.part_range(3) == (3, 7)
    ids = np.array([3, 6, 4])
    assert b.to_local(ids, 3).tolist() == [0, 3, 1]
    assert np.array_equal(b.to_global(b.to_local(ids, 3), 3), ids)
    with pytest.raises(PartitionError, match=r"node id 7 is not owned by part 3 \(it owns \[3, 7\)\)"):
        b.to_local(np.array([7]), 3)
    with pytest.raises(PartitionError, match=r"row 4 is outside part 3's \[0, 4\)"):
        b.to_global(np.array([4]), 3)
    with pytest.raises(PartitionError, match=r"part p=5: expected an int in \[0, 5\)"):
        b.part_range(5)


@pytest.mark.parametrize("offsets,msg", [([1, 4], "must start at 0"), ([0, 5, 4], "never decrease"),
                                         ([0], "k \\+ 1 >= 2")])
def test_bad_offsets(offsets: list[int], msg: str) -> None:
    with pytest.raises(PartitionError, match=msg):
        PartitionBook(offsets)


def test_book_is_read_only() -> None:
    src = np.array([0, 2, 5])
    b = PartitionBook(src)
    src[1] = 4  # the caller's array is not the book's
    assert b.part_range(0) == (0, 2)
    with pytest.raises(ValueError, match="read-only"):
        b.offsets[1] = 3


def test_parts_carry_the_sets_book_and_group_their_halo(four_parts: PartitionSet) -> None:
    """The stored halo offsets group each part's halo by owner exactly as the book does."""
    for p in range(four_parts.num_parts):
        part = four_parts.load_part(p)
        assert part.book is four_parts.book
        assert (part.start, part.stop) == four_parts.book.part_range(p)
        groups = part.halo_by_owner()
        assert p not in groups and sum(s.stop - s.start for s in groups.values()) == part.halo_ids.size
        for q, s in groups.items():
            assert np.all(four_parts.book.owner(part.halo_ids[s]) == q)
            assert np.array_equal(part.halo_ids[s], part.halo_of(q))


def test_part_refuses_halo_offsets_that_disagree_with_the_book(four_parts: PartitionSet) -> None:
    part = four_parts.load_part(1)
    wrong = np.array(part.halo_offsets)
    wrong[2] += 1
    with pytest.raises(PartitionFormatError, match="halo_offsets .* do not group halo_ids by owner"):
        replace(part, halo_offsets=wrong)


def test_whole_graph_part() -> None:
    from tests.conftest import make_graph

    g = make_graph(50)
    part = Part.whole_graph(g)
    assert part.book.part_range(0) == (0, 50) and part.halo_by_owner() == {}
    assert np.array_equal(part.book.owner(np.arange(50)), np.zeros(50))

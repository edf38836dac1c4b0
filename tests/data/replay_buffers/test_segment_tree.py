"""SumSegmentTree and MinSegmentTree against brute-force numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from cadence.data.replay_buffers.segment_tree import MinSegmentTree, SumSegmentTree

# Capacities below, at and above the top level's size (4096), odd and power-of-two ones.
CAPACITIES = [1, 2, 5, 64, 4096, 5000, 70_000]


@pytest.mark.parametrize("capacity", CAPACITIES)
def test_random_updates_match_brute_force(capacity: int) -> None:
    rng = np.random.default_rng(capacity)
    sums, mins = SumSegmentTree(capacity), MinSegmentTree(capacity)
    ref_sum = np.zeros(capacity)
    ref_min = np.full(capacity, np.inf)
    for round_ in range(30):
        # Small batches follow leaf paths; a few big ones take the rebuild path.
        size = capacity * 2 if round_ % 10 == 9 else int(rng.integers(1, 300))
        index = rng.integers(0, capacity, size)
        # Integer values keep every sum exact, so the comparison can be exact too.
        value = rng.integers(0, 1000, size).astype(np.float64)
        sums.update(index, value)
        mins.update(index, value)
        # The reference applies the writes in order: the last write to an index wins.
        ref_sum[index] = value
        ref_min[index] = value
        assert sums.total == ref_sum.sum()
        assert mins.total == ref_min.min()
        np.testing.assert_array_equal(sums[:], ref_sum)
        np.testing.assert_array_equal(mins[np.arange(capacity)], ref_min)
        for _ in range(5):
            start, end = sorted(rng.integers(0, capacity + 1, 2).tolist())
            assert sums.query(start, end) == ref_sum[start:end].sum()
            assert mins.query(start, end) == (ref_min[start:end].min() if end > start else np.inf)


def test_duplicate_indices_last_write_wins() -> None:
    tree = SumSegmentTree(10)
    tree.update(np.array([3, 7, 3, 3]), np.array([1.0, 2.0, 5.0, 9.0]))
    assert tree[np.array([3, 7])].tolist() == [9.0, 2.0]
    assert tree.total == 11.0
    mins = MinSegmentTree(10)
    mins.update(np.array([4, 4]), np.array([0.5, 8.0]))
    assert mins.total == 8.0


@pytest.mark.parametrize("capacity", [7, 4096, 100_000])
def test_find_prefix_sum_matches_cumulative_search(capacity: int) -> None:
    rng = np.random.default_rng(0)
    tree = SumSegmentTree(capacity)
    # Integer values with many zeros: exact sums, and empty leaves to skip over.
    values = rng.integers(0, 5, capacity).astype(np.float64) * (rng.random(capacity) < 0.4)
    values[rng.integers(0, capacity)] = 3.0  # at least one leaf holds mass
    tree.update(np.arange(capacity), values)
    cumulative = np.cumsum(values)
    queries = rng.random(20_000) * cumulative[-1]
    queries[:50] = rng.integers(0, int(cumulative[-1]), 50)  # exact boundaries
    found = tree.find_prefix_sum(queries)
    expected = np.searchsorted(cumulative, queries, side="right")
    np.testing.assert_array_equal(found, expected)
    assert (values[found] > 0).all()


def test_find_prefix_sum_never_returns_an_empty_leaf() -> None:
    rng = np.random.default_rng(0)
    capacity = 2**15
    # Values over twenty orders of magnitude, most leaves empty: the running sums round,
    # and with this seed some queries at the boundaries do reach an empty leaf on the fast
    # descent (they are sent down again, steering clear of empty children).
    values = np.exp(rng.uniform(-25, 25, capacity)) * (rng.random(capacity) < 0.3)
    tree = SumSegmentTree(capacity)
    tree.update(np.arange(capacity), values)
    total = tree.total
    cumulative = np.cumsum(values)
    boundaries = cumulative[values > 0]
    queries = np.concatenate(
        [
            boundaries,
            np.nextafter(boundaries, np.inf),
            np.nextafter(boundaries, -np.inf),
            rng.random(10_000) * total,
            [total, np.nextafter(total, np.inf), total * 2, -1.0, 0.0],
        ]
    )
    found = tree.find_prefix_sum(queries)
    assert (values[found] > 0).all()
    full = np.flatnonzero(values)
    # At or past the total: the leaf of the largest value below it (the very last full
    # leaf may be too small to register in a total this large).
    assert found[-5] == found[-4] == found[-3] == tree.find_prefix_sum(np.nextafter(total, 0))
    assert found[-2] == found[-1] == full[0]  # negative values and 0: the first
    # Away from rounding, the answer is the brute-force one.
    inside = rng.random(10_000) * total
    agree = tree.find_prefix_sum(inside) == np.searchsorted(cumulative, inside, side="right")
    assert agree.mean() > 0.999


def test_find_prefix_sum_frequencies_are_proportional() -> None:
    rng = np.random.default_rng(2)
    tree = SumSegmentTree(8)
    weights = np.array([1.0, 0.0, 2.0, 3.0, 0.0, 0.0, 4.0, 10.0])
    tree.update(np.arange(8), weights)
    found = tree.find_prefix_sum(rng.random(200_000) * tree.total)
    frequencies = np.bincount(found, minlength=8) / found.size
    np.testing.assert_allclose(frequencies, weights / weights.sum(), atol=0.005)


def test_find_prefix_sum_keeps_the_shape() -> None:
    tree = SumSegmentTree(4)
    tree.update(np.arange(4), np.ones(4))
    assert tree.find_prefix_sum(np.array([[0.5, 1.5, 2.5], [3.5, 0.0, 3.99]])).tolist() == [
        [0, 1, 2],
        [3, 0, 3],
    ]
    assert tree.find_prefix_sum(np.float64(2.2)).tolist() == 2


def test_clear_and_empty_tree() -> None:
    tree = SumSegmentTree(100)
    tree.update(np.arange(100), np.ones(100))
    tree.clear()
    assert tree.total == 0.0
    assert tree.find_prefix_sum(np.array([0.3])).tolist() == [0]
    mins = MinSegmentTree(3)
    assert mins.total == np.inf
    mins.update(1, 2.0)
    mins.clear()
    assert mins.total == np.inf


def test_scalar_value_broadcasts() -> None:
    tree = SumSegmentTree(5)
    tree.update(np.array([0, 2, 4]), 1.5)
    assert tree.total == 4.5


def test_errors_name_the_problem() -> None:
    tree = SumSegmentTree(10)
    with pytest.raises(ValueError, match="index 10 is out of range"):
        tree.update(np.array([1, 10]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="index -1 is out of range"):
        tree.update(-1, 1.0)
    with pytest.raises(ValueError, match="one value per index"):
        tree.update(np.array([1, 2]), np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="integers"):
        tree.update(np.array([1.5]), np.array([1.0]))
    with pytest.raises(ValueError, match="start <= end"):
        tree.query(5, 3)
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        MinSegmentTree(0)

"""Segment trees over a fixed number of leaves: sums (for proportional sampling) and minima.

A prioritized sampler keeps one value per item of its storage and needs, at every
sample, the total of all values, the minimum (to normalise importance weights), and the
item whose running sum first passes a random number. These trees answer each in time
logarithmic in the capacity, and every operation works on a whole batch of leaves or
queries at once with numpy (float64), level by level: there is no Python loop over the
items of a batch, and no compiled extension.

Layout: the leaves are padded to a power of two, ``2**depth``, and level ``d`` of the
tree holds ``2**d`` nodes, node ``j`` being the reduction of nodes ``2j`` and ``2j + 1``
of level ``d + 1``. Only the levels below a small "top" level (at most
``2**_TOP_LEVEL_BITS`` nodes) are kept: the top level is short enough that reducing or
scanning it whole with one numpy call is cheaper than walking a dozen more levels one
call at a time. That keeps a batched update to ``depth - top`` rounds of numpy calls
(8 for a million leaves) instead of ``depth`` (20).

Examples:
    >>> import numpy as np
    >>> tree = SumSegmentTree(5)
    >>> tree.update(np.array([0, 1, 2, 3, 4]), np.array([1.0, 0.0, 2.0, 3.0, 4.0]))
    >>> tree.total
    10.0
    >>> tree.find_prefix_sum(np.array([0.5, 1.0, 3.0, 9.99])).tolist()
    [0, 2, 3, 4]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MinSegmentTree", "SumSegmentTree", "update_together"]

# The top level holds at most 2**12 = 4096 nodes: one numpy call reduces or scans it in
# a few microseconds, about what a single tree level costs in numpy-call overhead.
_TOP_LEVEL_BITS = 12


class _SegmentTree:
    """A tree of one associative reduction (``_ufunc``, with identity ``_identity``).

    Args:
        capacity: the number of leaves (items), at least 1.
    """

    _ufunc: np.ufunc
    _identity: float

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(
                f"{type(self).__name__}: capacity must be a positive int, got {capacity!r}."
            )
        self.capacity = int(capacity)
        # depth: the leaf level; 2**depth >= capacity leaves, the padding holds the identity.
        self._depth = max(int(self.capacity - 1).bit_length(), 0)
        self._top = min(self._depth, _TOP_LEVEL_BITS)
        # _levels[k] is level top + k; the last one is the leaves.
        self._levels = [
            np.full(2**d, self._identity, dtype=np.float64) for d in range(self._top, self._depth + 1)
        ]
        # Strided views of each level's even (left) and odd (right) nodes, made once: node
        # j of the level above reduces left[j] and right[j].
        self._left = [level[0::2] for level in self._levels]
        self._right = [level[1::2] for level in self._levels]

    # -- reading ------------------------------------------------------------------------

    @property
    def _leaves(self) -> np.ndarray:
        return self._levels[-1]

    def __len__(self) -> int:
        return self.capacity

    def __getitem__(self, index: Any) -> np.ndarray:
        """The values of the leaves at ``index`` (an int, array or slice over ``[0, capacity)``)."""
        if isinstance(index, slice):
            return self._leaves[: self.capacity][index].copy()
        return self._leaves[self._checked_index(index)]

    @property
    def total(self) -> float:
        """The reduction over all leaves (the identity when nothing was written).

        Examples:
            >>> tree = MinSegmentTree(3)
            >>> tree.total
            inf
            >>> tree.update(1, 4.0)
            >>> tree.total
            4.0
        """
        return float(self._ufunc.reduce(self._levels[0]))

    def query(self, start: int = 0, end: int | None = None) -> float:
        """The reduction over the leaves ``start, ..., end - 1``.

        Args:
            start: the first leaf of the range.
            end: one past the last leaf of the range (``capacity`` if ``None``).

        Returns:
            The reduction as a Python float (the identity for an empty range).

        Raises:
            ValueError: if the range is not within ``[0, capacity]``.

        Examples:
            >>> import numpy as np
            >>> tree = SumSegmentTree(10)
            >>> tree.update(np.arange(10), np.arange(10.0))
            >>> tree.query(2, 5), tree.query(7), tree.query(4, 4)
            (9.0, 24.0, 0.0)
        """
        end = self.capacity if end is None else end
        if not 0 <= start <= end <= self.capacity:
            raise ValueError(
                f"{type(self).__name__}.query: expected 0 <= start <= end <= capacity="
                f"{self.capacity}, got start={start}, end={end}."
            )
        op = self._ufunc
        acc = self._identity
        lo, hi = int(start), int(end)
        # Bottom-up: a range end that splits a pair of siblings contributes its node on
        # its own; the whole pairs in between are covered by their parents, one level up.
        for k in range(len(self._levels) - 1, 0, -1):
            if lo >= hi:
                return float(acc)
            level = self._levels[k]
            if lo & 1:
                acc = op(acc, level[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                acc = op(acc, level[hi])
            lo >>= 1
            hi >>= 1
        if lo < hi:
            acc = op(acc, op.reduce(self._levels[0][lo:hi]))
        return float(acc)

    # -- writing ------------------------------------------------------------------------

    def update(self, index: Any, value: Any) -> None:
        """Sets the leaves at ``index`` to ``value`` and recomputes their ancestors.

        Args:
            index: leaf indices (int or array of ints in ``[0, capacity)``, any shape).
                Where an index repeats, the value written last (in flattened order) wins.
            value: one value per index, or one value for all of them.

        Raises:
            ValueError: if an index is out of range or ``value`` does not match ``index``.

        Examples:
            >>> import numpy as np
            >>> tree = SumSegmentTree(4)
            >>> tree.update(np.array([1, 3, 1]), np.array([5.0, 2.0, 1.0]))
            >>> tree[np.arange(4)].tolist(), tree.total
            ([0.0, 1.0, 0.0, 2.0], 3.0)
        """
        update_together([self], index, [value])

    def clear(self) -> None:
        """Sets every leaf back to the identity (0 for sums, +inf for minima).

        Examples:
            >>> tree = SumSegmentTree(2)
            >>> tree.update(0, 3.0)
            >>> tree.clear()
            >>> tree.total
            0.0
        """
        for level in self._levels:
            level.fill(self._identity)

    def _rebuild(self) -> None:
        for k in range(len(self._levels) - 1, 0, -1):
            self._ufunc(self._left[k], self._right[k], out=self._levels[k - 1])

    def _checked_index(self, index: Any) -> np.ndarray:
        array = np.asarray(index)
        if array.dtype.kind not in "iu":
            raise ValueError(
                f"{type(self).__name__}: index must hold integers, got dtype {array.dtype}."
            )
        array = array.astype(np.int64, copy=False)
        if array.size and (array.min() < 0 or array.max() >= self.capacity):
            bad = array[(array < 0) | (array >= self.capacity)].reshape(-1)[0]
            raise ValueError(
                f"{type(self).__name__}: index {int(bad)} is out of range; expected leaves in "
                f"[0, {self.capacity})."
            )
        return array

    def __repr__(self) -> str:
        return f"{type(self).__name__}(capacity={self.capacity})"


class SumSegmentTree(_SegmentTree):
    """Sums over leaves, with batched proportional search (``find_prefix_sum``).

    Unwritten leaves hold 0. Values should be non-negative for ``find_prefix_sum`` to
    mean anything (sums of negative values are still exact).

    Args:
        capacity: the number of leaves, at least 1.

    Examples:
        >>> import numpy as np
        >>> tree = SumSegmentTree(4)
        >>> tree.update(np.array([0, 2, 3]), np.array([2.0, 1.0, 5.0]))
        >>> tree.total, tree.query(1, 3)
        (8.0, 1.0)
        >>> tree.find_prefix_sum(np.array([0.0, 1.99, 2.0, 3.5])).tolist()
        [0, 0, 2, 3]
    """

    _ufunc = np.add
    _identity = 0.0

    def find_prefix_sum(self, values: Any) -> np.ndarray:
        """For each value ``v``, the leaf ``i`` with ``sum(leaves[:i]) <= v < sum(leaves[:i+1])``.

        Drawing ``v`` uniformly in ``[0, total)`` thus picks leaf ``i`` with probability
        ``leaves[i] / total``. All values descend the tree together, one numpy call per
        level. Leaves holding 0 are never returned while the total is positive: a value
        at or past the total (rounding) gives the last positive leaf, a negative value
        the first.

        Args:
            values: the prefix-sum values (any shape).

        Returns:
            The leaf indices, an ``int64`` array of the same shape as ``values``.

        Examples:
            >>> import numpy as np
            >>> tree = SumSegmentTree(3)
            >>> tree.update(np.arange(3), np.array([1.0, 1.0, 2.0]))
            >>> tree.find_prefix_sum(np.array([[0.5, 1.5], [2.0, 10.0]])).tolist()
            [[0, 1], [2, 2]]
        """
        values = np.asarray(values, dtype=np.float64)
        shape = values.shape
        top = self._levels[0]
        cumulative = np.cumsum(top)
        total = cumulative[-1]
        if not total > 0:
            return np.zeros(shape, dtype=np.int64)
        # Within [0, total) the first top node whose running sum passes the value holds
        # mass (an empty node's running sum equals the one before it). A value at the
        # total itself can come from rounding u * total up.
        remainder = np.clip(values.reshape(-1), 0.0, np.nextafter(total, 0.0))
        node = np.searchsorted(cumulative, remainder, side="right")
        remainder -= cumulative[node] - top[node]
        start_node, start_remainder = node.copy(), remainder.copy()
        for k in range(1, len(self._levels)):
            left = self._left[k][node]
            go_right = remainder >= left
            np.subtract(remainder, left, out=remainder, where=go_right)
            node <<= 1
            node += go_right
        # Rounding in the running sums can carry a value just past the mass of a subtree
        # and into an empty leaf. Rare: those values descend again, steering by which
        # children hold mass.
        empty = self._leaves[node] <= 0
        if empty.any():
            node[empty] = self._guarded_descent(start_node[empty], start_remainder[empty])
        return node.reshape(shape)

    def _guarded_descent(self, node: np.ndarray, remainder: np.ndarray) -> np.ndarray:
        """The descent of ``find_prefix_sum`` from top nodes holding mass, never entering an
        empty child: it goes right when the value passes the left child or the left child
        is empty, unless the right child is empty."""
        for k in range(1, len(self._levels)):
            left = self._left[k][node]
            right = self._right[k][node]
            go_right = ((remainder >= left) | (left <= 0)) & (right > 0)
            np.subtract(remainder, left, out=remainder, where=go_right)
            node = node * 2 + go_right
        return node


class MinSegmentTree(_SegmentTree):
    """Minima over leaves (unwritten leaves hold +inf).

    Args:
        capacity: the number of leaves, at least 1.

    Examples:
        >>> import numpy as np
        >>> tree = MinSegmentTree(6)
        >>> tree.update(np.array([1, 4, 5]), np.array([3.0, 0.5, 2.0]))
        >>> tree.total, tree.query(0, 4), tree.query(2, 4)
        (0.5, 3.0, inf)
    """

    _ufunc = np.minimum
    _identity = float("inf")


def update_together(trees: Sequence[_SegmentTree], index: Any, values: Sequence[Any]) -> None:
    """Sets the same leaves of several trees of one capacity (``values[i]`` in
    ``trees[i]``) and recomputes their ancestors, walking the leaves' paths once for all
    the trees (a prioritized sampler keeps a sum and a min tree over the same items).

    Args:
        trees: the trees, all of the same capacity.
        index: leaf indices (int or array of ints in ``[0, capacity)``, any shape).
            Where an index repeats, the value written last (in flattened order) wins.
        values: for each tree, one value per index or one value for all of them.

    Raises:
        ValueError: if an index is out of range, a value does not match ``index``, or
            the trees differ in capacity.

    Examples:
        >>> import numpy as np
        >>> sums, minima = SumSegmentTree(4), MinSegmentTree(4)
        >>> update_together([sums, minima], np.array([0, 2]), [np.array([1.0, 3.0]), np.array([1.0, 3.0])])
        >>> sums.total, minima.total
        (4.0, 1.0)
    """
    first = trees[0]
    if any(tree.capacity != first.capacity for tree in trees):
        raise ValueError(
            f"update_together: the trees differ in capacity ({[tree.capacity for tree in trees]})."
        )
    index = first._checked_index(index).reshape(-1)
    arrays = []
    for tree, value in zip(trees, values):
        value = np.asarray(value, dtype=np.float64)
        if value.ndim == 0:
            value = np.broadcast_to(value, index.shape)
        elif value.size != index.size:
            raise ValueError(
                f"{type(tree).__name__}.update: expected one value per index ({index.size}), "
                f"got value of shape {tuple(value.shape)}."
            )
        arrays.append(value.reshape(-1))
    if index.size == 0:
        return
    for tree, value in zip(trees, arrays):
        # numpy assigns a repeated index in order, so the last write wins.
        tree._leaves[index] = value
    levels_below_top = len(first._levels) - 1
    if index.size * levels_below_top >= first._leaves.size:
        # Writes touching a good part of the leaves: one pass over every level is
        # cheaper than following each leaf's path.
        for tree in trees:
            tree._rebuild()
        return
    for k in range(levels_below_top, 0, -1):
        index = index >> 1
        for tree in trees:
            # Repeated parents get the same value written twice: harmless.
            tree._levels[k - 1][index] = tree._ufunc(tree._left[k][index], tree._right[k][index])


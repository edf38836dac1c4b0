"""Categorical, Binary, OneHot, MultiCategorical, MultiOneHot (``specs/discrete.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import cadence.data as data
from cadence.data import (
    Binary,
    Categorical,
    MultiCategorical,
    MultiOneHot,
    OneHot,
)


# ------------------------------------------------------------------ Categorical
def test_categorical_bool_done_flags() -> None:
    spec = Categorical(n=2, shape=(1,), dtype=torch.bool)
    assert spec.zero().tolist() == [False]
    assert spec.one().tolist() == [True]
    assert spec.rand().dtype == torch.bool
    assert spec.is_in(torch.tensor([True]))
    assert not spec.is_in(torch.tensor([1]))
    assert spec.n == 2 and spec.space.n == 2
    shape = torch.Size((1,))
    assert data.DiscreteTensorSpec(n=2, shape=shape, dtype=torch.bool) == spec


def test_categorical_values_and_errors() -> None:
    spec = Categorical(3)
    assert spec.shape == () and spec.dtype == torch.int64
    assert spec.is_in(torch.tensor(2))
    assert not spec.is_in(torch.tensor(3))
    assert not spec.is_in(torch.tensor(-1))
    with pytest.raises(ValueError, match=r"expected values in \[0, 3\), got values in \[3, 3\]"):
        spec.assert_is_in(torch.tensor(3))
    assert spec.project(torch.tensor([4.7, -1.0, 1.2])).tolist() == [2, 0, 1]
    assert spec.encode(2).item() == 2
    with pytest.raises(ValueError, match="n >= 1"):
        Categorical(0)
    with pytest.raises(ValueError, match="bool"):
        Categorical(3, dtype=torch.bool)
    with pytest.raises(ValueError, match="integer"):
        Categorical(3, dtype=torch.float32)


def test_categorical_one_hot_round_trip() -> None:
    spec = Categorical(4, shape=(2,))
    v = spec.rand()
    oh_spec = spec.to_one_hot_spec()
    oh = spec.to_one_hot(v)
    assert oh_spec.is_in(oh)
    assert torch.equal(oh_spec.to_categorical(oh), v)
    assert oh_spec.to_categorical_spec() == spec


def test_categorical_mask() -> None:
    spec = Categorical(4, shape=(2,), mask=torch.tensor([[True, False, False, False], [False, False, True, True]]))
    for _ in range(5):
        v = spec.rand()
        assert v[0].item() == 0 and v[1].item() in (2, 3)
        assert spec.is_in(v)
    assert not spec.is_in(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="mask"):
        spec.assert_is_in(torch.tensor([1, 2]))
    assert spec.rand((3,)).shape == (3, 2)
    assert spec[1].rand().item() in (2, 3)
    spec.update_mask(None)
    assert spec.is_in(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="mask of shape"):
        spec.update_mask(torch.ones(3, dtype=torch.bool))
    s2 = Categorical(4, shape=(2,))
    s3 = s2.clone()
    s3.update_mask(torch.ones(2, 4, dtype=torch.bool))
    assert s2 != s3


# ----------------------------------------------------------------------- Binary
def test_binary_done_flags() -> None:
    spec = Binary(1, shape=(1,), dtype=torch.bool)
    assert spec.shape == (1,) and spec.dtype == torch.bool
    assert spec.zero().tolist() == [False]
    assert spec.is_in(torch.tensor([True]))
    assert isinstance(spec, Categorical)
    assert spec.size == 1


def test_binary_values() -> None:
    spec = Binary(4)
    assert spec.shape == (4,) and spec.dtype == torch.int8
    assert spec.is_in(torch.tensor([0, 1, 1, 0], dtype=torch.int8))
    assert not spec.is_in(torch.tensor([0, 2, 1, 0], dtype=torch.int8))
    assert spec.project(torch.tensor([0.2, 0.7, 3.0, -1.0])).tolist() == [0, 1, 1, 0]
    assert Binary(shape=(2, 3)).size == 3
    with pytest.raises(ValueError, match="shape"):
        Binary(2, shape=(3,))
    with pytest.raises(ValueError, match="n or shape"):
        Binary()


# ----------------------------------------------------------------------- OneHot
def test_onehot() -> None:
    spec = OneHot(3)
    assert spec.shape == (3,) and spec.dtype == torch.bool
    assert spec.encode(1).tolist() == [False, True, False]
    assert spec.encode(np.array([0, 0, 1])).tolist() == [False, False, True]
    assert not spec.is_in(torch.tensor([True, True, False]))
    assert not spec.is_in(torch.tensor([False, False, False]))
    assert spec.project(torch.tensor([0.1, 0.7, 0.2])).tolist() == [False, True, False]
    with pytest.raises(ValueError, match="indices in"):
        spec.encode(5)
    with pytest.raises(ValueError, match="shape"):
        OneHot(3, shape=(4,))
    batched = OneHot(3, shape=(2, 3), dtype=torch.int64)
    assert batched.encode([2, 0]).tolist() == [[0, 0, 1], [1, 0, 0]]
    with pytest.raises(ValueError, match="expected one-hot values of shape"):
        batched.encode(np.zeros((4, 4)))
    with pytest.raises(ValueError, match="domain"):
        batched.squeeze(-1)
    with pytest.raises(IndexError):
        batched[0, 0]


def test_onehot_mask() -> None:
    spec = OneHot(3, mask=torch.tensor([False, True, False]))
    assert spec.rand().tolist() == [False, True, False]
    assert not spec.is_in(torch.tensor([True, False, False]))
    assert spec.to_categorical_spec().mask is not None
    with pytest.raises(ValueError, match="mask"):
        spec.update_mask(torch.ones(4))


# ------------------------------------------------------------------ multi specs
def test_multicategorical() -> None:
    spec = MultiCategorical([2, 3])
    assert spec.shape == (2,)
    assert spec.is_in(torch.tensor([1, 2]))
    assert not spec.is_in(torch.tensor([2, 0]))
    assert spec.project(torch.tensor([5, -1])).tolist() == [1, 0]
    batched = MultiCategorical([2, 3], shape=(4, 2))
    assert batched.rand().shape == (4, 2)
    assert batched.nvec.shape == (4, 2)
    with pytest.raises(ValueError, match="broadcast"):
        MultiCategorical([2, 3], shape=(3,))
    with pytest.raises(ValueError, match=">= 1"):
        MultiCategorical([0, 3])
    assert data.MultiDiscreteTensorSpec([2, 3]) == spec


def test_multionehot() -> None:
    spec = MultiOneHot([2, 3])
    assert spec.shape == (5,)
    assert spec.encode([1, 2]).long().tolist() == [0, 1, 0, 0, 1]
    assert spec.is_in(torch.tensor([1, 0, 0, 1, 0], dtype=torch.bool))
    assert not spec.is_in(torch.tensor([1, 1, 0, 1, 0], dtype=torch.bool))
    assert not spec.is_in(torch.tensor([1, 0, 0, 0, 0], dtype=torch.bool))
    proj = spec.project(torch.tensor([0.2, 0.5, 0.9, 0.1, 0.3]))
    assert proj.long().tolist() == [0, 1, 1, 0, 0]
    assert spec.to_categorical(proj).tolist() == [1, 0]
    assert spec.to_categorical_spec().is_in(spec.to_categorical(spec.rand()))
    with pytest.raises(ValueError, match="sum"):
        MultiOneHot([2, 3], shape=(4,))
    with pytest.raises(ValueError, match="group 1"):
        spec.encode([0, 3])
    assert spec != MultiOneHot([3, 2])


# ------------------------------------------------------- bad values (issue #14)
@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: OneHot(0), ValueError, r"OneHot: expected n >= 1.*got 0"),
        (lambda: OneHot(-2), ValueError, r"OneHot: expected n >= 1.*got -2"),
        (lambda: OneHot(2.5), ValueError, r"OneHot: n must be an int >= 1, got 2.5"),
        (lambda: OneHot(True), TypeError, r"OneHot: n must be an int >= 1, got bool"),
        (lambda: Categorical(0), ValueError, r"Categorical: expected n >= 1"),
        (lambda: Categorical("3"), TypeError, r"Categorical: n must be an int >= 1, got str"),
        (lambda: Binary(0), ValueError, r"Binary: expected n >= 1"),
        (lambda: Binary(-1), ValueError, r"Binary: expected n >= 1"),
        (lambda: MultiCategorical([]), ValueError, r"MultiCategorical: nvec must hold at least one"),
        (lambda: MultiCategorical([2, 0]), ValueError, r"MultiCategorical: expected every nvec entry >= 1.*\[2, 0\]"),
        (lambda: MultiCategorical([2.5]), ValueError, r"MultiCategorical: nvec must hold ints >= 1"),
        (lambda: MultiOneHot([]), ValueError, r"MultiOneHot: nvec must hold at least one"),
        (lambda: MultiOneHot([3, -1]), ValueError, r"MultiOneHot: expected every nvec entry >= 1"),
    ],
)
def test_empty_or_negative_category_counts_are_rejected(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_rand_with_an_all_false_mask_says_the_mask_allows_nothing():
    spec = Categorical(3, mask=torch.zeros(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"Categorical\(n=3, \.\.\.\)\.rand: the mask allows no category"):
        spec.rand()
    spec = OneHot(3)
    spec.update_mask(torch.zeros(3, dtype=torch.bool))  # accepted: an env may emit it at the end of a game
    with pytest.raises(ValueError, match="the mask allows no category"):
        spec.rand()
    spec.update_mask(None)
    assert spec.is_in(spec.rand())


def test_rand_with_a_batched_mask_names_the_entries_without_an_allowed_category():
    mask = torch.tensor([[True, False, False], [False, False, False], [False, True, True], [False, False, False]])
    categorical = Categorical(3, shape=(4,), mask=mask)
    with pytest.raises(ValueError, match=r"at batch entries \(1,\), \(3,\) \(of shape \(4,\)\)"):
        categorical.rand()
    one_hot = OneHot(3, shape=(4, 3), mask=mask)
    with pytest.raises(ValueError, match=r"at batch entries \(1,\), \(3,\)"):
        one_hot.rand((5,))
    mask[1, 0] = mask[3, 2] = True
    categorical.update_mask(mask)
    drawn = categorical.rand((50,))
    assert categorical.is_in(drawn) and set(drawn[:, 0].tolist()) == {0} and set(drawn[:, 3].tolist()) == {2}


def test_multicategorical_mask_draws_only_allowed_values():
    spec = MultiCategorical([2, 3])
    spec.update_mask(torch.tensor([False, True, True, False, True]))  # element 0: {1}; element 1: {0, 2}
    drawn = spec.rand((200,))
    assert set(drawn[:, 0].tolist()) == {1} and set(drawn[:, 1].tolist()) == {0, 2}
    assert spec.is_in(torch.tensor([1, 2])) and not spec.is_in(torch.tensor([1, 1]))
    assert "masked=True" in repr(spec)
    with pytest.raises(ValueError, match=r"expected a mask of shape \(5,\)"):
        spec.update_mask(torch.ones(4, dtype=torch.bool))
    batched = MultiCategorical([2, 3], shape=(2, 2))
    batched.update_mask(torch.tensor([[1, 0, 1, 1, 1], [0, 0, 1, 1, 1]], dtype=torch.bool))
    assert batched[0].rand()[0].item() == 0 and batched[0].mask.shape == torch.Size([2, 3])
    with pytest.raises(ValueError, match=r"MultiCategorical.*\.rand: the mask allows no category at elements \(1, 0\)"):
        batched.rand()


def test_multionehot_mask_draws_only_allowed_values_and_names_empty_groups():
    spec = MultiOneHot([2, 3], shape=(2, 5))
    spec.update_mask(torch.tensor([[1, 0, 0, 1, 0], [1, 1, 0, 0, 0]], dtype=torch.bool))
    with pytest.raises(ValueError, match=r"MultiOneHot.*\.rand: the mask allows no category at entries .*\(1, 1\)"):
        spec.rand()
    spec.update_mask(torch.tensor([[1, 0, 0, 1, 0], [0, 1, 0, 0, 1]], dtype=torch.bool))
    assert spec.rand().long().tolist() == [[1, 0, 0, 1, 0], [0, 1, 0, 0, 1]]
    assert not spec.is_in(torch.tensor([[0, 1, 0, 1, 0], [0, 1, 0, 0, 1]], dtype=torch.bool))
    assert spec.to_categorical_spec().rand().tolist() == [[0, 1], [1, 2]]

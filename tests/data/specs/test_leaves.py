"""Bounded, Unbounded and NonTensor (``specs/leaves.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import NonTensorData

from cadence.data import (
    Bounded,
    Composite,
    NonTensor,
    Unbounded,
)


# ---------------------------------------------------------------------- Bounded
def test_bounded_scalar_bounds_broadcast() -> None:
    spec = Bounded(low=-1, high=1, shape=(2,))
    assert spec.shape == (2,)
    assert spec.dtype == torch.get_default_dtype()
    assert spec.low.shape == (2,) and spec.high.shape == (2,)
    assert spec.low.tolist() == [-1.0, -1.0]
    assert spec.domain == "continuous"
    assert spec.space.low.shape == (2,)


def test_bounded_tensor_bounds_infer_shape_and_dtype() -> None:
    spec = Bounded(low=torch.zeros(3, 2), high=torch.ones(3, 2))
    assert spec.shape == (3, 2) and spec.dtype == torch.float32
    ispec = Bounded(low=torch.zeros(3, dtype=torch.uint8), high=torch.full((3,), 255, dtype=torch.uint8))
    assert ispec.dtype == torch.uint8 and ispec.domain == "discrete"
    assert ispec.is_in(ispec.rand())
    assert Bounded(low=np.zeros(2), high=np.ones(2)).dtype == torch.float64


def test_bounded_bad_arguments() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        Bounded(1, 0, shape=(2,))
    with pytest.raises(ValueError, match="broadcast"):
        Bounded(low=torch.zeros(3), high=torch.ones(3), shape=(4,))
    with pytest.raises(ValueError, match="broadcast"):
        Bounded(low=torch.zeros(3), high=torch.ones(4))


def test_bounded_is_in_and_error_message_names_range() -> None:
    spec = Bounded(0.0, 1.0, shape=(2,))
    assert spec.is_in(torch.tensor([0.0, 1.0]))
    assert not spec.is_in(torch.tensor([0.0, 1.5]))
    with pytest.raises(ValueError, match=r"Bounded.*expected values in \[0.0, 1.0\], got values in \[0.0, 1.5\]"):
        spec.assert_is_in(torch.tensor([0.0, 1.5]))


def test_bounded_project_clamps_and_rounds() -> None:
    spec = Bounded(-1.0, 1.0, shape=(3,))
    assert spec.project(torch.tensor([-5.0, 0.25, 3.0])).tolist() == [-1.0, 0.25, 1.0]
    ispec = Bounded(0, 4, shape=(3,), dtype=torch.int64)
    out = ispec.project(torch.tensor([-2.2, 1.6, 9.0]))
    assert out.dtype == torch.int64 and out.tolist() == [0, 2, 4]
    with pytest.raises(ValueError, match="shape"):
        spec.project(torch.zeros(4))


def test_bounded_integer_rand_covers_inclusive_range() -> None:
    spec = Bounded(0, 2, shape=(1000,), dtype=torch.int64)
    v = spec.rand(generator=torch.Generator().manual_seed(0))
    assert set(v.tolist()) == {0, 1, 2}


def test_bounded_float_rand_in_bounds_and_infinite_bounds() -> None:
    spec = Bounded(low=torch.tensor([0.0, -10.0]), high=torch.tensor([1.0, -9.0]))
    v = spec.rand((500,))
    assert spec.is_in(v)
    inf = Bounded(low=torch.tensor([0.0, -float("inf")]), high=torch.tensor([float("inf"), 1.0]))
    w = inf.rand((100,))
    assert torch.isfinite(w).all() and inf.is_in(w)


def test_bounded_repr_is_readable() -> None:
    r = repr(Bounded(-1, 1, shape=(2,)))
    assert r == "Bounded(shape=torch.Size([2]), low=-1.0, high=1.0, device=cpu, dtype=torch.float32)"


def test_bounded_eq_compares_bounds() -> None:
    assert Bounded(0, 1, shape=(2,)) == Bounded(0, 1, shape=(2,))
    assert Bounded(0, 1, shape=(2,)) != Bounded(0, 2, shape=(2,))
    assert Bounded(0, 1, shape=(2,)) != Bounded(0, 1, shape=(2,), dtype=torch.float64)


# -------------------------------------------------------------------- Unbounded
def test_unbounded_defaults() -> None:
    spec = Unbounded()
    assert spec.shape == (1,) and spec.dtype == torch.float32
    assert Unbounded((1,), dtype=torch.float).shape == (1,)
    assert Unbounded(3).shape == (3,)
    assert Unbounded(shape=(2,), dtype=torch.bool).rand().dtype == torch.bool
    assert Unbounded(shape=(2,), dtype=torch.uint8).rand().dtype == torch.uint8
    assert Unbounded(shape=(2,), dtype=torch.int64).domain == "discrete"


# -------------------------------------------------------------------- NonTensor
def test_nontensor() -> None:
    spec = NonTensor(example_data="hi")
    assert spec.shape == ()
    z = spec.zero()
    assert isinstance(z, NonTensorData) and z.data == "hi"
    assert spec.rand().data == "hi"
    assert spec.is_in("anything")
    assert spec.encode("x").data == "x"
    assert spec == NonTensor(example_data="hi")
    assert spec != NonTensor(example_data="other")
    comp = Composite(text=NonTensor(shape=(2,), example_data="a"), x=Unbounded(shape=(2, 1)), shape=(2,))
    td = comp.zero()
    assert td.batch_size == (2,)
    assert td["text"] == ["a", "a"] or td.get("text").tolist() == ["a", "a"]
    assert comp.is_in(td)


def test_nontensor_eq_with_array_example_data() -> None:
    a = NonTensor(example_data=np.zeros(3))
    assert a == a
    assert a == NonTensor(example_data=np.zeros(3))
    assert a != NonTensor(example_data=np.ones(3))
    assert a != NonTensor(example_data=[0.0, 0.0, 0.0])


# ------------------------------------------------------- bad values (issue #14)
@pytest.mark.parametrize(
    ("low", "high", "name", "index"),
    [
        (float("nan"), 1.0, "low", r"\(\)"),
        (torch.zeros(3), torch.tensor([1.0, float("nan"), 1.0]), "high", r"\(1,\)"),
        (np.array([0.0, np.nan]), np.ones(2), "low", r"\(1,\)"),
    ],
)
def test_bounded_rejects_nan_bounds_naming_the_argument(low, high, name, index):
    with pytest.raises(ValueError, match=rf"Bounded: {name} holds NaN \(first at index {index}\).*-inf/inf"):
        Bounded(low, high, shape=None if isinstance(low, (torch.Tensor, np.ndarray)) else (2,))


def test_bounded_rejects_nan_even_with_an_integer_dtype():
    # cast first, NaN would become a large negative integer and pass as a bound
    with pytest.raises(ValueError, match="high holds NaN"):
        Bounded(0, float("nan"), shape=(1,), dtype=torch.int64)


def test_bounded_rejects_low_above_high_naming_the_element():
    with pytest.raises(ValueError, match=r"at index \(1, 0\) low=3.0 > high=1.0"):
        Bounded(torch.tensor([[0.0, 0.0], [3.0, 0.0]]), torch.ones(2, 2))
    Bounded(1.0, 1.0, shape=(2,))  # low == high is a valid (constant) domain


def test_nan_is_outside_a_bounded_spec_whatever_its_bounds():
    for spec in (Bounded(-1.0, 1.0, shape=(3,)), Bounded(-float("inf"), float("inf"), shape=(3,))):
        value = torch.tensor([0.0, float("nan"), 0.5])
        assert spec.is_in(torch.zeros(3))
        assert not spec.is_in(value)
        with pytest.raises(ValueError, match=r"got NaN in 1 of 3 element\(s\) \(first at index \(1,\)\)"):
            spec.assert_is_in(value)


def test_unbounded_float_specs_accept_nan_and_inf_by_design():
    spec = Unbounded(shape=(2,))
    assert spec.is_in(torch.tensor([float("nan"), float("inf")]))
    assert not spec.is_in(torch.zeros(3))  # the shape is still checked
    assert not spec.is_in(torch.zeros(2, dtype=torch.float64))  # and the dtype

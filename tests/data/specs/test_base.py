"""TensorSpec behaviour every spec shares: shapes, indexing, encode, dtypes, stacking (``specs/base.py``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import cadence.data as data
from cadence.data import (
    Binary,
    Bounded,
    Categorical,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    TensorSpec,
    Unbounded,
)


# --------------------------------------------------------------- generic leaves
def leaf_specs() -> list[TensorSpec]:
    return [
        Unbounded(shape=(4, 3)),
        Unbounded(shape=(4, 3), dtype=torch.int64),
        Bounded(-1.0, 2.0, shape=(4, 3)),
        Bounded(0, 5, shape=(4, 3), dtype=torch.int64),
        Bounded(low=torch.zeros(4, 3), high=torch.arange(12.0).reshape(4, 3) + 1),
        Categorical(5, shape=(4, 3)),
        Categorical(2, shape=(4, 1), dtype=torch.bool),
        Binary(3, shape=(4, 3)),
        Binary(1, shape=(4, 1), dtype=torch.bool),
        OneHot(3, shape=(4, 3)),
        MultiCategorical([2, 3, 4], shape=(4, 3)),
        MultiOneHot([1, 2], shape=(4, 3)),
    ]


LEAVES = leaf_specs()


IDS = [f"{type(s).__name__}-{s.dtype}-{i}" for i, s in enumerate(LEAVES)]


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_leaf_rand_zero_one_shapes(spec: TensorSpec) -> None:
    for fn in (spec.rand, spec.zero, spec.one):
        v = fn()
        assert v.shape == spec.shape and v.dtype == spec.dtype and v.device == spec.device
        v = fn((2, 5))
        assert v.shape == torch.Size((2, 5)) + spec.shape
    assert spec.is_in(spec.rand())
    assert spec.is_in(spec.rand((7,)))
    spec.assert_is_in(spec.rand())


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_leaf_basic_attributes(spec: TensorSpec) -> None:
    assert spec.ndim == 2 == spec.ndimension()
    assert spec.device == torch.device("cpu")
    assert isinstance(spec, TensorSpec)
    assert type(spec).__name__ in repr(spec)
    assert "shape=" in repr(spec)


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_leaf_rand_with_generator_is_reproducible(spec: TensorSpec) -> None:
    a = spec.rand((3,), generator=torch.Generator().manual_seed(123))
    b = spec.rand((3,), generator=torch.Generator().manual_seed(123))
    assert torch.equal(a, b)
    assert spec.is_in(a)


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_leaf_wrong_dtype_and_shape_rejected(spec: TensorSpec) -> None:
    v = spec.rand()
    other = torch.float64 if spec.dtype != torch.float64 else torch.float32
    assert not spec.is_in(v.to(other))
    assert not spec.is_in(v[..., :1, :] if spec.shape[-2] > 1 else v.expand(2, 2, *v.shape[1:])[0, 0])
    assert not spec.is_in(v.reshape(-1))
    assert not spec.is_in(v.tolist())
    with pytest.raises(ValueError, match="dtype"):
        spec.assert_is_in(v.to(other))
    with pytest.raises(ValueError, match="shape"):
        spec.assert_is_in(v.reshape(-1))
    with pytest.raises(ValueError, match="torch.Tensor"):
        spec.assert_is_in(v.tolist())


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_leaf_expand_squeeze_unsqueeze_index(spec: TensorSpec) -> None:
    e = spec.expand(2, *spec.shape)
    assert e.shape == torch.Size((2,)) + spec.shape
    assert e.is_in(spec.rand((2,)))
    e2 = spec.expand((5, 4, 3))
    assert e2.shape == torch.Size((5, 4, 3))
    u = spec.unsqueeze(0)
    assert u.shape == torch.Size((1,)) + spec.shape
    assert u.squeeze() == spec.squeeze()
    assert u.squeeze(0) == spec
    assert spec.unsqueeze(-3).shape == u.shape
    first = spec[0]
    assert first.shape == spec.shape[1:]
    assert first.is_in(spec.rand()[0])
    assert spec[1:3].shape == torch.Size((2,)) + spec.shape[1:]
    assert spec[torch.tensor([0, 2])].shape == torch.Size((2,)) + spec.shape[1:]
    assert len(spec.unbind(0)) == 4
    assert spec.unbind(0)[1] == spec[1]


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_leaf_clone_to_eq(spec: TensorSpec) -> None:
    c = spec.clone()
    assert c == spec and c is not spec
    assert spec.to("cpu") == spec
    assert spec.cpu() == spec
    assert spec != Unbounded(shape=(9,))
    assert spec != "not a spec"
    assert spec.clone().to(torch.device("cpu")).device == torch.device("cpu")


@pytest.mark.parametrize("spec", LEAVES, ids=IDS)
def test_leaf_encode_numpy_and_project(spec: TensorSpec) -> None:
    v = spec.rand()
    enc = spec.encode(v.numpy())
    assert torch.equal(enc, v) and enc.dtype == spec.dtype
    assert spec.is_in(spec.project(v))
    assert torch.equal(spec.project(v), v)


def test_encode_reshapes_same_numel_and_rejects_wrong_size() -> None:
    spec = Unbounded(shape=(1,))
    assert spec.encode(0.5).shape == (1,)
    assert spec.encode(np.float32(2.0)).item() == 2.0
    assert Unbounded(shape=(2, 2)).encode([1, 2, 3, 4]).shape == (2, 2)
    with pytest.raises(ValueError, match=r"expected shape \(3,\).*got \(4,\)"):
        Unbounded(shape=(3,)).encode(np.zeros(4))
    ro = np.zeros(3)
    ro.flags.writeable = False
    assert Unbounded(shape=(3,)).encode(ro).shape == (3,)


def test_encode_keeps_leading_batch_dims() -> None:
    assert Bounded(0, 1, shape=(2,)).encode(np.zeros((5, 2))).shape == (5, 2)


def test_to_numpy() -> None:
    spec = Bounded(0, 1, shape=(2,))
    assert isinstance(spec.to_numpy(spec.rand(), safe=True), np.ndarray)


def test_to_dtype_casts_bounds() -> None:
    spec = Bounded(0, 1, shape=(2,)).to(torch.float64)
    assert spec.dtype == torch.float64 and spec.low.dtype == torch.float64
    assert spec.is_in(torch.zeros(2, dtype=torch.float64))


# ----------------------------------------------------------------------- shapes
def test_bad_shapes_rejected() -> None:
    with pytest.raises(ValueError, match="-2"):
        Unbounded(shape=(2, -2))
    with pytest.raises(TypeError, match="shape"):
        Unbounded(shape="abc")


# ---------------------------------------------------------------------- dynamic
def test_dynamic_dims() -> None:
    spec = Unbounded(shape=(3, -1, 2))
    assert spec.is_dynamic
    assert spec.zero().shape == (3, 1, 2)
    assert spec.one((4,)).shape == (4, 3, 1, 2)
    assert spec.rand().shape == (3, 1, 2)
    for n in (1, 5, 11):
        assert spec.is_in(torch.zeros(3, n, 2))
    assert not spec.is_in(torch.zeros(3, 5, 3))
    assert not spec.is_in(torch.zeros(3, 2))
    assert spec.expand(4, 3, -1, 2).shape == (4, 3, -1, 2)
    assert spec.unsqueeze(0).shape == (1, 3, -1, 2)
    assert spec[0].shape == (-1, 2)
    with pytest.raises(IndexError, match="dynamic"):
        spec[:, 0]
    with pytest.raises(ValueError, match="expand"):
        spec.expand(3, 4, 2)
    b = Bounded(0, 1, shape=(-1, 2))
    assert b.zero().shape == (1, 2)
    assert b.is_in(torch.full((6, 2), 0.5))
    assert not b.is_in(torch.full((6, 2), 1.5))


# --------------------------------------------------------------------- stacking
def test_stack_identical_specs_expands() -> None:
    spec = Unbounded(shape=(3,))
    s = torch.stack([spec, spec.clone(), spec.clone()], dim=0)
    assert s == spec.expand(3, 3)
    assert s.shape == (3, 3)
    s1 = torch.stack([spec, spec], 1)
    assert s1.shape == (3, 2)
    assert torch.stack([spec, spec], dim=-1).shape == (3, 2)


def test_stack_bounded_different_bounds() -> None:
    specs = [Bounded(-float(i + 1), float(i + 1), shape=(2,)) for i in range(3)]
    s = torch.stack(specs, dim=0)
    assert isinstance(s, Bounded) and s.shape == (3, 2)
    assert s.high[:, 0].tolist() == [1.0, 2.0, 3.0]
    assert s[1] == specs[1]
    assert s.is_in(torch.tensor([[0.9, 0.9], [1.9, 1.9], [2.9, 2.9]]))
    assert not s.is_in(torch.tensor([[1.9, 0.9], [1.9, 1.9], [2.9, 2.9]]))
    assert data.stack_specs(specs, 0) == s


def test_stack_categorical_and_multicategorical() -> None:
    s = torch.stack([Categorical(3, shape=(1,)), Categorical(3, shape=(1,))])
    assert s == Categorical(3, shape=(2, 1))
    with pytest.raises(ValueError, match="'n'"):
        torch.stack([Categorical(3), Categorical(4)])
    m = torch.stack([MultiCategorical([2, 3]), MultiCategorical([4, 5])])
    assert m.nvec.tolist() == [[2, 3], [4, 5]]
    oh = torch.stack([OneHot(3), OneHot(3)], dim=0)
    assert oh.shape == (2, 3)
    with pytest.raises(ValueError, match="domain"):
        torch.stack([OneHot(3), OneHot(3)], dim=1)


def test_stack_mismatch_errors() -> None:
    with pytest.raises(ValueError, match=r"numbers of dims.*\(3,\).*\(3, 1\)"):
        torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(3, 1))])
    with pytest.raises(ValueError, match="different classes"):
        torch.stack([Unbounded(shape=(3,)), Bounded(0, 1, shape=(3,))])
    with pytest.raises(ValueError, match="dtypes"):
        torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(3,), dtype=torch.float64)])
    with pytest.raises(ValueError, match="non-empty"):
        data.stack_specs([])
    with pytest.raises(TypeError, match="not a spec"):
        data.stack_specs([Unbounded(), 3])  # type: ignore[list-item]


def test_torch_stack_keyword_arguments() -> None:
    spec = Unbounded(shape=(2,))
    assert torch.stack(tensors=[spec, spec], dim=1).shape == (2, 2)
    with pytest.raises(TypeError):
        torch.cat([spec, spec])


# ------------------------------------------------------- bad values (issue #14)
@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda dtype: Unbounded(shape=(2,), dtype=dtype), "Unbounded"),
        (lambda dtype: Bounded(0.0, 1.0, shape=(2,), dtype=dtype), "Bounded"),
        (lambda dtype: Categorical(3, dtype=dtype), "Categorical"),
        (lambda dtype: Binary(2, dtype=dtype), "Binary"),
        (lambda dtype: OneHot(3, dtype=dtype), "OneHot"),
        (lambda dtype: MultiCategorical([2, 3], dtype=dtype), "MultiCategorical"),
        (lambda dtype: MultiOneHot([2, 3], dtype=dtype), "MultiOneHot"),
        (lambda dtype: NonTensor(dtype=dtype), "NonTensor"),
    ],
)
def test_a_string_dtype_is_rejected_naming_the_argument(make, name):
    with pytest.raises(TypeError, match=rf"{name}: the dtype argument must be a torch.dtype.*'float32' \(pass torch.float32\)"):
        make("float32")
    with pytest.raises(TypeError, match=rf"{name}: the dtype argument must be a torch.dtype.*got .*dtype\('float32'\)"):
        make(np.dtype("float32"))

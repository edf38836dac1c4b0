"""Tests of the specs, through the public API (``cadence.data``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import NonTensorData, TensorDict

import cadence.data as data
from cadence.data import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    TensorSpec,
    Unbounded,
)

ALL_NAMES = [
    "TensorSpec",
    "Composite",
    "Bounded",
    "Unbounded",
    "Categorical",
    "OneHot",
    "Binary",
    "MultiCategorical",
    "MultiOneHot",
    "NonTensor",
    "CompositeSpec",
    "BoundedTensorSpec",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscreteTensorSpec",
    "DiscreteTensorSpec",
    "OneHotDiscreteTensorSpec",
    "BinaryDiscreteTensorSpec",
    "MultiDiscreteTensorSpec",
    "MultiOneHotDiscreteTensorSpec",
    "NonTensorSpec",
]


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


# ---------------------------------------------------------------- public names
@pytest.mark.parametrize("name", ALL_NAMES)
def test_public_names_exported(name: str) -> None:
    assert hasattr(data, name)
    assert name in data.__all__


def test_old_aliases_are_the_new_classes() -> None:
    assert data.CompositeSpec is Composite
    assert data.BoundedTensorSpec is Bounded
    assert data.DiscreteTensorSpec is Categorical
    assert data.OneHotDiscreteTensorSpec is OneHot
    assert data.BinaryDiscreteTensorSpec is Binary
    assert data.MultiDiscreteTensorSpec is MultiCategorical
    assert data.MultiOneHotDiscreteTensorSpec is MultiOneHot
    assert data.NonTensorSpec is NonTensor
    cont = data.UnboundedContinuousTensorSpec(shape=(2,))
    disc = data.UnboundedDiscreteTensorSpec(shape=(2,))
    assert type(cont) is Unbounded and cont.dtype == torch.float32
    assert type(disc) is Unbounded and disc.dtype == torch.int64
    assert cont == Unbounded(shape=(2,))
    assert isinstance(cont, TensorSpec)


# ------------------------------------------------------------- generic leaves
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


# --------------------------------------------------------------------- Bounded
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


# ------------------------------------------------------------------- Unbounded
def test_unbounded_defaults() -> None:
    spec = Unbounded()
    assert spec.shape == (1,) and spec.dtype == torch.float32
    assert Unbounded((1,), dtype=torch.float).shape == (1,)
    assert Unbounded(3).shape == (3,)
    assert Unbounded(shape=(2,), dtype=torch.bool).rand().dtype == torch.bool
    assert Unbounded(shape=(2,), dtype=torch.uint8).rand().dtype == torch.uint8
    assert Unbounded(shape=(2,), dtype=torch.int64).domain == "discrete"


def test_bad_shapes_rejected() -> None:
    with pytest.raises(ValueError, match="-2"):
        Unbounded(shape=(2, -2))
    with pytest.raises(TypeError, match="shape"):
        Unbounded(shape="abc")


# -------------------------------------------------------------------- dynamic
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


def test_dynamic_in_composite_seed_example() -> None:
    spec = Composite(observation=Unbounded(shape=(3, -1, 2)))
    td = spec.zero()
    assert td["observation"].shape == (3, 1, 2)
    assert spec.is_in(TensorDict({"observation": torch.zeros(3, 4, 2)}, batch_size=()))
    assert spec.is_dynamic
    assert not Composite(o=Unbounded(shape=(2,))).is_dynamic


# ---------------------------------------------------------------- Categorical
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


# ---------------------------------------------------------------------- Binary
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


# ---------------------------------------------------------------------- OneHot
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


# ---------------------------------------------------------------- multi specs
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


# ------------------------------------------------------------------- NonTensor
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


# -------------------------------------------------------------------- stacking
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
    with pytest.raises(ValueError, match=r"different shapes.*\(3,\).*\(4,\)"):
        torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(4,))])
    with pytest.raises(ValueError, match="different classes"):
        torch.stack([Unbounded(shape=(3,)), Bounded(0, 1, shape=(3,))])
    with pytest.raises(ValueError, match="dtypes"):
        torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(3,), dtype=torch.float64)])
    with pytest.raises(ValueError, match="non-empty"):
        data.stack_specs([])
    with pytest.raises(TypeError, match="not a spec"):
        data.stack_specs([Unbounded(), 3])  # type: ignore[list-item]


def test_stack_multi_agent_seed_example() -> None:
    n_agents = 3
    action_specs = [Bounded(-1.0, float(i + 1), shape=(2,)) for i in range(n_agents)]
    reward_specs = [Unbounded(shape=(1,)) for _ in range(n_agents)]
    action_spec = Composite({"agents": Composite({"action": torch.stack(action_specs)}, shape=(n_agents,))})
    reward_spec = Composite({"agents": Composite({"reward": torch.stack(reward_specs)}, shape=(n_agents,))})
    assert action_spec["agents", "action"].shape == (3, 2)
    assert reward_spec["agents", "reward"] == torch.stack(reward_specs)
    td = action_spec.rand()
    assert td["agents"].batch_size == (3,)
    assert action_spec.is_in(td)
    done = Categorical(n=2, shape=torch.Size((1,)), dtype=torch.bool)
    assert done.zero().shape == (1,)


def test_stack_composites() -> None:
    c1 = Composite(obs=Bounded(0, 1, shape=(2,)), nested=Composite(r=Unbounded(shape=(1,))))
    c2 = Composite(obs=Bounded(0, 2, shape=(2,)), nested=Composite(r=Unbounded(shape=(1,))))
    s = torch.stack([c1, c2], dim=0)
    assert isinstance(s, Composite) and s.shape == (2,)
    assert s["obs"].shape == (2, 2) and s["nested"].shape == (2,)
    assert s["nested", "r"].shape == (2, 1)
    assert s["obs"].high[:, 0].tolist() == [1.0, 2.0]
    assert s[0] == c1
    b = Composite(x=Unbounded(shape=(4, 2)), shape=(4,))
    assert torch.stack([b, b], dim=1).shape == (4, 2)
    assert torch.stack([b, b], dim=1)["x"].shape == (4, 2, 2)
    with pytest.raises(ValueError, match=r"missing \['nested'\]"):
        torch.stack([c1, Composite(obs=Bounded(0, 1, shape=(2,)))])
    with pytest.raises(ValueError, match="key 'obs'"):
        torch.stack([c1, Composite(obs=Unbounded(shape=(2,)), nested=Composite(r=Unbounded(shape=(1,))))])


# ------------------------------------------------------------------- Composite
def make_composite() -> Composite:
    return Composite(
        observation=Unbounded(shape=(4, 3)),
        action=Bounded(-1, 1, shape=(4, 2)),
        done=Categorical(2, shape=(4, 1), dtype=torch.bool),
        agents=Composite(
            action=OneHot(5, shape=(4, 2, 5)),
            reward=Unbounded(shape=(4, 2, 1)),
            shape=(4, 2),
        ),
        shape=(4,),
    )


def test_composite_rand_zero_one_tensordicts() -> None:
    spec = make_composite()
    for td in (spec.rand(), spec.zero(), spec.one()):
        assert isinstance(td, TensorDict)
        assert td.batch_size == (4,)
        assert td["agents"].batch_size == (4, 2)
        assert td["agents", "action"].shape == (4, 2, 5)
        assert td["done"].dtype == torch.bool
    td = spec.zero((7,))
    assert td.batch_size == (7, 4) and td["agents"].batch_size == (7, 4, 2)
    assert td["observation"].shape == (7, 4, 3)
    assert spec.is_in(spec.rand())
    assert spec.is_in(spec.rand((3,)))
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert (spec.rand(generator=g1) == spec.rand(generator=g2)).all()


def test_composite_shape_and_basic_props() -> None:
    spec = make_composite()
    assert spec.shape == (4,) and spec.ndim == 1 and spec.ndimension() == 1
    assert spec.device is None
    assert len(spec) == 4
    assert list(spec) == ["observation", "action", "done", "agents"]
    assert "observation" in spec and ("agents", "reward") in spec and ("agents",) in spec
    assert ("agents", "nope") not in spec and ("observation", "x") not in spec and 3 not in spec
    assert isinstance(spec["agents"], Composite)
    assert spec["agents", "action"].n == 5
    assert spec.get("missing", None) is None
    with pytest.raises(KeyError, match="missing"):
        spec["missing"]
    with pytest.raises(KeyError, match="missing"):
        spec.get(("agents", "missing"))
    with pytest.raises(KeyError):
        spec["observation", "x"]


def test_composite_keys_options() -> None:
    spec = make_composite()
    assert list(spec.keys()) == ["observation", "action", "done", "agents"]
    nested = spec.keys(include_nested=True)
    assert ("agents", "action") in nested and "agents" in nested
    leaves = spec.keys(include_nested=True, leaves_only=True)
    assert "agents" not in leaves
    assert set(leaves) == {"observation", "action", "done", ("agents", "action"), ("agents", "reward")}
    assert ("observation",) in leaves
    assert list(spec.keys(leaves_only=True)) == ["observation", "action", "done"]
    assert len(spec.items(True, True)) == 5 and len(spec.values(True, True)) == 5
    assert "keys(" in repr(spec.keys())


def test_composite_rejects_child_with_wrong_leading_shape() -> None:
    with pytest.raises(ValueError, match=r"'obs'.*\(3,\).*\(4,\)"):
        Composite(obs=Unbounded(shape=(3,)), shape=(4,))
    spec = Composite(shape=(4,))
    with pytest.raises(ValueError, match=r"'x'.*\(5, 2\).*\(4,\)"):
        spec["x"] = Unbounded(shape=(5, 2))
    with pytest.raises(TypeError, match="TensorSpec"):
        spec["x"] = 3
    with pytest.raises(ValueError, match="dynamic"):
        Composite(shape=(-1,))


def test_composite_setitem_nested_and_dict_values() -> None:
    spec = Composite(shape=(2,))
    spec["a", "b", "c"] = Unbounded(shape=(2, 3))
    assert isinstance(spec["a"], Composite) and spec["a"].shape == (2,)
    assert spec["a", "b", "c"].shape == (2, 3)
    spec["d"] = {"e": Unbounded(shape=(2, 1))}
    assert isinstance(spec["d"], Composite)
    with pytest.raises(KeyError, match="not a Composite"):
        spec["a", "b", "c", "x"] = Unbounded(shape=(2,))
    with pytest.raises(KeyError):
        spec[("a", 1)] = Unbounded(shape=(2,))  # type: ignore[index]
    assert spec.set("f", Unbounded(shape=(2,))) is spec


def test_composite_locking() -> None:
    spec = make_composite().lock_()
    assert spec.is_locked and spec["agents"].is_locked
    with pytest.raises(RuntimeError, match="locked.*'new'"):
        spec["new"] = Unbounded(shape=(4,))
    with pytest.raises(RuntimeError, match="locked"):
        del spec["observation"]
    with pytest.raises(RuntimeError, match="locked"):
        spec["agents", "x"] = Unbounded(shape=(4, 2))
    with pytest.raises(RuntimeError, match="locked"):
        spec.pop("action")
    with pytest.raises(RuntimeError, match="locked"):
        spec.update({"x": Unbounded(shape=(4,))})
    with pytest.raises(RuntimeError, match="locked"):
        spec.shape = (4,)
    assert not spec.clone().is_locked
    spec.unlock_()
    spec["new"] = Unbounded(shape=(4,))
    assert "new" in spec


def test_composite_delete_pop_empty() -> None:
    spec = make_composite()
    del spec["agents", "reward"]
    assert ("agents", "reward") not in spec
    with pytest.raises(KeyError):
        del spec["nope"]
    popped = spec.pop("action")
    assert isinstance(popped, Bounded) and "action" not in spec
    assert spec.pop("action", None) is None
    with pytest.raises(KeyError):
        spec.pop("action")
    e = spec.empty()
    assert e.is_empty() and len(e) == 0 and e.shape == (4,)
    assert not spec.is_empty()
    assert Composite(a=Composite()).is_empty()
    assert e.zero().batch_size == (4,)
    assert repr(e) == "Composite(shape=torch.Size([4]), device=None)"


def test_composite_select_exclude_update() -> None:
    spec = make_composite()
    sel = spec.select("observation", ("agents", "reward"))
    assert set(sel.keys(True, True)) == {"observation", ("agents", "reward")}
    with pytest.raises(KeyError, match="nope"):
        spec.select("nope")
    assert spec.select("nope", strict=False).is_empty()
    exc = spec.exclude("observation", ("agents", "action"), "absent")
    assert set(exc.keys(True, True)) == {"action", "done", ("agents", "reward")}
    assert "observation" in spec
    other = Composite(extra=Unbounded(shape=(4,)), agents=Composite(new=Unbounded(shape=(4, 2)), shape=(4, 2)), shape=(4,))
    assert spec.update(other) is spec
    assert "extra" in spec and ("agents", "new") in spec and ("agents", "action") in spec
    spec.update({"more": Unbounded(shape=(4, 1))})
    assert "more" in spec


def test_composite_is_in_checks_every_key() -> None:
    spec = make_composite()
    td = spec.rand()
    assert spec.is_in(td)
    td2 = td.clone()
    del td2["agents", "reward"]
    assert not spec.is_in(td2)
    with pytest.raises(ValueError, match=r"missing key \('agents', 'reward'\)"):
        spec.assert_is_in(td2)
    td3 = td.clone()
    td3["action"] = torch.full((4, 2), 5.0)
    assert not spec.is_in(td3)
    with pytest.raises(ValueError, match=r"key 'action'.*expected values in \[-1.0, 1.0\]"):
        spec.assert_is_in(td3)
    assert not spec.is_in(torch.zeros(3))
    with pytest.raises(ValueError, match="TensorDict or a dict"):
        spec.assert_is_in(torch.zeros(3))
    assert Composite(x=Unbounded(shape=(2,))).is_in({"x": torch.zeros(2)})
    td4 = td.clone()
    td4["extra"] = torch.zeros(4)
    assert spec.is_in(td4)


def test_composite_eq() -> None:
    assert make_composite() == make_composite()
    a, b = make_composite(), make_composite()
    b["agents", "reward"] = Unbounded(shape=(4, 2, 2))
    assert a != b
    c = make_composite()
    del c["done"]
    assert a != c
    assert Composite(shape=(2,)) != Composite(shape=(3,))
    assert Composite(x=Unbounded()) != Unbounded()


def test_composite_encode() -> None:
    spec = Composite(obs=Unbounded(shape=(2,)), nested=Composite(r=Unbounded(shape=(1,))), a=OneHot(3))
    td = spec.encode({"obs": np.array([1.0, 2.0]), "nested": {"r": 0.5}, "a": 2})
    assert isinstance(td, TensorDict)
    assert td["obs"].dtype == torch.float32 and td["nested", "r"].tolist() == [0.5]
    assert td["a"].tolist() == [False, False, True]
    assert spec.encode({"obs": [0.0, 0.0]}).keys() == {"obs"}
    with pytest.raises(KeyError, match="'bad'"):
        spec.encode({"bad": 1})
    with pytest.raises(ValueError, match="shape"):
        spec.encode({"obs": np.zeros(5)})


def test_composite_project_and_type_check() -> None:
    spec = Composite(a=Bounded(0, 1, shape=(2,)), b=Categorical(3))
    td = TensorDict({"a": torch.tensor([2.0, -1.0]), "b": torch.tensor(7)}, batch_size=())
    out = spec.project(td)
    assert out["a"].tolist() == [1.0, 0.0] and out["b"].item() == 2
    spec.type_check(out)
    spec.type_check(out["a"], "a")
    with pytest.raises(ValueError, match="'b'"):
        spec.type_check(TensorDict({"b": torch.tensor(1.0)}, batch_size=()))


def test_composite_expand_squeeze_unsqueeze_index() -> None:
    spec = make_composite()
    e = spec.expand(3, 4)
    assert e.shape == (3, 4) and e["agents"].shape == (3, 4, 2)
    assert e["agents", "action"].shape == (3, 4, 2, 5)
    assert e.is_in(spec.rand((3,)))
    assert spec.expand((3, 4)) == e
    with pytest.raises(ValueError, match="expand"):
        spec.expand(5)
    u = spec.unsqueeze(0)
    assert u.shape == (1, 4) and u["observation"].shape == (1, 4, 3)
    assert u.squeeze() == spec and u.squeeze(0) == spec
    assert spec.squeeze(0) == spec
    assert spec.unsqueeze(-1).shape == (4, 1)
    first = spec[0]
    assert first.shape == () and first["agents"].shape == (2,)
    assert first["observation"].shape == (3,)
    assert spec[1:3].shape == (2,)
    assert spec[..., 0].shape == ()
    with pytest.raises(IndexError):
        spec[0, 0]
    parts = spec.unbind(0)
    assert len(parts) == 4 and parts[2] == spec[2]


def test_composite_clone_to_device() -> None:
    spec = make_composite()
    c = spec.clone()
    assert c == spec
    c["agents", "reward"] = Unbounded(shape=(4, 2, 3))
    assert spec["agents", "reward"].shape == (4, 2, 1)
    moved = spec.to("cpu")
    assert moved.device == torch.device("cpu") and moved["agents", "action"].device == torch.device("cpu")
    assert moved.zero().device == torch.device("cpu")
    d = Composite(x=Unbounded(shape=(2,)), device="cpu")
    assert d.device == torch.device("cpu") and d["x"].device == torch.device("cpu")
    assert spec.to(torch.float64)["observation"].dtype == torch.float64


def test_composite_shape_setter() -> None:
    spec = Composite(x=Unbounded(shape=(4, 3)))
    spec.shape = (4,)
    assert spec.shape == (4,)
    with pytest.raises(ValueError, match=r"'x'.*\(4, 3\)"):
        spec.shape = (5,)


def test_composite_repr() -> None:
    r = repr(make_composite())
    assert r.startswith("Composite(\n") and "agents: Composite(" in r and "observation: Unbounded" in r


def test_composite_old_alias_tutorial_usage() -> None:
    action_spec = Bounded(-1.0, 1.0, shape=(6,))
    spec = data.CompositeSpec(action=action_spec)
    assert spec["action"] is action_spec
    assert spec.clone() == spec
    assert data.CompositeSpec(action=action_spec) == Composite(action=action_spec)


def test_seed_dynamic_env_specs() -> None:
    observation_spec = Composite(observation=Unbounded(shape=(3, -1, 2)))
    action_spec = Bounded(low=-1, high=1, shape=(2,))
    full_done_spec = Composite(
        done=Binary(1, shape=(1,), dtype=torch.bool),
        terminated=Binary(1, shape=(1,), dtype=torch.bool),
        truncated=Binary(1, shape=(1,), dtype=torch.bool),
    )
    reward_spec = Unbounded((1,), dtype=torch.float)
    assert observation_spec["observation"].dtype == torch.float32
    done = full_done_spec.zero()
    assert done["done"].tolist() == [False] and done.batch_size == ()
    assert action_spec.is_in(action_spec.rand())
    assert reward_spec.zero().shape == (1,)


def test_composite_is_in_nested_dicts_and_leaf_paths() -> None:
    spec = Composite(agents=Composite(action=Unbounded(shape=(2,))))
    assert spec.is_in({"agents": {"action": torch.zeros(2)}})
    assert not spec.is_in({"agents": {}})
    assert not spec.is_in({"agents": torch.zeros(2)})
    td = TensorDict({"agents": torch.zeros(2)}, batch_size=())
    assert not spec.is_in(td)


def test_to_dtype_casts_bounds() -> None:
    spec = Bounded(0, 1, shape=(2,)).to(torch.float64)
    assert spec.dtype == torch.float64 and spec.low.dtype == torch.float64
    assert spec.is_in(torch.zeros(2, dtype=torch.float64))


def test_torch_stack_keyword_arguments() -> None:
    spec = Unbounded(shape=(2,))
    assert torch.stack(tensors=[spec, spec], dim=1).shape == (2, 2)
    with pytest.raises(TypeError):
        torch.cat([spec, spec])


def test_nontensor_eq_with_array_example_data() -> None:
    a = NonTensor(example_data=np.zeros(3))
    assert a == a
    assert a == NonTensor(example_data=np.zeros(3))
    assert a != NonTensor(example_data=np.ones(3))
    assert a != NonTensor(example_data=[0.0, 0.0, 0.0])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_device() -> None:
    spec = make_composite().to("cuda")
    assert spec["agents", "action"].device.type == "cuda"
    td = spec.rand(generator=torch.Generator().manual_seed(0))
    assert td.device.type == "cuda" and spec.is_in(td)
    assert Bounded(0, 1, shape=(2,), device="cuda").rand().device.type == "cuda"
    assert Bounded(0, 1, shape=(2,), device="cuda").to("cpu").low.device.type == "cpu"


# ---------------------------------------------------------------- bad values (issue #14)
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

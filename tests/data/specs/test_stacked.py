"""Heterogeneous stacks: ``Stacked`` leaves and ``StackedComposite`` (issue #19)."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from cadence.data import (
    Bounded,
    Categorical,
    Composite,
    OneHot,
    Stacked,
    StackedComposite,
    Unbounded,
)


def _agents(batch: tuple[int, ...] = ()) -> list[Composite]:
    """Three agents that observe different things and act in different ways."""
    return [
        Composite(
            observation=Unbounded(shape=batch + (size,)),
            action=Bounded(-1.0, 1.0, shape=batch + (act,)),
            reward=Unbounded(shape=batch + (1,)),
            shape=batch,
        )
        for size, act in ((3, 2), (5, 2), (4, 1))
    ]


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ------------------------------------------------------------------ leaves
def test_leaf_stack_of_different_shapes_keeps_the_elements() -> None:
    a, b = Unbounded(shape=(2, 3)), Unbounded(shape=(2, 5))
    spec = torch.stack([a, b], dim=1)
    assert isinstance(spec, Stacked)
    assert spec.shape == (2, 2, -1) and spec.stack_dim == 1 and spec.dtype == torch.float32
    assert spec[:, 0] == a and spec[:, 1] == b
    assert spec.unbind(1) == (a, b)
    assert [s.shape for s in spec.unbind(0)] == [(2, -1), (2, -1)]  # dim 0 is shared: each part is a stack
    assert spec[0].shape == (2, -1) and spec[0][1].shape == (5,)


def test_leaf_stack_values_nested_lists_and_dense() -> None:
    spec = torch.stack([Bounded(0, 1, shape=(2,)), Bounded(0, 1, shape=(4,))])
    value = spec.rand(generator=_gen())
    assert value.is_nested and [t.shape for t in value.unbind()] == [(2,), (4,)]
    assert spec.is_in(value) and spec.is_in(spec.zero()) and spec.is_in(spec.one())
    assert not spec.is_in([torch.zeros(2), torch.full((4,), 2.0)])
    with pytest.raises(ValueError, match=r"element 1 of the stack.*values in"):
        spec.assert_is_in([torch.zeros(2), torch.full((4,), 2.0)])
    with pytest.raises(ValueError, match="expected 2 stacked values, got 1"):
        spec.assert_is_in([torch.zeros(2)])
    projected = spec.project([torch.full((2,), -3.0), torch.full((4,), 3.0)])
    assert projected[0].tolist() == [0.0, 0.0] and projected[1].tolist() == [1.0] * 4
    # generation with leading dims goes through a Composite: the error says so
    with pytest.raises(ValueError, match="Composite that holds this spec"):
        spec.rand((3,))


def test_leaf_stack_structural_operations() -> None:
    spec = torch.stack([Categorical(3, shape=(2,)), Categorical(3, shape=(4,))])
    wide = spec.expand(5, 2, -1)
    assert wide.shape == (5, 2, -1) and wide.stack_dim == 1 and wide.specs[1].shape == (5, 4)
    with pytest.raises(ValueError, match="pass -1"):
        spec.expand(5, 2, 4)
    assert spec.unsqueeze(0).shape == (1, 2, -1) and spec.unsqueeze(0).squeeze(0) == spec
    assert spec.clone() == spec and spec.clone() is not spec
    assert spec.to(torch.int32).dtype == torch.int32
    assert spec[[1, 0]].specs == (spec.specs[1], spec.specs[0])
    same = spec[[1, 1]]
    assert not isinstance(same, Stacked) and same.shape == (2, 4)  # equal elements stack densely
    with pytest.raises(IndexError, match="out of range"):
        spec[2]
    with pytest.raises(IndexError, match="int, slice, list"):
        spec[None]


def test_leaf_stack_still_rejects_mixed_classes_dtypes_and_ranks() -> None:
    with pytest.raises(ValueError, match="different classes"):
        torch.stack([Unbounded(shape=(3,)), Bounded(0, 1, shape=(4,))])
    with pytest.raises(ValueError, match="dtypes"):
        torch.stack([Unbounded(shape=(3,)), Unbounded(shape=(4,), dtype=torch.float64)])
    with pytest.raises(ValueError, match="would split"):
        torch.stack([OneHot(3), OneHot(4)], dim=1)


# -------------------------------------------------------------- composites
def test_stacking_heterogeneous_composites() -> None:
    agents = _agents()
    spec = torch.stack(agents, dim=0)
    assert isinstance(spec, StackedComposite) and spec.shape == (3,) and spec.stack_dim == 0
    assert spec["observation"].shape == (3, -1) and spec["action"].shape == (3, -1)
    assert not isinstance(spec["reward"], Stacked) and spec["reward"].shape == (3, 1)
    assert [spec[i] == agents[i] for i in range(3)] == [True] * 3
    assert spec[1:].shape == (2,) and spec[1:]["observation"].specs == (Unbounded(shape=(5,)), Unbounded(shape=(4,)))


@pytest.mark.parametrize("make", ["rand", "zero", "one"])
def test_heterogeneous_composite_makes_lazily_stacked_tensordicts(make: str) -> None:
    spec = torch.stack(_agents(), dim=0)
    kwargs = {"generator": _gen()} if make == "rand" else {}
    value = getattr(spec, make)((4,), **kwargs)
    assert isinstance(value, LazyStackedTensorDict) and value.batch_size == (4, 3)
    assert [value[:, i]["observation"].shape[-1] for i in range(3)] == [3, 5, 4]
    assert value["reward"].shape == (4, 3, 1)  # homogeneous entries read as dense tensors
    assert spec.is_in(value)


def test_heterogeneous_composite_checks_element_by_element() -> None:
    spec = torch.stack(_agents(), dim=0)
    value = spec.rand(generator=_gen())
    value.tensordicts[2]["action"] = torch.full((1,), 5.0)
    with pytest.raises(ValueError, match=r"element 2 along dim 0: key 'action'.*values in"):
        spec.assert_is_in(value)
    spec.project(value)
    assert value.tensordicts[2]["action"].tolist() == [1.0]
    assert spec.is_in(value)
    value.tensordicts[0]["observation"] = torch.zeros(4)
    with pytest.raises(ValueError, match=r"element 0 along dim 0: key 'observation'.*\(3,\).*\(4,\)"):
        spec.assert_is_in(value)
    # a rollout of T steps is in the spec of one step (a leading dim)
    steps = torch.stack([spec.rand(generator=_gen(i)) for i in range(5)], 0)
    assert steps.batch_size == (5, 3) and spec.is_in(steps)


def test_heterogeneous_composite_structural_operations() -> None:
    spec = torch.stack(_agents((2,)), dim=1)  # envs first, agents second
    assert spec.shape == (2, 3) and spec.stack_dim == 1 and spec["observation"].shape == (2, 3, -1)
    value = spec.rand(generator=_gen())
    assert value.batch_size == (2, 3) and spec.is_in(value)
    wide = spec.expand(4, 2, 3)
    assert wide.shape == (4, 2, 3) and wide.stack_dim == 2 and wide["observation"].specs[1].shape == (4, 2, 5)
    assert wide.rand().batch_size == (4, 2, 3)
    first_env = spec[0]
    assert first_env.shape == (3,) and first_env.stack_dim == 0
    assert spec.clone() == spec and spec.unsqueeze(0).squeeze(0) == spec
    locked = spec.clone().lock_()
    with pytest.raises(RuntimeError, match="locked"):
        locked["extra"] = Unbounded(shape=(2, 3, 1))


def test_homogeneous_stacks_are_unchanged() -> None:
    agents = [Composite(observation=Unbounded(shape=(3,))) for _ in range(2)]
    spec = torch.stack(agents, dim=0)
    assert type(spec) is Composite and spec["observation"].shape == (2, 3)
    assert type(spec.rand()) is TensorDict


def test_composite_stacks_reject_different_keys_and_batch_shapes() -> None:
    with pytest.raises(ValueError, match=r"different keys.*missing \['b'\]"):
        torch.stack([Composite(a=Unbounded(), b=Unbounded()), Composite(a=Unbounded())])
    with pytest.raises(ValueError, match=r"batch shape \(2,\)"):
        torch.stack([Composite(shape=(3,)), Composite(shape=(2,))])


def test_the_seeds_multi_agent_spec_creation_with_heterogeneous_agents() -> None:
    """The seed's "multi-agent spec creation" example, with agents that differ in shape."""
    n_agents = 3
    action_specs, observation_specs, reward_specs = [], [], []
    for i in range(n_agents):
        action_specs.append(Bounded(-1.0, 1.0, shape=(2 + i,)))
        reward_specs.append(Unbounded(shape=(1,)))
        observation_specs.append(Unbounded(shape=(4 + i,)))
    action_spec = Composite({"agents": Composite({"action": torch.stack(action_specs)}, shape=(n_agents,))})
    reward_spec = Composite({"agents": Composite({"reward": torch.stack(reward_specs)}, shape=(n_agents,))})
    observation_spec = Composite(
        {"agents": Composite({"observation": torch.stack(observation_specs)}, shape=(n_agents,))}
    )
    assert action_spec["agents", "action"].shape == (3, -1)
    assert reward_spec["agents", "reward"].shape == (3, 1)
    data = observation_spec.rand(generator=_gen())
    assert isinstance(data["agents"], LazyStackedTensorDict)
    assert [t.shape for t in data["agents"].get("observation", as_list=True)] == [(4,), (5,), (6,)]
    assert observation_spec.is_in(data) and action_spec.is_in(action_spec.zero())

"""Key and shape transforms: values on known data, specs (single and batched), resets."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data import Bounded, Composite, Unbounded
from cadence.envs import GymEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import TransformedEnv
from cadence.envs.transforms.keys import (
    CatTensors,
    ExcludeTransform,
    FlattenObservation,
    PermuteTransform,
    RenameTransform,
    SelectTransform,
    SqueezeTransform,
    TensorDictPrimer,
    UnsqueezeTransform,
    gSDENoise,
)
from tests.fakes import CountingEnv


def _all_spec_checks(make_transform, make_env=lambda: CountingEnv(max_count=100)):
    check_env_specs(TransformedEnv(make_env(), make_transform()))
    check_env_specs(TransformedEnv(SerialEnv(2, make_env), make_transform()))
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(make_env(), make_transform())))


def test_rename_outputs_and_inputs():
    make = lambda: RenameTransform(["count", "reward"], ["steps", "gain"], in_keys_inv=["action"], out_keys_inv=["push"])
    env = TransformedEnv(CountingEnv(max_count=100), make())
    assert list(env.observation_spec.keys()) == ["steps"] and env.reward_key == "gain" and env.action_key == "push"
    data = env.rollout(3)
    assert data["next", "steps"].squeeze(-1).tolist() == [1.0, 2.0, 3.0] and "count" not in data["next"].keys()
    assert "push" in data.keys() and "action" not in data.keys()
    assert data["steps"].squeeze(-1).tolist() == [0.0, 1.0, 2.0]  # the reset output renamed too
    _all_spec_checks(make)
    copy = TransformedEnv(CountingEnv(), RenameTransform(["count"], ["steps"], create_copy=True))
    assert sorted(copy.rollout(1)["next"].keys()) == ["count", "done", "reward", "steps", "terminated"]
    check_env_specs(copy)
    with pytest.raises(KeyError, match="RenameTransform reads 'nope'"):
        TransformedEnv(CountingEnv(), RenameTransform(["nope"], ["x"]))
    with pytest.raises(ValueError, match="must pair up"):
        RenameTransform(["a", "b"], ["x"])


def test_cat_tensors_values_specs_and_options():
    data = TensorDict({"b": torch.tensor([2.0]), "a": torch.tensor([1.0, 1.0]), "s": torch.tensor(5.0)}, [])
    out = CatTensors(in_keys=["b", "a"], out_key="v", del_keys=False)(data.clone())
    assert out["v"].tolist() == [1.0, 1.0, 2.0] and "a" in out.keys()  # sorted keys
    assert CatTensors(in_keys=["b", "a"], sort=False)(data.clone())["observation_vector"].tolist() == [2.0, 1.0, 1.0]
    with pytest.raises(RuntimeError, match="unsqueeze_if_oor"):
        CatTensors(in_keys=["a", "s"])(data.clone())
    assert CatTensors(in_keys=["a", "s"], unsqueeze_if_oor=True)(data.clone())["observation_vector"].tolist() == [1, 1, 5]
    with pytest.raises(KeyError, match=r"\['b'\] are missing"):
        CatTensors(in_keys=["a", "b"])(TensorDict({"a": torch.zeros(1)}, []))
    with pytest.raises(ValueError, match="negative"):
        CatTensors(in_keys=["a"], dim=0)

    env = TransformedEnv(CountingEnv(max_count=100), CatTensors(in_keys=["count"], out_key="vec"))
    assert list(env.observation_spec.keys()) == ["vec"]
    assert env.rollout(2)["next", "vec"].squeeze(-1).tolist() == [1.0, 2.0]
    _all_spec_checks(lambda: CatTensors(in_keys=["count"], out_key="vec"))
    # without in_keys: every floating observation (the tutorial's chain on Pendulum)
    pend = TransformedEnv(GymEnv("Pendulum-v1"), CatTensors())
    assert pend.transform[0].in_keys == ["observation"]
    assert pend.observation_spec["observation_vector"].shape == (3,)
    check_env_specs(pend)


def test_unsqueeze_and_squeeze_round_trip():
    make = lambda: UnsqueezeTransform(-1, in_keys=["count"], in_keys_inv=["action"])
    env = TransformedEnv(CountingEnv(max_count=100), make())
    assert env.observation_spec["count"].shape == (1, 1) and env.action_spec.shape == (1, 1)
    assert isinstance(env.action_spec, Bounded)
    data = env.rollout(2)
    assert data["next", "count"].shape == (2, 1, 1) and data["action"].shape == (2, 1, 1)
    _all_spec_checks(make)
    back = TransformedEnv(CountingEnv(max_count=100), SqueezeTransform(-1, in_keys=["count"]))
    assert back.rollout(2)["next", "count"].tolist() == [1.0, 2.0]
    _all_spec_checks(lambda: SqueezeTransform(-1, in_keys=["count", "reward"]))
    with pytest.raises(RuntimeError, match="size one at -1"):
        SqueezeTransform(-1, in_keys=["x"])(TensorDict({"x": torch.zeros(3)}, []))
    with pytest.raises(ValueError, match="allow_positive_dim"):
        UnsqueezeTransform(0, in_keys=["x"])
    assert UnsqueezeTransform(0, in_keys=["x"], allow_positive_dim=True)(
        TensorDict({"x": torch.zeros(3)}, []))["x"].shape == (1, 3)


def _with_copy(*more):
    """CountingEnv emitting "count" and its copy "copy"."""
    env = TransformedEnv(CountingEnv(max_count=100), RenameTransform(["count"], ["copy"], create_copy=True))
    for transform in more:
        env.append_transform(transform)
    return env


def test_select_and_exclude():
    selected = _with_copy(SelectTransform("count"))
    assert list(selected.observation_spec.keys()) == ["count"]
    data = selected.rollout(2)
    assert sorted(data["next"].keys()) == ["count", "done", "reward", "terminated"]
    assert sorted(data.keys()) == ["action", "count", "done", "next", "terminated"]  # the reset output too
    check_env_specs(selected)
    check_env_specs(SerialEnv(2, lambda: _with_copy(SelectTransform("copy"))))
    no_reward = SelectTransform("a", keep_rewards=False)(TensorDict({"a": torch.zeros(1), "reward": torch.zeros(1)}, []))
    assert list(no_reward.keys()) == ["a"]
    with pytest.raises(ValueError, match="keep_dones=False"):
        _with_copy(SelectTransform("count", keep_dones=False))

    excluded = _with_copy(ExcludeTransform("copy"))
    assert list(excluded.observation_spec.keys()) == ["count"]
    assert "copy" not in excluded.rollout(2)["next"].keys()
    check_env_specs(excluded)
    _all_spec_checks(lambda: ExcludeTransform("count"))
    with pytest.raises(ValueError, match="done entry 'done'"):
        TransformedEnv(CountingEnv(), ExcludeTransform("done"))


def test_flatten_and_permute():
    flat = FlattenObservation(-2, -1, in_keys=["x"])
    assert flat(TensorDict({"x": torch.arange(6.0).reshape(1, 2, 3)}, [1]))["x"].tolist() == [[0, 1, 2, 3, 4, 5]]
    spec = Bounded(torch.zeros(2, 3), torch.arange(1.0, 7.0).reshape(2, 3))
    assert flat._leaf(spec).high.tolist() == [1, 2, 3, 4, 5, 6]
    make = lambda: FlattenObservation(-2, -1, in_keys=["count"])
    env = TransformedEnv(CountingEnv(max_count=100), UnsqueezeTransform(-1, in_keys=["count"]))
    env.append_transform(make())
    assert env.observation_spec["count"].shape == (1,)
    check_env_specs(env)
    with pytest.raises(ValueError, match="comes after"):
        FlattenObservation(-1, -2)

    image = torch.arange(24.0).reshape(2, 3, 4)  # H, W, C
    perm = PermuteTransform([-1, -3, -2], in_keys=["pixels"], in_keys_inv=["act"])
    out = perm(TensorDict({"pixels": image}, []))["pixels"]
    assert out.shape == (4, 2, 3) and torch.equal(out, image.permute(2, 0, 1))
    assert torch.equal(perm.inv(TensorDict({"act": out}, []))["act"], image)
    with pytest.raises(ValueError, match="permutation"):
        PermuteTransform([-1, -1])
    two_d = lambda: TransformedEnv(CountingEnv(max_count=100), UnsqueezeTransform(-1, in_keys=["count"]))
    _all_spec_checks(lambda: PermuteTransform([-1, -2], in_keys=["count"]), make_env=two_d)


def test_primer_reset_carry_and_partial_reset():
    make = lambda: TensorDictPrimer(hidden=Unbounded(shape=(2,)), default_value=3.0)
    env = TransformedEnv(CountingEnv(max_count=100), make())
    assert env.state_spec["hidden"].shape == (2,) and env.observation_spec["hidden"].shape == (2,)
    assert env.reset()["hidden"].tolist() == [3.0, 3.0]
    # a policy writes the state; the env carries it to the next step
    data = env.reset()
    data["hidden"] = torch.tensor([7.0, 8.0])
    data = env.step(env.rand_action(data))
    assert data["next", "hidden"].tolist() == [7.0, 8.0]
    _all_spec_checks(make)
    batched = TransformedEnv(SerialEnv(2, lambda: CountingEnv(max_count=100)), make())
    data = batched.reset()
    data["hidden"] = torch.ones(2, 2)
    data["_reset"] = torch.tensor([[True], [False]])
    assert batched.reset(data)["hidden"].tolist() == [[3.0, 3.0], [1.0, 1.0]]
    primed = TensorDictPrimer(Composite(h=Unbounded(shape=(1,))), random=True)(TensorDict({}, [4]))
    assert primed["h"].shape == (4, 1)
    with pytest.raises(ValueError, match="no primers"):
        TensorDictPrimer()


def test_gsde_noise():
    env = TransformedEnv(GymEnv("Pendulum-v1"), gSDENoise(state_dim=3, action_dim=1))
    first, second = env.reset()["_eps_gSDE"], env.reset()["_eps_gSDE"]
    assert first.shape == (1, 3) and not torch.equal(first, second)  # drawn anew at each reset
    check_env_specs(env)
    lazy = TransformedEnv(SerialEnv(2, lambda: GymEnv("Pendulum-v1")), gSDENoise(shape=(5,)))
    assert lazy.reset()["_eps_gSDE"].tolist() == [[[0.0]] * 5] * 2
    check_env_specs(lazy)


def test_pin_memory_is_a_no_op_without_cuda():
    from cadence.envs.transforms.keys import PinMemoryTransform

    make = lambda: PinMemoryTransform()
    env = TransformedEnv(CountingEnv(max_count=100), make())
    data = env.rollout(2)
    assert data["next", "count"].squeeze(-1).tolist() == [1.0, 2.0]
    assert data["next", "count"].is_pinned() == torch.cuda.is_available()
    _all_spec_checks(make)

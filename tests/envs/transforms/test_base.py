"""Transform, Compose, TransformedEnv: specs, ownership and cloning, inverse path, errors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data import Bounded, Composite, Unbounded
from cadence.envs import EnvBase, GymEnv, ParallelEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import (
    Compose,
    DoubleToFloat,
    ObservationNorm,
    RewardScaling,
    RewardSum,
    Transform,
    TransformedEnv,
)


class DoubleEnv(EnvBase):
    """A double-precision env: float64 observations and actions, as dm_control has."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(obs=Unbounded(shape=(2,), dtype=torch.float64))
        self.action_spec = Bounded(-1.0, 1.0, shape=(2,), dtype=torch.float64)
        self.received = []

    def _reset(self, tensordict):
        return TensorDict({"obs": torch.zeros(2, dtype=torch.float64)}, [])

    def _step(self, tensordict):
        action = tensordict["action"]
        self.received.append(action.dtype)
        return TensorDict({"obs": action.clone(), "reward": torch.ones(1), "done": torch.zeros(1, dtype=torch.bool)}, [])


def test_seed_cloning_rules():
    base_env = GymEnv("Pendulum-v1")
    transform1, transform2, transform3 = RewardScaling(0.0, 1.0), RewardScaling(0.0, 2.0), RewardSum()
    env = TransformedEnv(base_env, Compose(transform1, transform2, transform3))
    third_transform = env.transform[2]
    assert third_transform.parent is not None
    with pytest.raises(ValueError, match="already belongs"):
        TransformedEnv(base_env, third_transform)  # raises an Exception as third_transform already has a parent
    TransformedEnv(base_env, third_transform.clone())  # works
    last_two = env.transform[-2:]
    assert isinstance(last_two, Compose)
    assert last_two.parent is None
    assert last_two[0] is not transform2
    assert isinstance(last_two[0], type(transform2))  # and the buffers will match
    assert last_two[0].scale is transform2.scale
    assert last_two[1] is not transform3
    assert isinstance(last_two[1], type(transform3))


def test_parent_is_the_env_up_to_the_transform():
    base_env = GymEnv("Pendulum-v1")
    env = TransformedEnv(base_env, Compose(RewardSum(), RewardScaling(0.0, 0.5)))
    resize_parent = env.transform[-1].parent  # returns the same as TransformedEnv(base_env, transform[:-1])
    expected = TransformedEnv(base_env, env.transform[:-1])
    assert resize_parent.observation_spec == expected.observation_spec
    assert "episode_reward" in resize_parent.observation_spec.keys()
    assert env.transform[0].parent.observation_spec == base_env.observation_spec


def test_base_specs_are_never_changed():
    base_env = GymEnv("Pendulum-v1")
    before = base_env.observation_spec.clone()
    env = TransformedEnv(base_env, RewardSum())
    assert "episode_reward" in env.observation_spec.keys()
    assert base_env.observation_spec == before


def test_append_and_insert_transform():
    env = TransformedEnv(GymEnv("CartPole-v1"))
    env.append_transform(RewardSum())
    env.insert_transform(0, RewardScaling(0.0, 2.0))
    data = env.rollout(3)
    assert data["next", "episode_reward"].squeeze(-1).tolist() == [2.0, 4.0, 6.0]
    check_env_specs(env)


def test_append_with_unknown_in_keys_names_the_key_and_the_keys_there():
    env = TransformedEnv(GymEnv("CartPole-v1"))
    with pytest.raises(KeyError, match=r"'pixels'.*emits.*observation"):
        env.append_transform(RewardScaling(0.0, 1.0, in_keys=["pixels"]))
    assert len(env.transform) == 0  # the env is left as it was
    env.rollout(2)


def test_wrong_data_names_the_transform_and_the_key():
    class Reshape(Transform):
        def _apply_transform(self, value):
            return value.view(2, 2)

    with pytest.raises(RuntimeError, match=r"Reshape.*'x'.*\(3,\)"):
        Reshape(in_keys=["x"])(TensorDict({"x": torch.zeros(3)}, []))


def test_catalogue_transforms_name_themselves_and_the_key_on_bad_data():
    norm = ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3), in_keys=["obs"], standard_normal=True)
    with pytest.raises(RuntimeError, match=r"ObservationNorm could not transform 'obs' \(shape \(4,\)"):
        norm(TensorDict({"obs": torch.zeros(4)}, []))
    with pytest.raises(RuntimeError, match=r"ObservationNorm could not transform 'obs' .*dtype torch.bool"):
        norm(TensorDict({"obs": torch.zeros(3, dtype=torch.bool)}, []))


def test_inverse_transform_as_in_the_seed():
    base = DoubleEnv()
    env = TransformedEnv(base)
    env.append_transform(DoubleToFloat(in_keys_inv=["action"]))  # will map the action from float32 to float64
    assert env.action_spec.dtype == torch.float32
    assert base.action_spec.dtype == torch.float64
    assert env.observation_spec["obs"].dtype == torch.float32
    data = env.rollout(3)
    assert data["action"].dtype == torch.float32 and data["next", "obs"].dtype == torch.float32
    assert base.received == [torch.float64] * 3
    check_env_specs(env)


def test_state_dict_round_trip():
    env = TransformedEnv(GymEnv("Pendulum-v1"), RewardScaling(0.0, 3.0))
    state = env.transform.state_dict()
    other = TransformedEnv(GymEnv("Pendulum-v1"), RewardScaling(0.0, 1.0))
    other.transform.load_state_dict(state)
    assert other.transform[0].scale.item() == 3.0


def test_attributes_of_the_base_env_pass_through():
    env = TransformedEnv(GymEnv("Pendulum-v1", g=9.81), RewardSum())
    assert env.g == 9.81


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_transforms_on_batched_envs(where):
    if where == "outside":
        env = TransformedEnv(SerialEnv(2, lambda: GymEnv("CartPole-v1")), RewardSum())
    else:
        env = SerialEnv(2, lambda: TransformedEnv(GymEnv("CartPole-v1"), RewardSum()))
    check_env_specs(env)
    data = env.rollout(60, break_when_any_done=False)
    done = data["next", "done"].squeeze(-1)
    episode = data["next", "episode_reward"].squeeze(-1)
    # after each done step the sum starts again from the first reward
    assert (episode[:, 1:][done[:, :-1]] == 1).all()


def test_transforms_in_parallel_workers_and_outside():
    with ParallelEnv(2, lambda: TransformedEnv(GymEnv("CartPole-v1"), RewardSum())) as inside:
        check_env_specs(inside)
        assert inside.rollout(5)["next", "episode_reward"][0].squeeze(-1).tolist() == [1, 2, 3, 4, 5]
    outside = TransformedEnv(ParallelEnv(2, lambda: GymEnv("CartPole-v1")), RewardSum())
    check_env_specs(outside)
    assert outside.rollout(5)["next", "episode_reward"][1].squeeze(-1).tolist() == [1, 2, 3, 4, 5]
    outside.close()

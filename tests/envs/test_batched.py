"""SerialEnv and EnvCreator: batch layout, partial resets, seeding, pass-through, shortcut."""

from __future__ import annotations

import pickle

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.envs import EnvCreator, GymEnv, SerialEnv, check_env_specs
from tests.fakes import CountingEnv, GenericPathGymEnv, SharedCounterEnv, assert_same_rollout


def test_batch_size_and_specs_come_from_one_sub_env():
    env = SerialEnv(3, lambda: GymEnv("CartPole-v1"))
    assert env.batch_size == torch.Size([3])
    assert env.action_spec.shape == torch.Size([3, 2])
    assert env.observation_spec["observation"].shape == torch.Size([3, 4])
    assert env.done_spec["truncated"].shape == torch.Size([3, 1])
    assert not env.is_started
    check_env_specs(env, seed=0)
    assert env.is_started
    env.close()


def test_create_env_fn_and_kwargs_per_worker():
    env = SerialEnv(2, CountingEnv, create_env_kwargs=[{"max_count": 2}, {"max_count": 3}])
    data = env.rollout(6, break_when_any_done=False)
    assert data["next", "done"].squeeze(-1).tolist() == [
        [False, True, False, True, False, True],
        [False, False, True, False, False, True],
    ]
    env = SerialEnv(2, [lambda: CountingEnv(max_count=2), lambda: CountingEnv(max_count=3)])
    assert env.rollout(3, break_when_any_done=True).batch_size == torch.Size([2, 2])
    with pytest.raises(ValueError, match="one entry per worker"):
        SerialEnv(3, [CountingEnv, CountingEnv])


def test_attribute_and_method_pass_through():
    env = SerialEnv(4, lambda: GymEnv("Pendulum-v1", g=9.81))
    a, b, c, d = env.g  # gets the g-force of the various envs, which we set to 9.81 before
    assert a == b == c == d == 9.81
    counters = SerialEnv(2, SharedCounterEnv)
    assert counters.twice(3) == [6, 6]
    with pytest.raises(AttributeError):
        env.no_such_attribute


def test_partial_reset_as_in_the_seed():
    env = SerialEnv(4, lambda: GymEnv("CartPole-v1"))
    env.set_seed(0)
    first = env.reset()
    tensordict = TensorDict({"_reset": [[True], [False], [True], [True]]}, [4])
    out = env.reset(tensordict)  # eliminates the "_reset" entry
    assert set(out.keys()) == {"terminated", "done", "observation", "truncated"}
    assert "_reset" not in tensordict.keys()
    assert out["done"].shape == torch.Size([4, 1])
    assert torch.equal(out["observation"][1], first["observation"][1])
    assert not torch.equal(out["observation"][0], first["observation"][0])


def test_partial_reset_after_steps_keeps_the_others_running():
    env = SerialEnv(3, lambda: CountingEnv(max_count=100))
    data = env.reset()
    for _ in range(2):
        data = env._step_mdp(env.step(env.rand_action(data)))
    out = env.reset(TensorDict({"_reset": [[False], [True], [False]]}, [3]))
    assert out["count"].squeeze(-1).tolist() == [2.0, 0.0, 2.0]


def test_seeding_gives_each_worker_its_own_seed_and_repeats():
    env = SerialEnv(3, lambda: GymEnv("CartPole-v1"))
    next_seed = env.set_seed(0)
    assert next_seed not in (None, 0)
    first = env.reset()["observation"]
    assert not torch.equal(first[0], first[1])  # different seeds per worker
    other = SerialEnv(3, lambda: GymEnv("CartPole-v1"))
    assert other.set_seed(0) == next_seed
    assert torch.equal(other.reset()["observation"], first)
    env.set_seed(0)
    other.set_seed(0)
    assert_same_rollout(env.rollout(30, break_when_any_done=False), other.rollout(30, break_when_any_done=False))


def test_nested_batching():
    env = SerialEnv(2, lambda: GymEnv("CartPole-v1", num_envs=4))
    assert env.batch_size == torch.Size([2, 4])
    check_env_specs(env, seed=0)
    data = env.rollout(30, break_when_any_done=False)
    assert data.batch_size == torch.Size([2, 4, 30]) and data.names == [None, None, "time"]
    data_ = env.reset()
    for _ in range(20):
        data, data_ = env.step_and_maybe_reset(env.rand_action(data_))
    assert data["next", "observation"].shape == torch.Size([2, 4, 4])
    assert not data_["done"].any()


@pytest.mark.parametrize("num_envs", [None, 3])
@pytest.mark.parametrize("break_when_any_done", [True, False])
def test_serial_shortcut_equals_the_generic_path(num_envs, break_when_any_done):
    fast_env = SerialEnv(2, lambda: GymEnv("CartPole-v1", num_envs=num_envs))
    fast_env.set_seed(0)
    fast = fast_env.rollout(60, break_when_any_done=break_when_any_done)
    slow_env = SerialEnv(2, lambda: GenericPathGymEnv("CartPole-v1", num_envs=num_envs))
    slow_env.set_seed(0)
    actions = iter(fast["action"].unbind(fast.batch_dims - 1))
    slow = slow_env.rollout(60, lambda td: td.set("action", next(actions)), break_when_any_done=break_when_any_done)
    assert_same_rollout(fast, slow)


def test_serial_shortcut_with_a_policy_equals_the_generic_path():
    torch.manual_seed(0)  # the test's own weights
    policy = TensorDictSequential(
        TensorDictModule(torch.nn.Linear(4, 2), in_keys=["observation"], out_keys=["logits"]),
        TensorDictModule(
            lambda x: torch.nn.functional.one_hot(x.argmax(-1), 2).bool(), in_keys=["logits"], out_keys=["action"]
        ),
    )
    results = []
    for cls in (GymEnv, GenericPathGymEnv):
        env = SerialEnv(3, lambda cls=cls: cls("CartPole-v1"))
        env.set_seed(4)
        with torch.no_grad():
            results.append(env.rollout(80, policy, break_when_any_done=False))
    assert_same_rollout(*results)


def test_partial_reset_after_a_shortcut_rollout_keeps_the_current_data():
    env = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
    data = env.rollout(5, break_when_any_done=False)
    out = env.reset(TensorDict({"_reset": [[True], [False]]}, [2]))
    assert torch.equal(out["observation"][1], data["next", "observation"][1, -1])


def test_generic_envs_in_a_serial_batch():
    env = SerialEnv(2, lambda: CountingEnv(max_count=3))
    data = env.rollout(7, break_when_any_done=False)
    assert data["next", "count"][0].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert data["count"][1].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_context_manager_and_close():
    with SerialEnv(2, lambda: GymEnv("CartPole-v1")) as env:
        env.rollout(3)
    assert env.is_closed
    first = env._envs[0]
    assert env.rollout(3).batch_size == torch.Size([2, 3])  # a closed batch reopens on use (new sub-envs)
    assert not env.is_closed and env._envs[0] is not first and first.is_closed


def test_env_creator_pickles_and_shares_buffers():
    creator = EnvCreator(SharedCounterEnv)
    assert creator.meta_data.batch_size == torch.Size([])
    restored = pickle.loads(pickle.dumps(EnvCreator(lambda: CountingEnv(max_count=4))))
    assert restored().max_count == 4
    env = SerialEnv(2, creator)
    env.rollout(3)
    # both sub-envs bump the same buffer
    assert env.steps_taken == [torch.tensor(6), torch.tensor(6)]


def test_env_creator_rejects_a_non_env():
    with pytest.raises(TypeError, match="not an EnvBase"):
        EnvCreator(lambda: object()).meta_data

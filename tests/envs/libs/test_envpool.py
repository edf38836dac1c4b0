"""MultiThreadedEnv / MultiThreadedEnvWrapper: EnvPool pools as Cadence envs."""

from __future__ import annotations

import sys

import gymnasium
import numpy as np
import pytest
import torch

envpool = pytest.importorskip(
    "envpool",
    minversion="0.9",
    reason='envpool>=0.9 is not installed (pip install "cadence[envpool]"); the EnvPool wrappers are untested',
)

from cadence.data import Bounded, Categorical, OneHot  # noqa: E402
from cadence.envs import MultiThreadedEnv, MultiThreadedEnvWrapper, check_env_specs  # noqa: E402
from cadence.envs.gym_like import default_info_dict_reader  # noqa: E402
from cadence.envs.libs.envpool import _as_int32_seed  # noqa: E402


def cartpole_policy(td):
    """A deterministic policy (push towards the pole), so that two rollouts take the same actions."""
    push_right = td["observation"][..., 2] + 0.3 * td["observation"][..., 3] > 0
    return td.set("action", torch.nn.functional.one_hot(push_right.long(), 2).bool())


def assert_same_rollout(a, b):
    assert a.batch_size == b.batch_size
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        torch.testing.assert_close(a.get(key), b.get(key), rtol=0, atol=0, msg=lambda m: f"{key}: {m}")


# ---------------------------------------------------------------- construction, specs
def test_exported_and_missing_envpool_says_what_to_install(monkeypatch):
    import cadence.envs

    assert {"MultiThreadedEnv", "MultiThreadedEnvWrapper"} <= set(cadence.envs.__all__)
    monkeypatch.setitem(sys.modules, "envpool", None)  # import envpool now raises ImportError
    with pytest.raises(ImportError, match=r'pip install "cadence\[envpool\]"'):
        MultiThreadedEnv(2, "CartPole-v1")


def test_envpool_builds_for_numpy_1_are_refused_under_numpy_2(monkeypatch):
    if int(np.__version__.split(".")[0]) < 2:
        pytest.skip("numpy 1 is installed: old envpool builds work with it")
    monkeypatch.setattr(envpool, "__version__", "0.8.4")
    with pytest.raises(ImportError, match="corrupted data"):
        MultiThreadedEnv(2, "CartPole-v1")


def test_cartpole_specs():
    env = MultiThreadedEnv(3, "CartPole-v1")
    assert env.batch_size == torch.Size([3]) and env.num_workers == 3
    obs = env.observation_spec["observation"]
    assert isinstance(obs, Bounded) and obs.shape == torch.Size([3, 4]) and obs.dtype == torch.float32
    assert isinstance(env.action_spec, OneHot) and env.action_spec.shape == torch.Size([3, 2])
    assert env.reward_spec.shape == torch.Size([3, 1])
    assert set(env.done_keys) == {"done", "terminated", "truncated"}
    assert env.full_done_spec["done"].shape == torch.Size([3, 1])
    check_env_specs(env, seed=0)
    assert "CartPole-v1" in repr(env)


def test_discrete_actions_one_hot_by_default_categorical_on_request():
    one_hot = MultiThreadedEnv(2, "CartPole-v1")
    data = one_hot.rollout(4)
    assert data["action"].shape == torch.Size([2, 4, 2]) and data["action"].dtype == torch.int64  # the space's dtype
    categorical = MultiThreadedEnv(2, "CartPole-v1", categorical_action_encoding=True)
    assert isinstance(categorical.action_spec, Categorical) and categorical.action_spec.shape == torch.Size([2])
    data = categorical.rollout(4)
    assert data["action"].shape == torch.Size([2, 4]) and data["action"].dtype == torch.long
    check_env_specs(categorical, seed=0)


def test_continuous_pendulum():
    env = MultiThreadedEnv(2, "Pendulum-v1", {"seed": 3})
    action = env.action_spec
    assert isinstance(action, Bounded) and action.shape == torch.Size([2, 1]) and action.dtype == torch.float32
    assert action.space.high.max().item() == 2.0
    assert env.observation_spec["observation"].shape == torch.Size([2, 3])
    check_env_specs(env, seed=0)
    data = env.rollout(201, break_when_any_done=False)
    # Pendulum ends by its time limit (200 steps): truncated, not terminated
    truncated = data["next", "truncated"].squeeze(-1)
    assert truncated[:, 199].all() and truncated.sum() == 2
    assert not data["next", "terminated"].any()
    assert data["next", "done"].equal(data["next", "truncated"])


def test_wrapper_of_a_built_pool():
    pool = envpool.make("Acrobot-v1", env_type="gymnasium", num_envs=3, seed=0)
    env = MultiThreadedEnvWrapper(pool, categorical_action_encoding=True)
    assert env.pool is pool and env.action_spec.n == 3
    check_env_specs(env)
    assert env.rollout(10, break_when_any_done=False).batch_size == torch.Size([3, 10])
    env.set_seed(1)  # rebuilds the pool from its own configuration
    assert env.pool is not pool and env.pool.config["num_envs"] == 3 and env.pool.config["seed"] == 1
    assert env.rollout(10).batch_size[0] == 3


def test_wrong_pools_and_arguments_are_refused():
    with pytest.raises(TypeError, match="env_type='gymnasium'"):  # a dm_env pool
        MultiThreadedEnvWrapper(envpool.make("CartPole-v1", env_type="dm", num_envs=2))
    with pytest.raises(TypeError, match="EnvPool pool"):
        MultiThreadedEnvWrapper(gymnasium.make("CartPole-v1"))
    with pytest.raises(ValueError, match="synchronous"):
        MultiThreadedEnvWrapper(envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, batch_size=2))
    with pytest.raises(ValueError, match="not an EnvPool task"):
        MultiThreadedEnv(2, "NoSuchTask-v0")
    with pytest.raises(ValueError, match="num_envs"):
        MultiThreadedEnv(2, "CartPole-v1", {"num_envs": 4})
    with pytest.raises(ValueError, match="num_workers"):
        MultiThreadedEnv(0, "CartPole-v1")


# ---------------------------------------------------------------- rollouts and resets
def test_cartpole_rollout_shapes_and_reset_semantics():
    env = MultiThreadedEnv(4, "CartPole-v1", {"seed": 0})
    data = env.rollout(300, break_when_any_done=False)
    assert data.batch_size == torch.Size([4, 300]) and data.names == [None, "time"]
    assert data["observation"].shape == data["next", "observation"].shape == torch.Size([4, 300, 4])
    assert data["action"].shape == torch.Size([4, 300, 2])
    for key in ("reward", "done", "terminated", "truncated"):
        assert data["next", key].shape == torch.Size([4, 300, 1])
    done = data["next", "done"].squeeze(-1)
    assert done.any(), "random CartPole episodes end within 300 steps"
    assert (data["next", "reward"] == 1).all()  # no zero-reward step: EnvPool's own autoreset never ran
    after, before = data["observation"][:, 1:], data["next", "observation"][:, :-1]
    # a step continues from where the previous one ended, except after a done step...
    assert torch.equal(after[~done[:, :-1]], before[~done[:, :-1]])
    # ... whose "next" observation is terminal, the next root observation a fresh start
    terminal = before[done[:, :-1]]
    assert ((terminal[:, 0].abs() > 2.4) | (terminal[:, 2].abs() > 0.2094)).all()
    assert (after[done[:, :-1]].abs() <= 0.05).all()


@pytest.mark.filterwarnings("ignore:.*precision lowered")  # the bare pool's own spaces
def test_rollout_equals_a_bare_envpool_loop():
    env = MultiThreadedEnv(3, "CartPole-v1", {"seed": 11})
    env.set_seed(5)
    with torch.no_grad():
        data = env.rollout(200, cartpole_policy, break_when_any_done=False)
    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=3, seed=5)
    obs, _ = pool.reset()
    for t in range(200):
        np.testing.assert_array_equal(data["observation"][:, t].numpy(), obs)
        action = (obs[:, 2] + np.float32(0.3) * obs[:, 3] > 0).astype(np.int64)
        obs, reward, terminated, truncated, _ = pool.step(action)
        np.testing.assert_array_equal(data["next", "observation"][:, t].numpy(), obs)
        np.testing.assert_array_equal(data["next", "terminated"][:, t, 0].numpy(), terminated)
        done = terminated | truncated
        if done.any():
            reset_obs, info = pool.reset(np.flatnonzero(done))
            obs = obs.copy()
            obs[info["env_id"]] = reset_obs


@pytest.mark.parametrize("break_when_any_done", [True, False])
def test_fast_rollout_equals_the_generic_path(break_when_any_done):
    results = []
    for generic in (False, True):
        env = MultiThreadedEnv(3, "CartPole-v1")
        assert env.kernel.startswith("gymnasium")
        env.set_seed(2)
        callback = (lambda env, td: None) if generic else None  # a callback takes the generic loop
        with torch.no_grad():
            results.append(env.rollout(150, cartpole_policy, callback, break_when_any_done=break_when_any_done))
    assert_same_rollout(*results)


def test_partial_reset_changes_only_the_selected_envs():
    env = MultiThreadedEnv(4, "CartPole-v1", {"seed": 0})
    env.set_info_dict_reader(default_info_dict_reader(["elapsed_step"]))
    data = env.reset()
    for _ in range(3):
        data = env.step(env.rand_action(data))["next"].exclude("reward")
    assert data["elapsed_step"].tolist() == [3, 3, 3, 3]
    before = data.clone()
    data["_reset"] = torch.tensor([[True], [False], [True], [False]])
    out = env.reset(data)
    assert "_reset" not in data.keys()
    for row in (1, 3):
        assert torch.equal(out["observation"][row], before["observation"][row])
    for row in (0, 2):
        assert not torch.equal(out["observation"][row], before["observation"][row])
    assert out["elapsed_step"].tolist() == [0, 3, 0, 3]
    # the pool agrees: the reset envs start over, the others go on
    nxt = env.step(env.rand_action(out))["next"]
    assert nxt["elapsed_step"].tolist() == [1, 4, 1, 4]
    assert nxt["observation"].shape == torch.Size([4, 4])


def test_step_and_maybe_reset_resets_the_done_envs():
    env = MultiThreadedEnv(2, "CartPole-v1", {"seed": 1})
    data_ = env.reset()
    seen_done = 0
    for _ in range(100):
        data, data_ = env.step_and_maybe_reset(env.rand_action(data_))
        done = data["next", "done"].squeeze(-1)
        seen_done += int(done.sum())
        if done.any():
            assert not torch.equal(data_["observation"][done], data["next", "observation"][done])
            assert (data_["observation"][done].abs() <= 0.05).all()
    assert seen_done > 0


def test_stepping_a_done_env_that_was_not_reset_raises():
    env = MultiThreadedEnv(2, "CartPole-v1", {"seed": 0})
    data = env.rollout(300)  # stops at the first done step
    assert data["next", "done"][:, -1].any()
    last = env._step_mdp(data[:, -1])
    with pytest.raises(RuntimeError, match="done and were not reset"):
        env.step(env.rand_action(last))
    env.set_seed(0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(env.rand_action(last))
    env.reset()
    env.rand_step()


# ---------------------------------------------------------------- seeds
def test_seeding_reproduces_a_rollout_and_a_new_seed_changes_it():
    a, b = MultiThreadedEnv(3, "CartPole-v1"), MultiThreadedEnv(3, "CartPole-v1", {"seed": 123})
    assert a.set_seed(7) == b.set_seed(7)
    ra, rb = a.rollout(100, break_when_any_done=False), b.rollout(100, break_when_any_done=False)
    assert_same_rollout(ra, rb)
    a.set_seed(7)
    assert_same_rollout(ra, a.rollout(100, break_when_any_done=False))  # reseeding the same env repeats it
    b.set_seed(8)
    assert not torch.equal(ra["observation"], b.rollout(100, break_when_any_done=False)["observation"])


def test_large_seeds_fold_into_int32():
    assert _as_int32_seed(2**31) == -(2**31) and _as_int32_seed(2**32 + 5) == 5
    env = MultiThreadedEnv(2, "CartPole-v1")
    next_seed = env.set_seed(3_000_000_000)  # beyond int32: still accepted
    assert env.pool.config["seed"] == _as_int32_seed(3_000_000_000)
    env.set_seed(next_seed)
    assert env.rollout(3).batch_size == torch.Size([2, 3])


def test_close():
    env = MultiThreadedEnv(2, "CartPole-v1")
    env.rollout(3)
    env.close()
    assert env.is_closed

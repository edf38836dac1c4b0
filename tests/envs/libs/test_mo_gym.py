"""MOGymEnv / MOGymWrapper: MO-Gymnasium's multi-objective envs, rewards as vectors."""

from __future__ import annotations

import re
import subprocess
import sys

import gymnasium
import numpy as np
import pytest
import torch

mo_gymnasium = pytest.importorskip(
    "mo_gymnasium", reason="needs the mo_gymnasium extra: pip install 'cadence[mo_gymnasium]'"
)

from cadence.data import Bounded, Unbounded  # noqa: E402
from cadence.envs.batched import SerialEnv  # noqa: E402
from cadence.envs.libs.mo_gym import MOGymEnv, MOGymWrapper, reward_space_of  # noqa: E402
from cadence.envs.parallel import ParallelEnv  # noqa: E402
from cadence.envs.utils import check_env_specs, step_mdp  # noqa: E402


def assert_same(a, b) -> None:
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        torch.testing.assert_close(a.get(key), b.get(key), rtol=0, atol=0, msg=lambda m: f"{key}: {m}")


def one_hot_actions(n_steps: int, n_actions: int, seed: int = 0, batch: tuple[int, ...] = ()) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    indices = torch.randint(n_actions, (*batch, n_steps), generator=generator)
    return torch.nn.functional.one_hot(indices, n_actions)


def step_by_step(env, actions: torch.Tensor):
    """The generic loop through the public API, one ``step`` at a time, resetting what is
    done through ``"_reset"`` (``actions`` time-last, as a rollout lays them out)."""
    data = env.reset()
    steps = []
    for t in range(actions.shape[env.batch_dims]):
        data.set("action", actions.select(env.batch_dims, t))
        stepped = env.step(data)
        steps.append(stepped.get("next").clone())
        data = step_mdp(stepped)
        if data["done"].any():
            data["_reset"] = data["done"].clone()
            data = env.reset(data)
    return torch.stack(steps, env.batch_dims)


# ---------------------------------------------------------------- specs
@pytest.mark.parametrize(
    ("name", "spec_type", "objectives"),
    [
        ("deep-sea-treasure-v0", Bounded, 2),
        ("mo-mountaincar-v0", Bounded, 3),
        ("mo-lunar-lander-v3", Bounded, 4),  # Box2D; its bounds are infinite for one objective
        ("mo-hopper-v5", Unbounded, 3),  # MuJoCo, continuous actions; no finite bound
    ],
)
def test_the_reward_spec_is_the_reward_space(name, spec_type, objectives):
    env = MOGymEnv(name)
    space = reward_space_of(env._env)
    assert type(env.reward_spec) is spec_type
    assert env.reward_spec.shape == torch.Size([objectives]) == torch.Size(space.shape)
    assert env.reward_spec.dtype == torch.float32
    assert env.reward_key == "reward" and env.reward_spec == env.output_spec["full_reward_spec"]["reward"]
    if spec_type is Bounded:
        np.testing.assert_array_equal(env.reward_spec.low.numpy(), space.low)
        np.testing.assert_array_equal(env.reward_spec.high.numpy(), space.high)
    check_env_specs(env, seed=0)
    data = env.rollout(20, break_when_any_done=False)
    assert data["next", "reward"].shape == (20, objectives)


def test_deep_sea_treasure_layout():
    env = MOGymEnv("deep-sea-treasure-v0")
    assert env.observation_spec["observation"].shape == (2,) and env.observation_spec["observation"].dtype == torch.int32
    assert env.action_spec.shape == (4,)  # one-hot by default, as GymEnv
    assert MOGymEnv("deep-sea-treasure-v0", categorical_action_encoding=True).action_spec.shape == ()
    assert sorted(env.done_keys) == ["done", "terminated", "truncated"]
    assert "deep-sea-treasure-v0" in MOGymEnv.available_envs and MOGymEnv.lib is mo_gymnasium


def test_the_wrapper_takes_a_wrapped_env_and_a_vector_env():
    env = MOGymWrapper(mo_gymnasium.make("fruit-tree-v0"))
    assert env.reward_spec.shape == (6,)
    vector = mo_gymnasium.wrappers.vector.MOSyncVectorEnv([lambda: mo_gymnasium.make("deep-sea-treasure-v0")] * 2)
    env = MOGymWrapper(vector)
    assert env.batch_size == (2,) and env.reward_spec.shape == (2, 2)
    check_env_specs(env, seed=0)


# ---------------------------------------------------------------- data
def test_rewards_are_the_simulators_vectors():
    actions = one_hot_actions(60, 4, seed=1)
    env = MOGymEnv("deep-sea-treasure-v0")
    env.set_seed(3)
    data = env.rollout(60, break_when_any_done=False, policy=_replay(actions))
    simulator = mo_gymnasium.make("deep-sea-treasure-v0")
    obs, _ = simulator.reset(seed=3)
    for t in range(60):
        obs, reward, terminated, truncated, _ = simulator.step(int(actions[t].argmax()))
        np.testing.assert_array_equal(data["next", "reward"][t].numpy(), reward)
        np.testing.assert_array_equal(data["next", "observation"][t].numpy(), obs)
        assert bool(data["next", "terminated"][t]) == terminated and bool(data["next", "truncated"][t]) == truncated
        if terminated or truncated:
            obs, _ = simulator.reset()
    assert data["next", "done"].any()  # episodes ended and were reset inside the rollout


def _replay(actions: torch.Tensor):
    steps = iter(actions)

    def policy(data):
        return data.set("action", next(steps))

    return policy


def test_the_array_shortcut_is_opted_out_and_rollouts_equal_the_step_loop():
    env = MOGymEnv("mo-mountaincar-v0")
    assert env._array_simulator() is None and "arrays" not in env.kernel
    env.set_seed(0)
    fast = env.rollout(250, break_when_any_done=False)  # mountain car ends (truncates) at 200 steps
    env.set_seed(0)
    slow = step_by_step(env, fast["action"])
    assert_same(fast["next"], slow)
    assert fast["next", "truncated"].any()


def test_vector_env_is_one_batch_with_partial_resets():
    env = MOGymEnv("deep-sea-treasure-v0", num_envs=3)
    assert env.batch_size == (3,) and env.reward_spec.shape == (3, 2)
    assert isinstance(env._env, mo_gymnasium.wrappers.vector.MOSyncVectorEnv)
    check_env_specs(env, seed=0)
    env.set_seed(1)
    data = env.rollout(60, break_when_any_done=False)
    assert data["next", "reward"].shape == (3, 60, 2)
    assert data["next", "done"].sum() > 3  # several episodes per sub-env, each reset on its own
    env.set_seed(1)
    assert_same(step_by_step(env, data["action"]), data["next"])


def test_seeding_reproduces():
    def run(seed):
        env = MOGymEnv("mo-lunar-lander-v3")
        env.set_seed(seed)
        return env.rollout(40, break_when_any_done=False)

    assert_same(run(5), run(5))
    assert not torch.equal(run(5)["next", "observation"], run(6)["next", "observation"])


def test_frame_skip_sums_the_vectors():
    actions = one_hot_actions(1, 3)
    single, skipping = MOGymEnv("mo-mountaincar-v0"), MOGymEnv("mo-mountaincar-v0", frame_skip=3)
    single.set_seed(0)
    skipping.set_seed(0)
    skipped = skipping.rollout(1, policy=_replay(actions))
    three = single.rollout(3, policy=_replay(actions.expand(3, 3)))
    torch.testing.assert_close(skipped["next", "reward"][0], three["next", "reward"].sum(0))


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_serial_and_parallel_batches(batched):
    env = batched(2, lambda: MOGymEnv("deep-sea-treasure-v0"))
    try:
        assert env.reward_spec.shape == (2, 2)
        env.set_seed(0)
        data = env.rollout(40, break_when_any_done=False)
        assert data["next", "reward"].shape == (2, 40, 2) and data["next", "done"].any()
        env.set_seed(0)
        again = env.rollout(40, break_when_any_done=False)
        assert_same(data, again)
        reference = SerialEnv(2, lambda: MOGymEnv("deep-sea-treasure-v0"))
        reference.set_seed(0)
        assert_same(reference.rollout(40, break_when_any_done=False), data)
        reference.close()
    finally:
        env.close()


# ---------------------------------------------------------------- errors
def test_a_single_objective_env_is_refused():
    with pytest.raises(ValueError, match="declares no reward_space.*GymWrapper"):
        MOGymWrapper(gymnasium.make("CartPole-v1"))


def test_an_unknown_id_is_named():
    with pytest.raises(ValueError, match=r"env_name 'deep-sea-nothing-v0' is not a registered id.*deep-sea-treasure"):
        MOGymEnv("deep-sea-nothing-v0")


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "os:Nothing-v0", "deep-sea-treasure-v0/.."])
def test_a_name_that_is_no_registered_id_never_reaches_gymnasium(name, monkeypatch):
    def make(*args, **kwargs):
        raise AssertionError("gymnasium was asked to make it")

    monkeypatch.setattr(mo_gymnasium, "make", make)
    with pytest.raises(ValueError, match=rf"env_name {re.escape(repr(name))} is not a registered id"):
        MOGymEnv(name)


@pytest.mark.filterwarnings("ignore:.*latest versioned environment")
def test_an_unversioned_id_still_takes_the_latest_version():
    assert MOGymEnv("deep-sea-treasure").reward_spec.shape == (2,)


def test_a_huge_name_is_quoted_briefly():
    with pytest.raises(ValueError, match=r"is not a registered id") as info:
        MOGymEnv("x" * 10_000)
    assert str(info.value).count("x") < 400 and "(10000 characters)" in str(info.value)


@pytest.mark.parametrize(
    ("name", "value", "error"),
    [("env_name", 123, TypeError), ("num_envs", -1, ValueError), ("num_envs", 2.5, TypeError)],
)
def test_bad_arguments_are_named(name, value, error):
    kwargs = {"env_name": "deep-sea-treasure-v0", "num_envs": None, name: value}
    with pytest.raises(error, match=rf"{name} must be .*got {type(value).__name__} {value}"):
        MOGymEnv(kwargs.pop("env_name"), **kwargs)


def test_importing_the_module_does_not_import_mo_gymnasium():
    code = "import sys, cadence.envs.libs.mo_gym; assert 'mo_gymnasium' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)

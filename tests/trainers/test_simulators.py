"""Tests for cadence/trainers/simulators.py: saving and restoring where simulators stand."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from cadence.envs import GymEnv, SerialEnv, StepCounter, TransformedEnv
from cadence.trainers.simulators import load_simulator_state, simulator_state


def replay(env: GymEnv, actions: list[np.ndarray]) -> list[tuple]:
    """Steps the gymnasium env under ``env`` directly, resetting at episode ends."""
    out = []
    for action in actions:
        obs, reward, terminated, truncated, _ = env._env.step(action)
        out.append((obs.tolist(), float(reward), terminated, truncated))
        if terminated or truncated:
            out.append(("reset", env._env.reset()[0].tolist()))
    return out


@pytest.mark.parametrize("name", ["Pendulum-v1", "HalfCheetah-v5", "Hopper-v5"])
def test_a_restored_simulator_steps_as_the_original(name: str) -> None:
    if "v5" in name:
        pytest.importorskip("mujoco", reason="MuJoCo envs need gymnasium[mujoco]")
    original = GymEnv(name)
    original.set_seed(0)
    original.rollout(37)
    state = simulator_state(original)
    twin = GymEnv(name)
    twin.set_seed(123)  # a pending seed: dropped by the restore
    load_simulator_state(twin, state)
    rng = np.random.default_rng(0)
    space = original._env.action_space
    actions = [rng.uniform(space.low, space.high).astype(space.dtype) for _ in range(1100)]
    expected, got = replay(original, actions), replay(twin, actions)
    assert any(step[0] == "reset" for step in expected)  # the comparison crosses episode ends
    assert got == expected


def test_batched_and_transformed_envs() -> None:
    env = TransformedEnv(SerialEnv(2, lambda: GymEnv("Pendulum-v1")), StepCounter(50))
    env.set_seed(0)
    env.rollout(10)
    state = simulator_state(env)
    assert len(state) == 2
    twin = TransformedEnv(SerialEnv(2, lambda: GymEnv("Pendulum-v1")), StepCounter(50))
    load_simulator_state(twin, state)
    for a, b in zip(env.base_env._envs, twin.base_env._envs):
        assert np.array_equal(a._env.unwrapped.state, b._env.unwrapped.state)


def test_envs_rebuilt_when_unpickled_cannot_be_saved() -> None:
    class Rebuilt(gymnasium.Env, gymnasium.utils.EzPickle):
        observation_space = gymnasium.spaces.Box(-1, 1, (1,))
        action_space = gymnasium.spaces.Box(-1, 1, (1,))

        def __init__(self) -> None:
            gymnasium.utils.EzPickle.__init__(self)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(1, np.float32), {}

        def step(self, action):
            return np.zeros(1, np.float32), 0.0, False, False, {}

    from cadence.envs.libs.gym import GymWrapper

    assert simulator_state(GymWrapper(Rebuilt())) is None


def test_mismatched_envs_and_unknown_envs() -> None:
    state = simulator_state(GymEnv("Pendulum-v1"))
    with pytest.raises(ValueError, match="the state holds 1 simulators, the env 2"):
        load_simulator_state(SerialEnv(2, lambda: GymEnv("Pendulum-v1")), state)
    from cadence.envs.custom import PendulumEnv

    with pytest.raises(TypeError, match="cannot look into a PendulumEnv"):
        simulator_state(PendulumEnv())


def test_dm_control_simulators() -> None:
    pytest.importorskip("dm_control", reason="needs the dm_control extra")
    from cadence.envs.libs.dm_control import DMControlEnv

    original = DMControlEnv("cartpole", "swingup")
    original.set_seed(0)
    original.rollout(20)
    state = simulator_state(original)
    twin = DMControlEnv("cartpole", "swingup")
    load_simulator_state(twin, state)
    action = torch.full((1,), 0.3, dtype=torch.float64)
    for _ in range(5):
        obs_a = original._env.step(action.numpy()).observation["position"]
        obs_b = twin._env.step(action.numpy()).observation["position"]
        assert np.array_equal(obs_a, obs_b)

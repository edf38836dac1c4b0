"""Gym-like backends on the array protocol (``GymLikeSimulator``) against the generic
loop, entry for entry (dm_control, a gymnasium env with dict observations): random
rollouts, serial batches and the collector's array runner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from cadence.envs import Compose, EnvBase, GymWrapper
from tests.fakes import assert_same_rollout


class ReachEnv(gymnasium.Env):
    """Dict observations (a position and a goal), continuous actions, terminates at the goal
    and is truncated after 25 steps."""

    observation_space = spaces.Dict(
        position=spaces.Box(-10.0, 10.0, (2,), dtype=np.float32), goal=spaces.Box(-10.0, 10.0, (2,), dtype=np.float32)
    )
    action_space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.t = 0
        return self._obs(), {}

    def _obs(self) -> dict[str, np.ndarray]:
        return {"position": self.position.copy(), "goal": self.goal.copy()}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        self.position = np.clip(self.position + 0.5 * np.asarray(action, np.float32), -10, 10).astype(np.float32)
        self.t += 1
        distance = float(np.linalg.norm(self.position - self.goal))
        return self._obs(), -distance, distance < 0.3, self.t >= 25, {}


def _dm_control() -> EnvBase:
    pytest.importorskip("dm_control", reason="dm_control is not installed (the dm_control extra)")
    from cadence.envs import DMControlEnv

    return DMControlEnv("cheetah", "run")


ENVS: dict[str, tuple[Callable[[], EnvBase], int]] = {  # the env and a rollout length crossing a reset
    "dict-observations": (lambda: GymWrapper(ReachEnv()), 120),
    "dm_control": (_dm_control, 1100),
}
ROLLOUTS = {
    "any-done": {},
    "no-break": {"break_when_any_done": False},
    "truncated": {"break_when_any_done": False, "set_truncated": True},
}


@pytest.mark.parametrize("name", ENVS)
@pytest.mark.parametrize("rollout", ROLLOUTS)
def test_random_rollout_in_arrays_equals_the_generic_loop(name: str, rollout: str) -> None:
    make, steps = ENVS[name]
    fast_env, slow_env = make(), make()
    assert type(fast_env._array_simulator()).__name__ == "GymLikeSimulator"
    fast_env.set_seed(5)
    slow_env.set_seed(5)
    fast = fast_env.rollout(steps, **ROLLOUTS[rollout])
    slow = slow_env.rollout(steps, callback=lambda env, data: None, **ROLLOUTS[rollout])  # a callback keeps the loop
    assert_same_rollout(fast, slow)
    if rollout != "any-done":
        assert fast["next", "done"].sum() >= 1  # a reset happened inside the rollout
    assert fast.names == ["time"]


def test_what_keeps_the_generic_loop() -> None:
    env = GymWrapper(ReachEnv())
    env.run_type_checks = True
    assert env._array_simulator() is None

    class Readers(GymWrapper):
        def read_reward(self, reward: Any) -> torch.Tensor:
            return super().read_reward(reward) * 2

    assert Readers(ReachEnv())._array_simulator() is None


# ---------------------------------------------------------------- every path that steps the arrays
def _policy(key: str, size: int, actions: int, dtype: torch.dtype) -> Any:
    from tensordict.nn import TensorDictModule

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(size, actions), torch.nn.Tanh()).to(dtype)
    return TensorDictModule(net, [key], ["action"])


POLICIES = {  # (observation entry read, its size, action size, its dtype) per env
    "dict-observations": ("position", 2, 2, torch.float32),
    "dm_control": ("position", 8, 6, torch.float64),
}


@pytest.mark.parametrize("name", ENVS)
@pytest.mark.parametrize("with_policy", [False, True], ids=["random", "policy"])
def test_the_collector_steps_gym_like_envs_in_arrays(name: str, with_policy: bool) -> None:
    from cadence.collectors import SyncDataCollector

    make, steps = ENVS[name]
    batches = {}
    for fast_path in (True, False):
        env = make()
        env.set_seed(2)
        policy = _policy(*POLICIES[name]) if with_policy else None
        collector = SyncDataCollector(env, policy, frames_per_batch=steps // 2, total_frames=steps, fast_path=fast_path)
        assert collector.uses_fast_path == fast_path
        batches[fast_path] = torch.cat(list(collector), -1)
        collector.shutdown()
    assert_same_rollout(batches[True], batches[False])
    assert batches[True]["next", "done"].any()  # through resets


def test_a_serial_batch_of_gym_like_envs_rolls_out_in_arrays() -> None:
    from cadence.envs import SerialEnv

    fast_env, slow_env = (SerialEnv(2, lambda: GymWrapper(ReachEnv())) for _ in range(2))
    assert type(fast_env._array_simulator()).__name__ == "SerialSimulators"
    fast_env.set_seed(4)
    slow_env.set_seed(4)
    fast = fast_env.rollout(60, break_when_any_done=False)
    slow = slow_env.rollout(60, break_when_any_done=False, callback=lambda env, data: None)
    assert_same_rollout(fast, slow)
    assert fast["next", "done"].any()


def test_a_parallel_batch_of_gym_like_envs_rolls_out_in_chunks_as_a_serial_one() -> None:
    from cadence.envs import ParallelEnv, SerialEnv

    parallel = ParallelEnv(2, lambda: GymWrapper(ReachEnv()))
    serial = SerialEnv(2, lambda: GymWrapper(ReachEnv()))
    try:
        parallel.set_seed(6)
        serial.set_seed(6)
        parallel.start()
        assert parallel._fast_workers  # each worker has an array simulator
        assert_same_rollout(parallel.rollout(40, break_when_any_done=False), serial.rollout(40, break_when_any_done=False))
        data = parallel.rand_step(parallel.reset())  # a step into the shared arrays
        assert data["next", "position"].shape == (2, 2)
    finally:
        parallel.close()


def test_the_manual_loop_steps_dict_observations_through_the_simulator() -> None:
    from cadence.envs import RewardSum, StepCounter, TransformedEnv
    from cadence.envs.simulator_values_step import SimulatorValuesStep
    from tests.envs.test_values_loop import _compare_manual_loops

    def make() -> EnvBase:
        return TransformedEnv(GymWrapper(ReachEnv()), Compose(StepCounter(10), RewardSum()))

    assert isinstance(make()._values_stepper(), SimulatorValuesStep)
    assert _compare_manual_loops(make, 80) >= 2  # entry for entry against the generic loop, through resets

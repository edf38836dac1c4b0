"""The random-action rollout of gym-like backends in preallocated arrays, against the
generic loop, entry for entry (dm_control, a gymnasium env with dict observations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium import spaces

from cadence.envs import EnvBase, GymWrapper
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
    assert fast_env._array_rollout_applies()
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
    assert not env._array_rollout_applies()

    class Readers(GymWrapper):
        def read_reward(self, reward: Any) -> torch.Tensor:
            return super().read_reward(reward) * 2

    assert not Readers(ReachEnv())._array_rollout_applies()

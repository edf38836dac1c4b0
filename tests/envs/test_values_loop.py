"""The step loop on plain tensors (``ValuesLoop``): ``rollout`` with random actions on it
gives the generic loop's data, entry for entry, for every backend that steps on values."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from cadence.envs import (
    CatTensors,
    Compose,
    DoubleToFloat,
    EnvBase,
    GymEnv,
    ObservationNorm,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from cadence.envs.custom import PendulumEnv
from cadence.envs.values_loop import ValuesLoop, values_loop_applies
from tests.fakes import GenericPathGymEnv, assert_same_rollout


def _chain_without_over_time() -> EnvBase:
    # CatTensors deleting its inputs keeps the per-step loop (no over-time shortcut)
    return TransformedEnv(GymEnv("Pendulum-v1"), Compose(
        DoubleToFloat(), ObservationNorm(loc=torch.zeros(3), scale=torch.full((3,), 2.0)), StepCounter(9), RewardSum(),
        CatTensors(in_keys=["observation", "step_count"], out_key="vector", unsqueeze_if_oor=True)))


ENVS: dict[str, Callable[[], EnvBase]] = {
    # off gymnasium's own rollout shortcut (a reader overridden), onto this loop
    "cartpole": lambda: GenericPathGymEnv("CartPole-v1"),  # terminations
    "pendulum-vector": lambda: GenericPathGymEnv("Pendulum-v1", num_envs=3),
    "chain": _chain_without_over_time,
    "chain-vector": lambda: TransformedEnv(GymEnv("CartPole-v1", num_envs=2), Compose(
        StepCounter(6), RewardSum(),
        CatTensors(in_keys=["observation", "step_count"], out_key="vector", unsqueeze_if_oor=True))),
}
ROLLOUTS = {
    "any-done": {},
    "no-break": {"break_when_any_done": False},
    "all-done": {"break_when_any_done": False, "break_when_all_done": True},
    "truncated": {"break_when_any_done": False, "set_truncated": True},
}


@pytest.mark.parametrize("name", ENVS)
@pytest.mark.parametrize("rollout", ROLLOUTS)
def test_random_rollout_equals_the_generic_loop(name: str, rollout: str) -> None:
    fast_env, slow_env = ENVS[name](), ENVS[name]()
    assert values_loop_applies(fast_env)
    taken = []
    original = type(fast_env)._values_rollout
    fast_env._values_rollout = lambda *args: taken.append(True) or original(fast_env, *args)
    fast_env.set_seed(3)
    slow_env.set_seed(3)
    steps = 150  # more than a Recording's chunk (64), not a multiple of it
    fast = fast_env.rollout(steps, **ROLLOUTS[rollout])
    slow = slow_env.rollout(steps, callback=lambda env, data: None, **ROLLOUTS[rollout])  # a callback keeps the loop
    assert taken, "the rollout did not take the values loop"
    assert_same_rollout(fast, slow)
    # both envs stand at the same place and their generators agree afterwards
    assert torch.equal(fast_env.rand_action()["action"], slow_env.rand_action()["action"])


def test_what_keeps_the_generic_loop() -> None:
    assert not values_loop_applies(PendulumEnv())  # an env written in torch: no step on values (yet)
    env = GymEnv("Pendulum-v1")
    env.run_type_checks = True
    assert not values_loop_applies(env)


def test_one_step_moves_entries_as_step_mdp() -> None:
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(3))
    env.set_seed(0)
    loop = ValuesLoop(env)
    root = loop.entries(env.reset())
    step = loop.step(root, None)
    assert "action" in step.entries and "action" not in step.next_root and "reward" not in step.next_root
    assert step.next_root["step_count"].tolist() == [1] and step.next_root["observation"] is step.next_entries["observation"]
    assert root.keys() == loop.entries(env.reset()).keys()  # the input entries are not changed

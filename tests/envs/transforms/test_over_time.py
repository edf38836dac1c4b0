"""Transformed envs stepped in stretches (the transforms over each at once) give the step-by-step loop's data."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.envs import GymEnv, ParallelEnv, SerialEnv
from cadence.envs.custom import PendulumEnv
from cadence.envs.transforms import (
    BinarizeReward,
    CatTensors,
    ClipTransform,
    Compose,
    DoubleToFloat,
    InitTracker,
    ObservationNorm,
    RewardClipping,
    RewardScaling,
    RewardSum,
    SignTransform,
    StepCounter,
    TimeMaxPool,
    TransformedEnv,
)
from cadence.envs.values_loop import ValuesLoop
from tests.fakes import CountingEnv, assert_same_rollout


def _step_by_step(env, max_steps, **kwargs):
    """The generic loop: a callback keeps any rollout off its shortcut."""
    return env.rollout(max_steps, callback=lambda env, data: None, **kwargs)


def _chain(max_steps: int = 30, observation_key: str = "observation", observation_shape: tuple = (3,)) -> Compose:
    return Compose(
        StepCounter(max_steps), RewardSum(), InitTracker(), DoubleToFloat(),
        ObservationNorm(
            loc=torch.full(observation_shape, 0.5), scale=torch.full(observation_shape, 2.0), in_keys=[observation_key]
        ),
        RewardScaling(loc=1.0, scale=0.5),
    )


BASES = {  # the base env, its observation's key and shape
    "gym": (lambda: GymEnv("Pendulum-v1"), "observation", (3,)),
    "gym-vector": (lambda: GymEnv("Pendulum-v1", num_envs=3), "observation", (3,)),
    "serial-gym": (lambda: SerialEnv(2, lambda: GymEnv("Pendulum-v1")), "observation", (3,)),
    "generic-steps": (lambda: CountingEnv(max_count=7, batch_size=(2,)), "count", (1,)),
}
ROLLOUTS = {
    "any-done": {},
    "no-break": {"break_when_any_done": False},
    "all-done": {"break_when_any_done": False, "break_when_all_done": True},
    "truncated": {"break_when_any_done": False, "set_truncated": True},
}


@pytest.mark.parametrize("base", BASES)
@pytest.mark.parametrize("rollout", ROLLOUTS)
def test_same_data_as_step_by_step(base: str, rollout: str) -> None:
    make_base, observation_key, observation_shape = BASES[base]
    fast_env, slow_env = (
        TransformedEnv(make_base(), _chain(30, observation_key, observation_shape)) for _ in range(2)
    )
    assert ValuesLoop(fast_env).takes_stretches == (base != "generic-steps")  # a torch env steps one by one
    fast_env.set_seed(7)
    slow_env.set_seed(7)
    fast = fast_env.rollout(75, **ROLLOUTS[rollout])
    slow = _step_by_step(slow_env, 75, **ROLLOUTS[rollout])
    assert_same_rollout(fast, slow)
    # both envs stand at the same place: the next rollouts (no reset) match as well
    next_input = fast[..., -1].get("next").exclude("reward")
    if rollout == "no-break":
        assert_same_rollout(
            fast_env.rollout(10, auto_reset=False, tensordict=next_input.clone(), break_when_any_done=False),
            _step_by_step(slow_env, 10, auto_reset=False, tensordict=next_input.clone(), break_when_any_done=False),
        )


@pytest.mark.parametrize(
    "transform",
    [
        lambda: RewardClipping(-0.5, 0.5),
        lambda: BinarizeReward(),
        lambda: SignTransform(in_keys=["observation"]),
        lambda: CatTensors(in_keys=["observation", "step_count"], out_key="vector", unsqueeze_if_oor=True,
                           del_keys=False),
        lambda: CatTensors(in_keys=["observation"], out_key="vector", del_keys=False),
    ],
)
def test_elementwise_transforms_take_the_shortcut(transform) -> None:
    fast_env, slow_env = (TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(20), transform())) for _ in range(2))
    assert ValuesLoop(fast_env).takes_stretches
    fast_env.set_seed(2)
    slow_env.set_seed(2)
    assert_same_rollout(
        fast_env.rollout(45, break_when_any_done=False), _step_by_step(slow_env, 45, break_when_any_done=False)
    )


def test_episodes_restart_at_the_step_limit_and_at_the_base_done() -> None:
    env = TransformedEnv(CountingEnv(max_count=4), Compose(StepCounter(3), RewardSum(), InitTracker()))
    data = env.rollout(9, break_when_any_done=False)
    assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1, 2, 3]
    assert data["step_count"].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    assert data["next", "episode_reward"].squeeze(-1).tolist() == [1, 2, 3] * 3
    assert data["is_init"].squeeze(-1).tolist() == [True, False, False] * 3
    assert data["next", "truncated"].squeeze(-1).tolist() == [False, False, True] * 3
    # the base env's own end (count 2) comes before the limit of 3
    env = TransformedEnv(CountingEnv(max_count=2), Compose(StepCounter(3), RewardSum()))
    data = env.rollout(5, break_when_any_done=False)
    assert data["next", "count"].squeeze(-1).tolist() == [1, 2, 1, 2, 1]
    assert data["next", "truncated"].squeeze(-1).tolist() == [False] * 5


def test_partial_resets_of_a_batch_keep_the_other_counts() -> None:
    # CartPole episodes end at different steps in each sub-env: the limit of the stretch
    # is the smallest count left, and each sub-env restarts on its own
    make = lambda: TransformedEnv(GymEnv("CartPole-v1", num_envs=3), Compose(StepCounter(40), RewardSum()))  # noqa: E731
    fast_env, slow_env = make(), make()
    fast_env.set_seed(1)
    slow_env.set_seed(1)
    fast = fast_env.rollout(60, break_when_any_done=False)
    assert_same_rollout(fast, _step_by_step(slow_env, 60, break_when_any_done=False))
    assert fast["next", "step_count"].max() <= 40
    assert not torch.equal(fast["step_count"][0], fast["step_count"][1])


def test_a_rollout_from_a_given_input() -> None:
    env = TransformedEnv(GymEnv("Pendulum-v1"), _chain(max_steps=5))
    env.set_seed(0)
    start = env.reset()
    start["step_count"], start["is_init"] = torch.tensor([3]), torch.tensor([False])
    data = env.rollout(4, auto_reset=False, tensordict=start, break_when_any_done=False)
    assert data["next", "step_count"].squeeze(-1).tolist() == [4, 5, 1, 2]
    assert data["is_init"].squeeze(-1).tolist() == [False, False, True, False]


def test_a_transform_of_the_action_steps_one_by_one() -> None:
    make = lambda: TransformedEnv(  # noqa: E731
        GymEnv("Pendulum-v1"), Compose(StepCounter(20), ClipTransform(in_keys=["observation"], in_keys_inv=["action"],
                                                                      low=-0.5, high=0.5)))
    fast_env, slow_env = make(), make()
    assert not ValuesLoop(fast_env).takes_stretches
    fast_env.set_seed(2)
    slow_env.set_seed(2)
    assert_same_rollout(
        fast_env.rollout(45, break_when_any_done=False), _step_by_step(slow_env, 45, break_when_any_done=False)
    )


def test_transforms_that_need_each_step_keep_the_loop() -> None:
    env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(5), TimeMaxPool(in_keys=["observation"], T=2)))
    assert not ValuesLoop(env).takes_stretches
    data = env.rollout(7, break_when_any_done=False)
    assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 4, 5, 1, 2]
    assert data["next", "observation"].shape == (7, 3)


def test_a_stateless_base_keeps_the_loop() -> None:
    # the base reads its state from each step's input, which the transforms may change
    env = TransformedEnv(PendulumEnv(), _chain(5, "th", ()))
    assert not ValuesLoop(env).takes_stretches
    assert env.rollout(7, break_when_any_done=False)["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 4, 5, 1, 2]


def test_a_parallel_base_steps_on_the_generic_path() -> None:
    make = lambda: TransformedEnv(ParallelEnv(2, lambda: GymEnv("Pendulum-v1")), _chain(max_steps=6))  # noqa: E731
    fast_env, slow_env = make(), make()
    try:
        fast_env.set_seed(3)
        slow_env.set_seed(3)
        assert_same_rollout(
            fast_env.rollout(14, break_when_any_done=False),
            _step_by_step(slow_env, 14, break_when_any_done=False),
        )
    finally:
        fast_env.close()
        slow_env.close()


def test_the_running_sum_adds_in_the_reward_dtype() -> None:
    # float32 sums, added one after the other, as the step-by-step transform adds them
    rewards = torch.randn(1, 300, 1, generator=torch.Generator().manual_seed(0)) * 7
    first = TensorDict({"episode_reward": torch.full((1, 1), 3.3)}, [1])
    steps = RewardSum()._step_over_time(first, TensorDict({"reward": rewards}, [1, 300]))
    expected, total = [], first["episode_reward"]
    for reward in rewards.unbind(1):
        total = total + reward
        expected.append(total)
    assert torch.equal(steps["episode_reward"], torch.stack(expected, 1))

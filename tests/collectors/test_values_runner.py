"""The collector's runner for envs that step on plain tensors, against the generic runner.

``SyncDataCollector`` on a ``TransformedEnv`` whose transforms all ``steps_on_values``
runs ``ValuesRunner``; with ``use_values_path=False`` the same env runs the generic
``EnvRunner``. Their batches must agree entry for entry.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential

from cadence.collectors import SyncDataCollector
from cadence.collectors._runners import EnvRunner
from cadence.collectors._values_runner import ValuesRunner
from cadence.envs.values_loop import values_loop_applies
from cadence.envs import (
    CatTensors,
    Compose,
    DoubleToFloat,
    GymEnv,
    InitTracker,
    ObservationNorm,
    RewardSum,
    StepCounter,
    Transform,
    TransformedEnv,
)
from tests.fakes import assert_same_rollout


def _chain() -> Transform:
    return Compose(
        DoubleToFloat(), ObservationNorm(loc=torch.tensor([0.1, 0.0, -0.1]), scale=torch.tensor([1.0, 2.0, 3.0])),
        StepCounter(7), RewardSum(), InitTracker(),
        CatTensors(in_keys=["observation"], out_key="observation_vector", del_keys=False),
    )


def _env(on_values: bool, num_envs: int | None = None, chain: Callable[[], Transform] = _chain) -> TransformedEnv:
    base = GymEnv("Pendulum-v1") if num_envs is None else GymEnv("Pendulum-v1", num_envs=num_envs)
    env = TransformedEnv(base, chain())
    env.use_values_path = on_values
    env.set_seed(0)
    return env


def _policy() -> TensorDictModule:
    torch.manual_seed(0)
    return TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)),
                            ["observation_vector"], ["action"])


def _batches(on_values: bool, policy: object, num_envs: int | None = None, **kwargs: object) -> list:
    frames = 150 if num_envs is None else 21  # 150 steps: more than a Recording's chunk; 7 steps of 3 envs
    collector = SyncDataCollector(_env(on_values, num_envs), policy, frames_per_batch=frames, total_frames=4 * frames,
                                  **kwargs)
    runner = collector._runner
    batches = [batch.clone() for batch in collector]
    collector.shutdown()
    return [runner, *batches]


@pytest.mark.parametrize("num_envs", [None, 3])
@pytest.mark.parametrize("with_policy", [True, False])
def test_batches_equal_the_generic_runners(num_envs: int | None, with_policy: bool) -> None:
    policy = _policy() if with_policy else None
    fast_runner, *fast = _batches(True, policy, num_envs)
    slow_runner, *slow = _batches(False, policy, num_envs)
    assert isinstance(fast_runner, ValuesRunner) and isinstance(slow_runner, EnvRunner)
    assert len(fast) == len(slow) == 4
    for fast_batch, slow_batch in zip(fast, slow):
        assert_same_rollout(fast_batch, slow_batch)
    # the StepCounter's limit (7) truncated and reset inside the batches
    assert fast[0]["next", "truncated"].any()


def test_random_frames_then_the_policy() -> None:
    fast_runner, *fast = _batches(True, _policy(), init_random_frames=40)
    _, *slow = _batches(False, _policy(), init_random_frames=40)
    assert isinstance(fast_runner, ValuesRunner)
    for fast_batch, slow_batch in zip(fast, slow):
        assert_same_rollout(fast_batch, slow_batch)


def test_what_the_policy_writes_beside_the_action_travels_to_the_next_step() -> None:
    torch.manual_seed(1)
    features = TensorDictModule(torch.nn.Linear(3, 4), ["observation_vector"], ["hidden"])
    head = TensorDictModule(torch.nn.Linear(4, 1), ["hidden"], ["action"])
    policy = TensorDictSequential(features, head)
    fast_runner, *fast = _batches(True, policy)
    _, *slow = _batches(False, policy)
    assert isinstance(fast_runner, ValuesRunner)
    for fast_batch, slow_batch in zip(fast, slow):
        assert_same_rollout(fast_batch, slow_batch)
    assert "hidden" in fast[0].keys()


def test_a_checkpoint_continues_where_the_runner_stood() -> None:
    policy, env = _policy(), _env(True)
    collector = SyncDataCollector(env, policy, frames_per_batch=10, total_frames=-1)
    first = collector.next()
    state = collector.state_dict()
    shuttle = state["shuttle"]
    assert isinstance(collector._runner, ValuesRunner) and shuttle["step_count"].item() == 10 % 7
    resumed = SyncDataCollector(env, policy, frames_per_batch=10, total_frames=-1)  # the env stands there still
    resumed.load_state_dict(state, continue_episodes=True)
    batch = resumed.next()
    # the episode goes on: its count, its reward sum, its observation and its trajectory id
    assert batch["step_count"][0].item() == shuttle["step_count"].item()
    assert torch.equal(batch["episode_reward"][0], shuttle["episode_reward"])
    assert torch.equal(batch["observation"][0], first["next", "observation"][-1])
    assert batch["collector", "traj_ids"][0].item() == first["collector", "traj_ids"][-1].item()


def test_what_keeps_the_generic_runner() -> None:
    class Halve(Transform):  # a transform that does not say steps_on_values
        def _step(self, tensordict, next_tensordict):  # type: ignore[no-untyped-def]
            return next_tensordict.set("reward", next_tensordict.get("reward") / 2)

    env = _env(True, chain=lambda: Compose(StepCounter(5), Halve()))
    assert not values_loop_applies(env)
    assert isinstance(SyncDataCollector(env, None, frames_per_batch=5, total_frames=5)._runner, EnvRunner)

    def by_hand(td):  # type: ignore[no-untyped-def]  # a plain function: called on one tensordict per step
        return td.set("action", torch.zeros(1))

    assert SyncDataCollector(_env(True), by_hand, frames_per_batch=5, total_frames=5).uses_fast_path
    # a policy wrapped by torch.compile runs as the user compiled it, on tensordicts
    wrapped = SyncDataCollector(_env(True), _policy(), frames_per_batch=5, total_frames=5, compile_policy=True)
    assert isinstance(wrapped._runner, EnvRunner) and not wrapped.uses_fast_path
    assert SyncDataCollector(_env(True), _policy(), frames_per_batch=5, total_frames=5).uses_fast_path


def _probabilistic_actor() -> object:
    from torch import nn

    from cadence.data import Bounded
    from cadence.modules import NormalParamExtractor, ProbabilisticActor, TanhNormal

    torch.manual_seed(2)
    net = TensorDictModule(nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()), ["observation_vector"], ["loc", "scale"])
    return ProbabilisticActor(net, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                              spec=Bounded(-2.0, 2.0, shape=(1,)), return_log_prob=True)


class Jitter(TensorDictModuleBase):
    """A user's own exploration module: it reads the action and the step count, writes the action."""

    in_keys = ["action", "step_count"]
    out_keys = ["action"]

    def __init__(self) -> None:
        super().__init__()
        self.generator = torch.Generator().manual_seed(4)

    def forward(self, tensordict):  # type: ignore[no-untyped-def]
        noise = torch.randn(tensordict.get("action").shape, generator=self.generator) * 0.1
        return tensordict.set("action", tensordict.get("action") + noise * (tensordict.get("step_count") % 2))


@pytest.mark.parametrize("make_policy", [_probabilistic_actor, lambda: TensorDictSequential(_policy(), Jitter())])
def test_policies_that_do_not_compile_run_on_one_tensordict_a_step(make_policy: Callable[[], object]) -> None:
    fast_policy, slow_policy = make_policy(), make_policy()
    slow_policy.load_state_dict(fast_policy.state_dict())
    torch.manual_seed(7)  # the distribution samples from the global generator, as the generic runner's
    fast_runner, *fast = _batches(True, fast_policy)
    torch.manual_seed(7)
    slow_runner, *slow = _batches(False, slow_policy)
    assert isinstance(fast_runner, ValuesRunner) and isinstance(slow_runner, EnvRunner)
    for fast_batch, slow_batch in zip(fast, slow):
        assert_same_rollout(fast_batch, slow_batch)


def test_a_serial_batch_of_transformed_envs_collects_as_the_generic_runner() -> None:
    from cadence.envs import SerialEnv

    def make() -> SerialEnv:
        env = SerialEnv(2, lambda: TransformedEnv(GymEnv("CartPole-v1"), Compose(StepCounter(11), RewardSum())))
        env.set_seed(1)
        return env

    batches = []
    for fast_path in (True, False):
        collector = SyncDataCollector(make(), None, frames_per_batch=100, total_frames=300, fast_path=fast_path)
        runner = collector._runner
        batches.append((runner, [batch.clone() for batch in collector]))
        collector.shutdown()
    (fast_runner, fast), (slow_runner, slow) = batches
    assert isinstance(fast_runner, ValuesRunner) and isinstance(slow_runner, EnvRunner)
    for fast_batch, slow_batch in zip(fast, slow):
        assert_same_rollout(fast_batch, slow_batch)

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
    SerialEnv,
    StepCounter,
    TensorDictPrimer,
    TransformedEnv,
)
from tensordict import TensorDictBase
from cadence.data import OneHot, Unbounded
from cadence.envs.custom import PendulumEnv
from cadence.envs.values_loop import ValuesLoop, values_loop_applies
from tests.fakes import CountingEnv, GenericPathGymEnv, assert_same_rollout


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


def test_random_actions_are_drawn_at_the_start_where_the_env_draws_nothing_itself() -> None:
    class OwnGenerator(CountingEnv):
        draws_from_rng = False  # it counts: nothing drawn from env.rng between the actions

    assert ValuesLoop(CountingEnv()).draw_ahead(4) is None  # an env may draw from env.rng by default
    fast_env, slow_env = OwnGenerator(max_count=3), OwnGenerator(max_count=3)
    assert ValuesLoop(fast_env).draw_ahead(4).shape == (4, 1)
    fast_env.set_seed(1)
    slow_env.set_seed(1)
    fast = fast_env.rollout(10, break_when_any_done=False)
    slow = slow_env.rollout(10, break_when_any_done=False, callback=lambda env, data: None)
    assert_same_rollout(fast, slow)  # the same actions as drawn step by step
    masked = OwnGenerator()
    masked.action_spec = OneHot(3)
    masked.action_spec.update_mask(torch.tensor([True, False, True]))
    assert ValuesLoop(masked).draw_ahead(4) is None  # the mask may change from step to step


def test_what_keeps_the_generic_loop() -> None:
    class OwnStep(PendulumEnv):  # step()'s bookkeeping of its own: every step goes through it
        def step(self, tensordict: TensorDictBase) -> TensorDictBase:
            return super().step(tensordict)

    assert values_loop_applies(PendulumEnv()) and not values_loop_applies(OwnStep())
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


# ---------------------------------------------------------------- the manual loop: step_and_maybe_reset
def _manual_loop(env: EnvBase, steps: int, extra: bool = False) -> list[tuple[TensorDictBase, TensorDictBase]]:
    """The seed's manual loop with random actions; ``extra`` carries a policy entry along."""
    out = []
    data_ = env.reset()
    for t in range(steps):
        data_ = env.rand_action(data_)
        if extra:
            data_.set("hidden", torch.full((*env.batch_size, 2), float(t)))
        data, data_ = env.step_and_maybe_reset(data_)
        out.append((data, data_))
    return out


def _fast_steps(env: EnvBase) -> list[bool]:
    """Records, for each manual step, whether the values loop took it."""
    loop = env._manual_values_loop()
    assert loop is not None
    original, taken = loop.step_and_maybe_reset, []

    def counted(tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase] | None:
        result = original(tensordict)
        taken.append(result is not None)
        return result

    loop.step_and_maybe_reset = counted
    return taken


def _generic(env: EnvBase) -> EnvBase:
    env._manual_values_loop = lambda: None  # this instance keeps the generic step_and_maybe_reset
    return env


def _compare_manual_loops(make: Callable[[], EnvBase], steps: int, extra: bool = False) -> int:
    """Runs the manual loop on the values path and on the generic one, entry for entry;
    returns how many steps were done somewhere."""
    fast_env, slow_env = make(), _generic(make())
    taken = _fast_steps(fast_env)
    fast_env.set_seed(5)
    slow_env.set_seed(5)
    fast, slow = _manual_loop(fast_env, steps, extra), _manual_loop(slow_env, steps, extra)
    resets = 0
    for (data, data_), (data_slow, data_slow_) in zip(fast, slow):
        assert_same_rollout(data, data_slow)
        assert_same_rollout(data_, data_slow_)
        resets += int(data["next", "done"].any())
    assert taken == [True] * steps
    return resets


@pytest.mark.parametrize("name", ENVS)
@pytest.mark.parametrize("extra", [False, True], ids=["actions", "carried-entry"])
def test_manual_loop_equals_the_generic_one(name: str, extra: bool) -> None:
    # past Pendulum's time limit (200), through resets (terminations, step limits)
    assert _compare_manual_loops(ENVS[name], 205, extra) >= 1


def test_manual_loop_on_dm_control_equals_the_generic_one() -> None:
    pytest.importorskip("dm_control", reason="dm_control is an optional extra")
    from cadence.envs import DMControlEnv

    def make() -> EnvBase:
        return TransformedEnv(DMControlEnv("cartpole", "balance"), Compose(
            DoubleToFloat(), CatTensors(["position", "velocity"], "vector"), StepCounter(15)))

    assert _compare_manual_loops(make, 40) >= 2


def test_manual_loop_on_a_serial_batch_with_partial_resets() -> None:
    def make() -> EnvBase:
        return TransformedEnv(SerialEnv(3, lambda: GymEnv("CartPole-v1")), Compose(StepCounter(30), RewardSum()))

    fast_env, slow_env = make(), _generic(make())
    taken = _fast_steps(fast_env)
    fast_env.set_seed(1)
    slow_env.set_seed(1)
    partial = 0
    for (data, data_), (data_slow, data_slow_) in zip(_manual_loop(fast_env, 60), _manual_loop(slow_env, 60)):
        assert_same_rollout(data, data_slow)
        assert_same_rollout(data_, data_slow_)
        done = data["next", "done"]
        partial += int(bool(done.any()) and not bool(done.all()))
    assert partial >= 1 and taken == [True] * 60


def test_manual_loop_returns_the_input_with_next_and_a_fresh_next_input() -> None:
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(3))
    data_ = env.rand_action(env.reset())
    data, following = env.step_and_maybe_reset(data_)
    assert data is data_ and "next" in data.keys() and following is not data
    assert following["step_count"].tolist() == [1] and "action" not in following.keys()
    following.set("observation", torch.zeros(3))  # users keep and change what they got
    assert not torch.equal(data["next", "observation"], following["observation"])


def test_manual_loop_checks_and_casts_actions_as_step_does() -> None:
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(3))
    data_ = env.reset()
    data, _ = env.step_and_maybe_reset(data_.set("action", torch.zeros(1, dtype=torch.float64)))
    assert data["action"].dtype == torch.float32  # cast in place, as step() casts it
    with pytest.raises(ValueError, match="Action 'action': expected shape"):
        env.step_and_maybe_reset(env.reset().set("action", torch.zeros(2)))
    with pytest.raises(KeyError, match="needs the action 'action'"):
        env.step_and_maybe_reset(env.reset())


def test_manual_loop_inputs_it_leaves_to_the_generic_path() -> None:
    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(3))
    nested = env.rand_action(env.reset()).set(("extra", "x"), torch.zeros(1))
    data, following = env.step_and_maybe_reset(nested)  # a nested entry: the tensordict operations
    assert following["extra", "x"].tolist() == [0.0]
    env.run_type_checks = True
    assert env._manual_values_loop() is None

    class OwnStep(GymEnv):
        def step(self, tensordict: TensorDictBase) -> TensorDictBase:
            return super().step(tensordict)

    assert OwnStep("Pendulum-v1")._manual_values_loop() is None  # a subclass's own step() is called


def _recurrent(td: TensorDictBase) -> TensorDictBase:
    """A plain function as the policy, carrying a state to the next step under ``"next"``."""
    hidden = td.get("hidden")
    td.set("action", torch.tanh(td.get("observation")[..., :1] + hidden))
    return td.set(("next", "hidden"), hidden + 1)


def _primed_pendulum() -> TransformedEnv:
    return TransformedEnv(GymEnv("Pendulum-v1"), TensorDictPrimer(hidden=Unbounded(shape=(1,))))


def test_a_policy_that_writes_for_the_next_step_runs_on_the_loop_as_on_tensordicts() -> None:
    from cadence.collectors import SyncDataCollector

    rollouts, batches = [], []
    for callback in (None, lambda env, data: None):  # a callback keeps the TensorDict loop
        env = _primed_pendulum()
        env.set_seed(0)
        rollouts.append(env.rollout(250, _recurrent, callback=callback, break_when_any_done=False))
    assert_same_rollout(*rollouts)
    assert rollouts[0]["next", "hidden"][199].item() == 200 and rollouts[0]["hidden"][200].item() == 0  # reset
    for fast_path in (True, False):
        env = _primed_pendulum()
        env.set_seed(0)
        collector = SyncDataCollector(env, _recurrent, frames_per_batch=125, total_frames=250, fast_path=fast_path)
        assert collector.uses_fast_path is fast_path
        batches.append(torch.cat(list(collector), -1))
    assert_same_rollout(*batches)
    assert_same_rollout(batches[0].exclude("collector"), rollouts[0])

"""``rollout`` (cadence.envs.rollouts): shapes, time names, early stops, policies and
callbacks, continuing from an input, truncation marks, the generic loop by hand."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDictBase

from cadence.data import Categorical, Composite
from cadence.envs import GymEnv, PendulumEnv
from tests.fakes import CountingEnv


def test_rollout_shapes_names_and_break():
    env = CountingEnv(max_count=4)
    data = env.rollout(10)
    assert data.batch_size == torch.Size([4]) and data.names == ["time"]
    data = env.rollout(10, break_when_any_done=False)
    assert data.batch_size == torch.Size([10])
    assert data["next", "done"].squeeze(-1).tolist() == ([False] * 3 + [True]) * 2 + [False] * 2


def test_rollout_of_a_batched_env_puts_time_last():
    env = CountingEnv(batch_size=(2, 3), max_count=3)
    data = env.rollout(5, break_when_any_done=False)
    assert data.batch_size == torch.Size([2, 3, 5])
    assert data.names == [None, None, "time"]


def test_rollout_break_when_all_done():
    env = CountingEnv(batch_size=(2,), max_count=3)
    env.reset()
    data = env.rollout(10, break_when_any_done=False, break_when_all_done=True)
    assert data.batch_size == torch.Size([2, 3])


def test_rollout_with_policy_and_callback():
    env = CountingEnv(max_count=100)
    seen = []

    def policy(td: TensorDictBase) -> TensorDictBase:
        return td.set("action", torch.full((1,), 0.5))

    data = env.rollout(5, policy, callback=lambda e, td: seen.append(td["next", "count"].item()))
    assert (data["action"] == 0.5).all()
    assert seen == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_rollout_without_auto_reset_continues_from_the_given_input():
    env = CountingEnv(max_count=100)
    first = env.rollout(3)
    last = env._step_mdp(first[-1])
    data = env.rollout(2, auto_reset=False, tensordict=last)
    assert data["next", "count"].squeeze(-1).tolist() == [4.0, 5.0]
    with pytest.raises(ValueError, match="auto_reset=False"):
        env.rollout(2, auto_reset=False)


def test_rollout_set_truncated():
    env = CountingEnv(max_count=100)
    env.full_done_spec = Composite(
        done=Categorical(2, shape=(1,), dtype=torch.bool), terminated=Categorical(2, shape=(1,), dtype=torch.bool),
        truncated=Categorical(2, shape=(1,), dtype=torch.bool),
    )
    data = env.rollout(4, set_truncated=True)
    assert data["next", "truncated"].squeeze(-1).tolist() == [False, False, False, True]
    assert data["next", "done"][-1].all()
    with pytest.raises(RuntimeError, match="truncated"):
        CountingEnv().rollout(2, set_truncated=True)


def test_rollout_matches_a_hand_written_loop():
    env = PendulumEnv()
    env.set_seed(3)
    data = env.rollout(20)
    env.set_seed(3)
    td = env.reset()
    steps = []
    for _ in range(20):
        td = env.rand_action(td)
        env.step(td)
        steps.append(td)
        td = env._step_mdp(td)
    expected = torch.stack(steps)
    assert (data == expected).all()


def test_rollout_auto_cast_to_device_on_one_device_changes_nothing():
    from tensordict.nn import TensorDictModule

    policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    cast = env.rollout(10, policy, auto_cast_to_device=True)
    env.set_seed(0)
    assert (cast == env.rollout(10, policy)).all()


def _policy_modules(env: GymEnv, discrete: bool) -> list:
    from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential

    from cadence.modules import MLP, QValueModule
    from cadence.modules.tensor_view import compile_policy

    torch.manual_seed(0)
    n_obs, n_act = env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1]
    net = TensorDictModule(MLP(in_features=n_obs, out_features=n_act, num_cells=[16]), ["observation"],
                           ["action_value" if discrete else "action"])
    head = [QValueModule(spec=env.action_spec)] if discrete else []

    class Seen(TensorDictModuleBase):  # a module of its own: called on one TensorDict of the entries
        in_keys, out_keys = ["observation"], ["seen"]

        def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
            return tensordict.set("seen", tensordict.get("observation") * 2)

    policies = [TensorDictSequential(net, *head), TensorDictSequential(Seen(), net, *head)]
    assert all(compile_policy(policy) is not None for policy in policies)  # both take the values loop
    return policies


@pytest.mark.parametrize("name,discrete", [("CartPole-v1", True), ("Pendulum-v1", False)])
@pytest.mark.parametrize("break_when_any_done", [True, False])
def test_a_policy_module_rolls_out_on_the_values_loop_as_on_the_generic_loop(name, discrete, break_when_any_done):
    from tests.fakes import assert_same_rollout

    for policy in _policy_modules(GymEnv(name), discrete):
        results = []
        for generic in (False, True):
            env = GymEnv(name)
            env.set_seed(3)
            callback = (lambda env, td: None) if generic else None  # a callback takes the generic loop
            with torch.no_grad():
                results.append(env.rollout(120, policy, callback=callback, break_when_any_done=break_when_any_done))
        assert_same_rollout(*results)

"""PettingZooEnv / PettingZooWrapper: PettingZoo's parallel and AEC envs as Cadence envs."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from tensordict import LazyStackedTensorDict

pytest.importorskip(
    "pettingzoo",
    reason='PettingZoo is not installed (pip install "cadence[pettingzoo]"); the PettingZoo wrappers are untested',
)
mpe2 = pytest.importorskip("mpe2", reason='mpe2 (the MPE envs) is not installed: pip install "cadence[pettingzoo]"')

from cadence.data import Stacked  # noqa: E402
from cadence.envs import (  # noqa: E402
    Compose,
    MarlGroupMapType,
    ParallelEnv,
    Resize,
    SerialEnv,
    StepCounter,
    ToTensorImage,
    TransformedEnv,
    check_env_specs,
)
from cadence.envs.libs.pettingzoo import PettingZooEnv, PettingZooWrapper, default_group_map  # noqa: E402
from tests.fakes import assert_same_rollout  # noqa: E402


def _spread(**kwargs):
    return PettingZooEnv("simple_spread_v3", parallel=True, N=3, max_cycles=25, **kwargs)


# ------------------------------------------------------------------ parallel envs
def test_simple_spread_layout_and_specs() -> None:
    env = _spread(seed=0)
    assert env.group_map == {"agent": ["agent_0", "agent_1", "agent_2"]}
    assert env.action_key == ("agent", "action") and env.reward_key == ("agent", "reward")
    assert env.action_spec.shape == (3,) and env.action_spec.n == 5
    assert env.reward_spec == env.output_spec["full_reward_spec"]["agent", "reward"]
    assert set(env.done_keys) == {"done", "terminated", "truncated", ("agent", "done"), ("agent", "terminated"),
                                  ("agent", "truncated")}
    data = env.rollout(30)
    assert data.batch_size == (25,)  # max_cycles: truncated
    assert data["next", "agent", "observation"].shape == (25, 3, 18)
    assert data["next", "truncated"][-1].item() and data["next", "agent", "truncated"][-1].all()
    assert not data["next", "done"][:-1].any()
    check_env_specs(env)


def test_rewards_and_observations_are_the_simulators() -> None:
    env = _spread(seed=5)
    data = env.rollout(6)
    backend = mpe2.simple_spread_v3.parallel_env(N=3, max_cycles=25)
    observations, _ = backend.reset(seed=5)
    assert torch.equal(data["agent", "observation"][0], torch.stack([torch.from_numpy(observations[a]) for a in backend.agents]))
    for t in range(6):
        actions = {a: int(data["agent", "action"][t, i]) for i, a in enumerate(backend.agents)}
        observations, rewards, *_ = backend.step(actions)
        assert data["next", "agent", "reward"][t].flatten().tolist() == pytest.approx([rewards[a] for a in backend.agents])
        assert torch.equal(
            data["next", "agent", "observation"][t], torch.stack([torch.from_numpy(observations[a]) for a in backend.agents])
        )


def test_seeding_reproduces() -> None:
    first, second = _spread(), _spread()
    first.set_seed(3)
    second.set_seed(3)
    a, b = first.rollout(10), second.rollout(10)
    assert torch.equal(a["next", "agent", "observation"], b["next", "agent", "observation"])
    assert torch.equal(a["agent", "action"], b["agent", "action"])


@pytest.mark.parametrize("make", [lambda: _spread(), lambda: _tictactoe()], ids=["simple_spread", "tictactoe"])
def test_rollout_on_values_equals_the_tensordict_loop(make) -> None:
    # the loop on values steps the groups' entries under tuple keys; the tensordict loop (a
    # callback) steps _step: the same data, the groups' agent dim included
    fast_env, slow_env = make(), make()
    assert fast_env.kernel == "values: PettingZooWrapper._step_values"
    results = []
    for env, callback in ((fast_env, None), (slow_env, lambda env, td: None)):
        env.set_seed(4)
        results.append(env.rollout(40, break_when_any_done=False, callback=callback))
    assert_same_rollout(*results)


def test_a_group_policy_rollout_on_values_equals_the_tensordict_loop() -> None:
    # the policy reads and writes the group's entries: compiled onto the step's tuple keys
    from tensordict.nn import TensorDictModule

    from cadence.modules.tensor_view import compile_policy

    net = torch.nn.Linear(18, 5)
    policy = TensorDictModule(lambda obs: net(obs).argmax(-1), [("agent", "observation")], [("agent", "action")])
    assert compile_policy(policy) is not None
    results = []
    for callback in (None, lambda env, td: None):
        env = _spread(seed=1)
        with torch.no_grad():
            results.append(env.rollout(30, policy, break_when_any_done=False, callback=callback))
    assert_same_rollout(*results)


def test_a_transformed_step_on_values_keeps_the_groups_agent_dim() -> None:
    # the transforms run on the step's entries; the TensorDict built at the end gives the
    # group its agent dim, as the base env's own step does
    env = TransformedEnv(_spread(seed=0), StepCounter(10))
    out = env.step(env.rand_action(env.reset()))
    assert out["next", "agent"].batch_size == (3,) and out["agent"].batch_size == (3,)
    assert out["next", "agent", "observation"].shape == (3, 18)


def test_group_maps() -> None:
    env = _spread(group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT)
    assert env.action_keys == [("agent_0", "action"), ("agent_1", "action"), ("agent_2", "action")]
    assert env.rollout(3)["next", "agent_1", "observation"].shape == (3, 1, 18)
    custom = _spread(group_map={"pair": ["agent_0", "agent_1"], "solo": ["agent_2"]})
    data = custom.rollout(3)
    assert data["next", "pair", "reward"].shape == (3, 2, 1) and data["next", "solo", "reward"].shape == (3, 1, 1)
    check_env_specs(custom)
    with pytest.raises(ValueError, match="agent_2"):
        _spread(group_map={"pair": ["agent_0", "agent_1"]})


def test_default_group_map() -> None:
    assert default_group_map(["adversary_0", "agent_0", "agent_1"], parallel=True) == {
        "adversary": ["adversary_0"],
        "agent": ["agent_0", "agent_1"],
    }
    assert default_group_map(["player_1", "player_2"], parallel=False) == {"player_1": ["player_1"], "player_2": ["player_2"]}


def test_heterogeneous_agents_in_one_group_are_stacked_lazily() -> None:
    env = PettingZooEnv("simple_adversary_v3", parallel=True, N=2, group_map=MarlGroupMapType.ALL_IN_ONE_GROUP, seed=0)
    assert env.group_map == {"agents": ["adversary_0", "agent_0", "agent_1"]}
    spec = env.full_observation_spec["agents", "observation"]
    assert isinstance(spec, Stacked) and spec.shape == (3, -1)
    data = env.rollout(5)
    assert isinstance(data["next", "agents"], LazyStackedTensorDict)
    assert [part["observation"].shape for part in data["next", "agents"].unbind(1)] == [(5, 8), (5, 10), (5, 10)]
    check_env_specs(env)


def test_return_state_and_done_on_all() -> None:
    env = _spread(return_state=True, done_on_any=False, seed=1)
    data = env.rollout(3)
    assert data["next", "state"].shape == (3, *env.observation_spec["state"].shape)
    check_env_specs(env)


def test_pistonball_pixels_in_parallel_workers() -> None:
    pytest.importorskip("pymunk", reason='pistonball needs pymunk: pip install "cadence[pettingzoo]"')

    def make() -> PettingZooEnv:
        return PettingZooEnv("pistonball_v6", parallel=True, n_pistons=3, continuous=True, max_cycles=8)

    def make_small() -> TransformedEnv:  # the pistons' frames as 32x32 float images
        key = ("piston", "observation")
        return TransformedEnv(make(), Compose(ToTensorImage(in_keys=[key]), Resize(32, 32, in_keys=[key])))

    env = make()
    assert env.full_observation_spec["piston", "observation"].dtype == torch.uint8
    assert env.full_observation_spec["piston", "observation"].shape == (3, 457, 120, 3)
    check_env_specs(env)
    small = make_small()
    assert small.full_observation_spec["piston", "observation"].shape == (3, 3, 32, 32)
    check_env_specs(small)
    workers = ParallelEnv(2, make_small)
    try:
        data = workers.rollout(4, break_when_any_done=False)
        assert data["next", "piston", "observation"].shape == (2, 4, 3, 3, 32, 32)
        assert data["next", "piston", "reward"].shape == (2, 4, 3, 1)
    finally:
        workers.close()


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_batched_simple_spread(batched: type) -> None:
    env = batched(2, _spread)
    try:
        data = env.rollout(10, break_when_any_done=False)
        assert data["next", "agent", "observation"].shape == (2, 10, 3, 18)
        check_env_specs(env)
    finally:
        env.close()


# ------------------------------------------------------------------ AEC (turn-based) envs
def _tictactoe(**kwargs) -> PettingZooEnv:
    pytest.importorskip("pettingzoo.classic.tictactoe_v3", reason="PettingZoo's classic envs do not import here")
    return PettingZooEnv("tictactoe_v3", parallel=False, use_mask=True, **kwargs)


def test_tictactoe_is_played_to_its_end_by_a_masked_random_policy() -> None:
    env = _tictactoe(seed=0)
    assert env.group_map == {"player_1": ["player_1"], "player_2": ["player_2"]}
    for seed in range(5):
        env.set_seed(seed)
        data = env.rollout(20)  # random actions follow the action masks written into the action spec
        assert data["next", "done"][-1].item() and not data["next", "done"][:-1].any()
        for t in range(data.shape[0]):
            player = "player_1" if data["player_1", "mask"][t].item() else "player_2"
            assert data[player, "mask"][t].item()
            move = data[player, "action"][t, 0]
            assert data[player, "action_mask"][t, 0, move], f"illegal move {move} at step {t}"
        rewards = data["next", "player_1", "reward"].sum().item(), data["next", "player_2", "reward"].sum().item()
        assert rewards in {(1.0, -1.0), (-1.0, 1.0), (0.0, 0.0)}
    check_env_specs(env)


def test_only_the_acting_players_action_is_used() -> None:
    env = _tictactoe(seed=0)
    data = env.reset()
    assert data["player_1", "mask"].tolist() == [True] and data["player_2", "mask"].tolist() == [False]
    data["player_1", "action"] = torch.tensor([4])
    data["player_2", "action"] = torch.tensor([4])  # the same cell: ignored, player 2 does not move now
    out = env.step(data)["next"]
    assert out["player_2", "mask"].tolist() == [True]
    assert out["player_2", "action_mask"][0, 4].item() is False and out["player_2", "action_mask"].sum().item() == 8
    assert not out["done"].item()


def test_aec_envs_need_use_mask() -> None:
    pytest.importorskip("pettingzoo.classic.tictactoe_v3", reason="PettingZoo's classic envs do not import here")
    with pytest.raises(ValueError, match="use_mask=True"):
        PettingZooEnv("tictactoe_v3", parallel=False)


# ------------------------------------------------------------------ errors and imports
@pytest.mark.parametrize(
    ("task", "match"),
    [("../../os", "not a PettingZoo env name"), ("os.path", "not a PettingZoo env name"), ("nothing_v1", "no env")],
)
def test_names_are_checked(task: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PettingZooEnv(task, parallel=True)


@pytest.mark.parametrize(
    ("task", "match"), [("x" * 10_000, "not a PettingZoo env name"), ("a" * 10_000 + "_v1", "no env")]
)
def test_a_huge_name_is_quoted_briefly(task: str, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        PettingZooEnv(task, parallel=True)
    message = str(info.value)
    assert len(message) < 600 and f"({len(task)} characters)" in message


def test_a_name_with_a_trailing_newline_is_no_name() -> None:
    with pytest.raises(ValueError, match=r"task 'simple_spread_v3\\n' is not a PettingZoo env name"):
        PettingZooEnv("simple_spread_v3\n", parallel=True)


def test_a_task_that_is_no_str_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="task must be a PettingZoo env name .*got int 123"):
        PettingZooEnv(123, parallel=True)  # type: ignore[arg-type]


def test_arguments_the_env_refuses_are_named() -> None:
    with pytest.raises(ValueError, match=r"PettingZooEnv\('simple_spread_v3'\): the env refused its arguments \{'N': -1"):
        PettingZooEnv("simple_spread_v3", parallel=True, N=-1)
    with pytest.raises(TypeError, match=r"the env refused its arguments \{'no_such_argument': 1\}: TypeError"):
        PettingZooEnv("simple_spread_v3", parallel=True, no_such_argument=1)


def test_wrapping_something_else_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="ParallelEnv or AECEnv"):
        PettingZooWrapper(object())


def test_importing_the_module_does_not_import_pettingzoo() -> None:
    code = "import sys, cadence.envs.libs.pettingzoo; assert 'pettingzoo' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)

"""VmasEnv / VmasWrapper: VMAS scenarios as batched multi-agent Cadence envs."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from tensordict import LazyStackedTensorDict

vmas = pytest.importorskip(
    "vmas", reason='VMAS is not installed (pip install "cadence[vmas]"); the VMAS wrappers are untested'
)

from cadence.data import OneHot, Stacked  # noqa: E402
from cadence.envs import MarlGroupMapType, ParallelEnv, SerialEnv, check_env_specs  # noqa: E402
from cadence.envs.libs.vmas import VmasEnv, VmasWrapper, default_group_map  # noqa: E402
from tests.fakes import assert_same_rollout  # noqa: E402


def test_the_seeds_multi_agent_step_layout() -> None:
    """The seed's "multi-agent step tensordict" example, as written."""
    env = VmasEnv("balance", num_envs=3, n_agents=5)
    td = env.rand_step()
    assert td.batch_size == (3,)
    assert td["agents"].batch_size == (3, 5) and td["agents", "action"].shape == (3, 5, 2)
    nxt = td["next"]
    assert nxt.batch_size == (3,) and nxt["agents"].batch_size == (3, 5)
    assert nxt["agents", "info", "ground_rew"].shape == (3, 5, 1)
    assert nxt["agents", "info", "pos_rew"].shape == (3, 5, 1)
    assert nxt["agents", "observation"].shape == (3, 5, 16)
    assert nxt["agents", "reward"].shape == (3, 5, 1)
    assert nxt["done"].shape == (3, 1) and nxt["done"].dtype == torch.bool
    # exactly the shown layout: the root holds the actions and "next" only
    assert sorted(td.keys()) == ["agents", "next"] and list(td["agents"].keys()) == ["action"]
    assert sorted(nxt["agents"].keys()) == ["info", "observation", "reward"]


def test_keys_and_leaf_specs() -> None:
    env = VmasEnv("balance", num_envs=2, n_agents=3)
    assert env.action_key == ("agents", "action") and env.reward_key == ("agents", "reward")
    assert env.done_keys == ["done", "terminated"]
    assert env.reward_spec.shape == (2, 3, 1)
    assert env.reward_spec == env.output_spec["full_reward_spec"][env.reward_key]
    assert env.action_spec.shape == (2, 3, 2)
    check_env_specs(env)


def test_data_are_the_simulators() -> None:
    env = VmasEnv("balance", num_envs=2, n_agents=3, seed=7)
    data = env.rollout(4)
    backend = vmas.make_env("balance", num_envs=2, n_agents=3, seed=7, device="cpu")
    observations = backend.reset()
    assert torch.allclose(data["agents", "observation"][:, 0], torch.stack(observations, 1))
    for t in range(4):
        actions = list(data["agents", "action"][:, t].unbind(1))
        observations, rewards, dones, _ = backend.step(actions)
        assert torch.allclose(data["next", "agents", "observation"][:, t], torch.stack(observations, 1))
        assert torch.allclose(data["next", "agents", "reward"][:, t, :, 0], torch.stack(rewards, 1))


def test_seeding_reproduces() -> None:
    first, second = VmasEnv("balance", num_envs=2, n_agents=3), VmasEnv("balance", num_envs=2, n_agents=3)
    first.set_seed(1)
    a = first.rollout(5)
    second.set_seed(1)
    b = second.rollout(5)
    assert torch.equal(a["next", "agents", "observation"], b["next", "agents", "observation"])


def test_rollout_on_values_equals_the_tensordict_loop() -> None:
    # random actions drawn at the start (VMAS draws nothing from env.rng) against the
    # tensordict loop's step by step (a callback keeps it), resets included
    fast_env, slow_env = (VmasEnv("balance", num_envs=3, n_agents=2, max_steps=4) for _ in range(2))
    assert fast_env.kernel == "values: VmasWrapper._step_values"
    results = []
    for env, callback in ((fast_env, None), (slow_env, lambda env, td: None)):
        env.set_seed(2)  # VMAS's own seed: torch's global generator, which both envs share
        results.append(env.rollout(10, break_when_any_done=False, callback=callback))
    assert_same_rollout(*results)


def test_max_steps_ends_episodes_and_partial_resets() -> None:
    env = VmasEnv("balance", num_envs=3, n_agents=2, max_steps=3, seed=0)
    data = env.rollout(7, break_when_any_done=False)
    assert data["next", "done"][:, 2].all() and data["next", "terminated"][:, 2].all()
    assert not data["next", "done"][:, 3].any()  # reset after the done step
    start = env.reset()
    stepped = env.rand_step(start)["next"]
    mask = torch.tensor([[True], [False], [False]])
    after = env.reset(stepped.clone().set("_reset", mask))
    assert not torch.equal(after["agents", "observation"][1], start["agents", "observation"][1])  # kept going
    assert torch.equal(after["agents", "observation"][1], stepped["agents", "observation"][1])


def test_discrete_actions_categorical_and_one_hot() -> None:
    categorical = VmasEnv("simple_spread", num_envs=2, continuous_actions=False, seed=0)
    assert categorical.action_spec.shape == (2, 3) and categorical.action_spec.dtype == torch.long
    check_env_specs(categorical)
    one_hot = VmasEnv("simple_spread", num_envs=2, continuous_actions=False, categorical_actions=False, seed=0)
    assert isinstance(one_hot.action_spec, OneHot)
    check_env_specs(one_hot)


def test_groups_and_heterogeneous_agents() -> None:
    assert default_group_map(["adversary_0", "agent_0", "agent_1"]) == {
        "adversary": ["adversary_0"],
        "agent": ["agent_0", "agent_1"],
    }
    split = VmasEnv("simple_adversary", num_envs=2, seed=0)
    assert split.group_map == {"adversary": ["adversary_0"], "agent": ["agent_0", "agent_1"]}
    check_env_specs(split)
    together = VmasEnv("simple_adversary", num_envs=2, seed=0, group_map=MarlGroupMapType.ALL_IN_ONE_GROUP)
    assert isinstance(together.full_observation_spec["agents", "observation"], Stacked)
    data = together.rollout(4)
    assert isinstance(data["next", "agents"], LazyStackedTensorDict)
    assert [p["observation"].shape for p in data["next", "agents"].unbind(2)] == [(2, 4, 8), (2, 4, 10), (2, 4, 10)]
    check_env_specs(together)


@pytest.mark.parametrize("batched", [SerialEnv, ParallelEnv])
def test_in_batched_envs(batched: type) -> None:
    env = batched(2, lambda: VmasEnv("balance", num_envs=2, n_agents=3, seed=0))
    try:
        data = env.rollout(3)
        assert data["next", "agents", "observation"].shape == (2, 2, 3, 3, 16)
        check_env_specs(env)
    finally:
        env.close()


def test_errors() -> None:
    with pytest.raises(ValueError, match="no VMAS scenario 'nope'"):
        VmasEnv("nope", num_envs=1)
    with pytest.raises(TypeError, match="vmas Environment"):
        VmasWrapper(object())
    with pytest.raises(ValueError, match="device"):
        VmasWrapper(vmas.make_env("balance", num_envs=1, device="cpu"), device="meta")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_envs": 0}, ValueError, "num_envs must be an int >= 1 .*got 0"),
        ({"num_envs": -3}, ValueError, "num_envs must be an int >= 1 .*got -3"),
        ({"num_envs": 2.0}, TypeError, "num_envs must be an int >= 1 .*got float 2.0"),
        ({"num_envs": True}, TypeError, "num_envs must be an int >= 1 .*got bool True"),
        ({"num_envs": 1, "max_steps": 0}, ValueError, "max_steps must be an int >= 1 .*got 0"),
        ({"num_envs": 1, "max_steps": -1}, ValueError, "max_steps must be an int >= 1 .*got -1"),
    ],
)
def test_sizes_are_checked_before_vmas_builds_anything(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        VmasEnv("balance", **kwargs)


def test_scenario_names_are_vmas_own_and_quoted_briefly() -> None:
    with pytest.raises(ValueError, match=r"no VMAS scenario '\.\./\.\./etc/passwd'"):
        VmasEnv("../../etc/passwd", num_envs=1)
    with pytest.raises(ValueError, match=r"no VMAS scenario 'xxx.*\(10000 characters\)") as info:
        VmasEnv("x" * 10_000, num_envs=1)
    assert str(info.value).count("x") < 400
    with pytest.raises(TypeError, match="scenario must be a VMAS scenario's name or a vmas BaseScenario.*got int 123"):
        VmasEnv(123, num_envs=1)
    with pytest.raises(ValueError, match=r"device must be a torch device.*got 'mmm.*\(10000 characters\)") as info:
        VmasWrapper(vmas.make_env("balance", num_envs=1, device="cpu"), device="m" * 10_000)
    assert len(str(info.value)) < 400
    with pytest.raises(ValueError, match=r"device must be a torch device.*got 'mmm.*\(10000 characters\)") as info:
        VmasEnv("balance", num_envs=1, device="m" * 10_000)
    assert len(str(info.value)) < 400


def test_importing_the_module_does_not_import_vmas() -> None:
    code = "import sys, cadence.envs.libs.vmas; assert 'vmas' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)

"""Tests of the stateless PendulumEnv, through the public API."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.envs.custom import PendulumEnv

BATCH_SIZES = [(), (4,), (2, 3)]
PARAM_KEYS = {"max_speed", "max_torque", "dt", "g", "m", "l"}


def _damping_policy(td: TensorDictBase) -> TensorDictBase:
    """A deterministic policy: a torque opposing the angular speed."""
    td.set("action", (-0.5 * td.get("thdot")).unsqueeze(-1).clamp(-2.0, 2.0))
    return td


@pytest.mark.parametrize("batch_size", BATCH_SIZES)
class TestShapes:
    def test_reset(self, batch_size: tuple[int, ...]) -> None:
        env = PendulumEnv(batch_size=list(batch_size), seed=0)
        assert env.batch_size == torch.Size(batch_size)
        td = env.reset()
        assert td.batch_size == torch.Size(batch_size)
        assert td["th"].shape == batch_size
        assert td["thdot"].shape == batch_size
        assert td["th"].dtype == torch.float32
        assert set(td["params"].keys()) == PARAM_KEYS
        for key in PARAM_KEYS:
            assert td["params", key].shape == batch_size
        assert (td["th"].abs() <= math.pi).all()
        assert (td["thdot"].abs() <= 1.0).all()
        assert torch.allclose(td["params", "g"], torch.full(batch_size, 10.0))

    def test_step(self, batch_size: tuple[int, ...]) -> None:
        env = PendulumEnv(batch_size=list(batch_size), seed=0)
        td = env.reset()
        td["action"] = torch.ones(*batch_size, 1)
        td = env.step(td)
        nxt = td["next"]
        assert nxt["th"].shape == batch_size
        assert nxt["thdot"].shape == batch_size
        assert nxt["reward"].shape == (*batch_size, 1)
        assert nxt["reward"].dtype == torch.float32
        for key in ("done", "terminated"):
            assert nxt[key].shape == (*batch_size, 1)
            assert nxt[key].dtype == torch.bool
            assert not nxt[key].any()
        assert (nxt["reward"] <= 0).all()

    def test_specs(self, batch_size: tuple[int, ...]) -> None:
        env = PendulumEnv(batch_size=list(batch_size), seed=0)
        assert env.action_spec.shape == (*batch_size, 1)
        assert torch.allclose(env.action_spec.space.low, torch.full((*batch_size, 1), -2.0))
        assert torch.allclose(env.action_spec.space.high, torch.full((*batch_size, 1), 2.0))
        assert env.reward_spec.shape == (*batch_size, 1)
        obs_spec = env.observation_spec
        assert set(obs_spec.keys()) >= {"th", "thdot", "params"}
        assert obs_spec["th"].shape == batch_size
        assert obs_spec["thdot"].shape == batch_size
        assert set(obs_spec["params"].keys()) == PARAM_KEYS
        for key in PARAM_KEYS:
            assert obs_spec["params", key].shape == batch_size
        assert set(env.state_spec.keys()) >= {"th", "thdot", "params"}

    def test_rollout(self, batch_size: tuple[int, ...]) -> None:
        env = PendulumEnv(batch_size=list(batch_size), seed=0)
        rollout = env.rollout(50)
        assert rollout.batch_size == (*batch_size, 50)
        assert rollout.names[-1] == "time"
        assert rollout["next", "reward"].shape == (*batch_size, 50, 1)
        assert not rollout["next", "done"].any()

    def test_check_env_specs(self, batch_size: tuple[int, ...]) -> None:
        utils = pytest.importorskip("cadence.envs.utils")
        env = PendulumEnv(batch_size=list(batch_size), seed=0)
        utils.check_env_specs(env)


class TestSeeding:
    def test_same_seed_same_rollout(self) -> None:
        env1 = PendulumEnv(batch_size=[5], seed=7)
        env2 = PendulumEnv(batch_size=[5], seed=7)
        r1 = env1.rollout(20, policy=_damping_policy)
        r2 = env2.rollout(20, policy=_damping_policy)
        assert (r1 == r2).all()

    def test_set_seed_reproduces(self) -> None:
        env = PendulumEnv(batch_size=[5], seed=1)
        env.set_seed(3)
        r1 = env.rollout(10, policy=_damping_policy)
        env.set_seed(3)
        r2 = env.rollout(10, policy=_damping_policy)
        assert (r1 == r2).all()

    def test_different_seed_different_rollout(self) -> None:
        r1 = PendulumEnv(batch_size=[5], seed=7).rollout(10, policy=_damping_policy)
        r2 = PendulumEnv(batch_size=[5], seed=8).rollout(10, policy=_damping_policy)
        assert not torch.allclose(r1["th"], r2["th"])

    def test_global_rng_untouched(self) -> None:
        env = PendulumEnv(batch_size=[3], seed=0)
        torch.manual_seed(123)
        before = torch.get_rng_state()
        env.reset()
        env.reset()
        assert torch.equal(torch.get_rng_state(), before)

    def test_rng_is_a_generator(self) -> None:
        env = PendulumEnv(seed=0)
        assert isinstance(env.rng, torch.Generator)


def _gym_pendulum(g: float = 10.0):
    gym = pytest.importorskip("gymnasium")
    genv = gym.make("Pendulum-v1", g=g)
    genv.reset(seed=0)
    return genv


@pytest.mark.parametrize("g", [10.0, 9.81])
def test_physics_match_gymnasium(g: float) -> None:
    # A batch of states, including fast ones that hit the speed clip and actions
    # beyond the torque bound (which both implementations clip).
    states = [(0.3, -0.2), (-2.9, 0.9), (math.pi - 0.01, 7.9), (1.0, -7.5), (-0.5, 0.0)]
    actions = [
        [0.5, -1.0, 2.0, -3.0, 0.0],
        [1.5, 1.0, -2.0, 5.0, 0.1],
        [-0.7, 0.0, 0.3, -2.0, 2.0],
        [2.0, -2.0, 1.0, 1.0, -1.0],
    ]
    n = len(states)
    env = PendulumEnv(seed=0)
    td = env.gen_params(g=g, batch_size=[n])
    td["th"] = torch.tensor([s[0] for s in states], dtype=torch.float32)
    td["thdot"] = torch.tensor([s[1] for s in states], dtype=torch.float32)

    genvs = [_gym_pendulum(g) for _ in range(n)]
    for genv, (th, thdot) in zip(genvs, states):
        genv.unwrapped.state = np.array([th, thdot], dtype=np.float64)

    for step_actions in actions:
        td["action"] = torch.tensor(step_actions, dtype=torch.float32).unsqueeze(-1)
        td = env.step(td)
        nxt = td["next"]
        for i, genv in enumerate(genvs):
            obs, reward, terminated, truncated, _ = genv.step(
                np.array([step_actions[i]], dtype=np.float32)
            )
            th = nxt["th"][i].item()
            assert math.cos(th) == pytest.approx(float(obs[0]), abs=1e-5)
            assert math.sin(th) == pytest.approx(float(obs[1]), abs=1e-5)
            assert nxt["thdot"][i].item() == pytest.approx(float(obs[2]), abs=1e-4)
            assert nxt["reward"][i, 0].item() == pytest.approx(float(reward), rel=1e-5, abs=1e-4)
            assert not terminated
            assert not nxt["terminated"][i].item()
        # Advance: the next step starts from this step's output.
        td = TensorDict(
            {"th": nxt["th"], "thdot": nxt["thdot"], "params": nxt["params"]},
            batch_size=[n],
        )
    for genv in genvs:
        genv.close()


def test_angle_stays_in_spec() -> None:
    env = PendulumEnv(batch_size=[8], seed=0)
    rollout = env.rollout(200)
    assert (rollout["next", "th"].abs() <= math.pi).all()
    assert (rollout["next", "thdot"].abs() <= 8.0).all()
    assert not rollout["next", "done"].any()


class TestGenParams:
    def test_gen_params(self) -> None:
        td = PendulumEnv.gen_params(batch_size=[10])
        assert td.batch_size == (10,)
        assert set(td["params"].keys()) == PARAM_KEYS
        assert td["params", "max_speed"].shape == (10,)
        assert td["params", "dt"][0].item() == pytest.approx(0.05)
        assert PendulumEnv.gen_params(g=9.81)["params", "g"].item() == pytest.approx(9.81)
        assert PendulumEnv.gen_params().batch_size == ()

    def test_gen_params_bad_shape(self) -> None:
        with pytest.raises(ValueError, match="'g'"):
            PendulumEnv.gen_params(g=torch.ones(3), batch_size=[4])

    def test_unbatched_env_batched_reset(self) -> None:
        env = PendulumEnv(seed=0)
        assert env.batch_size == ()
        td = env.reset(env.gen_params(batch_size=[10]))
        assert td.batch_size == (10,)
        assert td["th"].shape == (10,)
        assert td["params", "g"].shape == (10,)
        assert td["th"].unique().numel() == 10
        td["action"] = torch.zeros(10, 1)
        td = env.step(td)
        assert td["next", "th"].shape == (10,)
        assert td["next", "reward"].shape == (10, 1)
        assert td["next", "done"].shape == (10, 1)

    def test_unbatched_env_batched_rollout(self) -> None:
        env = PendulumEnv(seed=0)
        td = env.reset(env.gen_params(batch_size=[10]))
        rollout = env.rollout(5, tensordict=td, auto_reset=False, policy=_damping_policy)
        assert rollout.batch_size == (10, 5)
        assert rollout["next", "reward"].shape == (10, 5, 1)

    def test_per_pendulum_params(self) -> None:
        env = PendulumEnv(seed=0)
        td = env.gen_params(g=torch.tensor([0.0, 10.0, 20.0]), batch_size=[3])
        td["th"] = torch.full((3,), 1.0)
        td["thdot"] = torch.zeros(3)
        td["action"] = torch.zeros(3, 1)
        thdot = env.step(td)["next", "thdot"]
        expected = 3 * torch.tensor([0.0, 10.0, 20.0]) / 2 * math.sin(1.0) * 0.05
        torch.testing.assert_close(thdot, expected)

    def test_reset_keeps_given_params(self) -> None:
        env = PendulumEnv(batch_size=[2], seed=0)
        params = env.gen_params(g=2.5, batch_size=[2])
        td = env.reset(params)
        assert td["params", "g"].tolist() == [2.5, 2.5]

    def test_td_params_constructor(self) -> None:
        td_params = PendulumEnv.gen_params(g=4.0, batch_size=[3])
        env = PendulumEnv(td_params=td_params, seed=0)
        assert env.batch_size == (3,)
        assert env.reset()["params", "g"].tolist() == [4.0, 4.0, 4.0]
        env = PendulumEnv(td_params=PendulumEnv.gen_params(g=4.0), batch_size=[2], seed=0)
        assert env.reset()["params", "g"].tolist() == [4.0, 4.0]

    def test_td_params_missing_keys(self) -> None:
        bad = TensorDict({"params": TensorDict({"g": torch.tensor(1.0)}, [])}, [])
        with pytest.raises(ValueError, match="max_speed"):
            PendulumEnv(td_params=bad)


def test_partial_reset() -> None:
    env = PendulumEnv(batch_size=[4], seed=0)
    td = env.reset()
    th = td["th"].clone()
    mask = torch.tensor([True, False, True, False]).unsqueeze(-1)
    td["_reset"] = mask
    out = env.reset(td)
    assert torch.equal(out["th"][~mask.squeeze(-1)], th[~mask.squeeze(-1)])
    assert not torch.equal(out["th"][mask.squeeze(-1)], th[mask.squeeze(-1)])


def test_unseeded_envs_repeat() -> None:
    td1 = PendulumEnv(batch_size=[8]).reset()
    td2 = PendulumEnv(batch_size=[8]).reset()
    assert torch.equal(td1["th"], td2["th"])


def test_reset_done_flags_false() -> None:
    td = PendulumEnv(batch_size=[3], seed=0).reset()
    assert td["done"].shape == (3, 1)
    assert not td["done"].any()
    assert not td["terminated"].any()


def test_unbatched_env_batched_random_rollout() -> None:
    env = PendulumEnv(seed=0)
    td = env.reset(env.gen_params(batch_size=[6]))
    rollout = env.rollout(4, tensordict=td, auto_reset=False)
    assert rollout.batch_size == (6, 4)
    assert rollout["action"].shape == (6, 4, 1)
    assert (rollout["action"].abs() <= 2.0).all()


def test_reset_batch_mismatch_without_params() -> None:
    env = PendulumEnv(batch_size=[4], seed=0)
    with pytest.raises(ValueError, match="params"):
        env.reset(TensorDict({}, batch_size=[3]))


def test_to_device_keeps_working() -> None:
    env = PendulumEnv(batch_size=[2], seed=0).to("cpu")
    assert env.device == torch.device("cpu")
    assert env.rollout(3)["next", "th"].device == torch.device("cpu")


def test_step_without_state_names_missing_keys() -> None:
    env = PendulumEnv(seed=0)
    td = TensorDict({"action": torch.zeros(1)}, [])
    with pytest.raises(KeyError, match="thdot"):
        env.step(td)

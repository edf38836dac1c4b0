"""ObservationNorm (and the init_stats / state_dict flow), VecNorm (shared across
workers), ClipTransform: values, specs, resets."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data import Bounded, Unbounded
from cadence.envs import EnvCreator, GymEnv, ParallelEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import Compose, RewardScaling, TransformedEnv
from cadence.envs.transforms.keys import CatTensors
from cadence.envs.transforms.observation import ClipTransform, ObservationNorm, ObservationTransform, VecNorm
from tests.fakes import CountingEnv


def test_observation_transform_finds_float_observations():
    class Twice(ObservationTransform):
        def _apply_transform(self, value):
            return value * 2

    env = TransformedEnv(CountingEnv(max_count=100), Twice())
    assert env.transform[0].in_keys == ["count"]
    assert env.rollout(2)["next", "count"].squeeze(-1).tolist() == [2.0, 4.0]


def test_observation_norm_values_both_directions():
    data = TensorDict({"observation": torch.tensor([3.0, 5.0])}, [])
    norm = ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"], standard_normal=True)
    assert norm(data.clone())["observation"].tolist() == [1.0, 2.0]
    affine = ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"], in_keys_inv=["action"])
    assert affine(data.clone())["observation"].tolist() == [7.0, 11.0]
    assert affine.inv(TensorDict({"action": torch.tensor([7.0])}, []))["action"].tolist() == [3.0]
    with pytest.raises(ValueError, match="both loc and scale"):
        ObservationNorm(loc=1.0)
    # uninitialised: a pass-through
    assert ObservationNorm()(data.clone())["observation"].tolist() == [3.0, 5.0]


def test_observation_norm_specs_and_resets():
    env = TransformedEnv(CountingEnv(max_count=2), ObservationNorm(loc=1.0, scale=2.0, in_keys=["count"]))
    assert isinstance(env.observation_spec["count"], Unbounded)
    data = env.rollout(4, break_when_any_done=False)
    assert data["count"].squeeze(-1).tolist() == [1.0, 3.0, 1.0, 3.0]  # the reset observations too
    check_env_specs(env)
    check_env_specs(TransformedEnv(SerialEnv(2, CountingEnv), ObservationNorm(loc=0.0, scale=3.0, in_keys=["count"])))
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(CountingEnv(), ObservationNorm(0.0, 3.0, in_keys=["count"]))))
    pend = TransformedEnv(GymEnv("Pendulum-v1"), ObservationNorm(loc=torch.zeros(3), scale=torch.ones(3)))
    check_env_specs(pend)


def test_init_stats_standardises_the_parent_observations():
    env = TransformedEnv(CountingEnv(max_count=1000), Compose(RewardScaling(0.0, 1.0), ObservationNorm(
        in_keys=["count"], standard_normal=True)))
    norm = env.transform[1]
    norm.init_stats(num_iter=9)
    counts = torch.arange(9.0)  # the root observations of nine steps: the reset one first
    assert torch.allclose(norm.loc, counts.mean().reshape(1))
    assert torch.allclose(norm.scale, counts.std().reshape(1))
    with pytest.raises(RuntimeError, match="already set"):
        norm.init_stats(3)
    # the affine form gets the inverse statistics: obs * scale + loc is standardised
    affine = TransformedEnv(CountingEnv(max_count=1000), ObservationNorm(in_keys=["count"]))
    affine.transform[0].init_stats(9)
    out = affine.rollout(9)["count"]
    assert abs(out.mean().item()) < 1e-5 and abs(out.std().item() - 1) < 1e-5
    with pytest.raises(RuntimeError, match="appended to an env"):
        ObservationNorm(in_keys=["count"]).init_stats(3)


def test_init_stats_batched_keep_dims_and_errors():
    env = TransformedEnv(SerialEnv(2, lambda: CountingEnv(max_count=1000)), ObservationNorm(in_keys=["count"]))
    with pytest.raises(ValueError, match="cat_dim is required"):
        env.transform[0].init_stats(3, reduce_dim=[0, 1])
    env.transform[0].init_stats(3, cat_dim=1, reduce_dim=[0, 1], keep_dims=[0])
    assert env.transform[0].loc.shape == (1, 1)


def _make_tutorial_env(base):
    """The DDPG tutorial's chain: a stateless ObservationNorm, third in the chain."""
    env = TransformedEnv(base)
    env.append_transform(RewardScaling(loc=0.0, scale=5.0))
    env.append_transform(CatTensors(in_keys=list(env.observation_spec.keys()), out_key="observation_vector"))
    env.append_transform(ObservationNorm(in_keys=["observation_vector"], standard_normal=True))
    return env


def test_tutorial_flow_init_stats_then_state_dict():
    proof = _make_tutorial_env(GymEnv("Pendulum-v1"))
    proof.transform[2].init_stats(20)
    state = proof.transform[2].state_dict()
    assert set(state) == {"loc", "scale"} and state["loc"].shape == (3,)
    # the tutorial's way: init_stats(3) to instantiate, then load or copy
    env = _make_tutorial_env(GymEnv("Pendulum-v1"))
    env.transform[2].init_stats(3)
    env.transform[2].load_state_dict(state)
    assert torch.equal(env.transform[2].loc, state["loc"]) and torch.equal(env.transform[2].scale, state["scale"])
    env.transform[2].loc.copy_(state["loc"] + 1)
    assert torch.equal(env.transform[2].loc, state["loc"] + 1)
    # loading straight into an uninitialised transform creates the buffers
    fresh = _make_tutorial_env(GymEnv("Pendulum-v1"))
    fresh.transform[2].load_state_dict(state)
    assert torch.equal(fresh.transform[2].scale, state["scale"])
    check_env_specs(fresh)
    # the batched form of the tutorial
    batched = _make_tutorial_env(SerialEnv(2, lambda: GymEnv("Pendulum-v1")))
    batched.transform[2].init_stats(3, cat_dim=1, reduce_dim=[0, 1])
    batched.transform[2].load_state_dict(state)
    assert torch.equal(batched.transform[2].loc, state["loc"])
    check_env_specs(batched)
    data = fresh.rollout(3)
    raw = (data["observation_vector"] * state["scale"] + state["loc"])
    assert raw[:, 0].pow(2).add(raw[:, 1].pow(2)).sub(1).abs().max() < 1e-4  # cos² + sin² of the raw obs


def test_vec_norm_running_statistics():
    norm = VecNorm(in_keys=["x"], decay=1.0, eps=1e-8)
    outs = [norm(TensorDict({"x": torch.tensor([v])}, []))["x"].item() for v in (1.0, 3.0)]
    assert outs[1] == pytest.approx(1.0)  # mean 2, var 1
    assert norm.count__x.item() == 2.0 and norm.sum__x.tolist() == [4.0]
    shared = TensorDict({"x_sum": torch.zeros(1), "x_ssq": torch.zeros(1), "x_count": torch.zeros(())}, [])
    linked = VecNorm(in_keys=["x"], shared_td=shared)
    linked(TensorDict({"x": torch.ones(4, 1)}, [4]))
    assert shared["x_count"].item() == 4.0
    with pytest.raises(KeyError, match="x_ssq"):
        VecNorm(in_keys=["x"], shared_td=TensorDict({"x_sum": torch.zeros(1)}, []))
    with pytest.raises(ValueError, match="decay"):
        VecNorm(decay=0.0)


def test_vec_norm_specs_batched_and_reset():
    env = TransformedEnv(GymEnv("Pendulum-v1"), VecNorm())
    assert env.transform[0].in_keys == ["observation", "reward"]
    assert isinstance(env.observation_spec["observation"], Unbounded)
    check_env_specs(env)
    batched = TransformedEnv(SerialEnv(2, lambda: GymEnv("Pendulum-v1")), VecNorm(in_keys=["observation"]))
    batched.reset()
    assert batched.transform[0].count__observation.item() == pytest.approx(2.0)  # a reset updates too
    check_env_specs(batched)
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(GymEnv("Pendulum-v1"), VecNorm(in_keys=["observation"]))))


def test_vec_norm_statistics_shared_by_parallel_workers():
    creator = EnvCreator(lambda: TransformedEnv(GymEnv("Pendulum-v1"), VecNorm(in_keys=["observation"])))
    env = ParallelEnv(2, creator)
    try:
        env.rollout(5)
        # every env the creator builds, here or in a worker, holds the same shared tensors:
        # the two workers' updates (two resets and ten steps) all show in a local one
        local = creator()
        count = local.transform[0].count__observation
        assert count.is_shared()
        assert count.item() == pytest.approx(sum(0.9999**i for i in range(12)), rel=1e-5)
    finally:
        env.close()


def test_clip_values_specs_and_inverse():
    env = TransformedEnv(
        GymEnv("Pendulum-v1"),
        ClipTransform(in_keys=["observation"], in_keys_inv=["action"], low=-0.5, high=0.5),
    )
    spec = env.observation_spec["observation"]
    assert isinstance(spec, Bounded) and spec.high.tolist() == [0.5] * 3
    assert env.action_spec.low.tolist() == [-0.5] and env.action_spec.high.tolist() == [0.5]
    data = env.rollout(5)
    assert data["next", "observation"].abs().max() <= 0.5
    assert ClipTransform(in_keys_inv=["action"], low=-0.1).inv(
        TensorDict({"action": torch.tensor([-1.0, 1.0])}, []))["action"].tolist() == pytest.approx([-0.1, 1.0])
    check_env_specs(env)
    check_env_specs(TransformedEnv(SerialEnv(2, CountingEnv), ClipTransform(in_keys=["count", "reward"], high=1.5)))
    with pytest.raises(ValueError, match="low <= high"):
        ClipTransform(in_keys=["x"], low=1.0, high=0.0)
    with pytest.raises(ValueError, match="neither"):
        ClipTransform(in_keys=["x"])


def test_vec_norm_loc_and_scale_freeze_into_an_observation_norm():
    # the reference's PPO script saves them so that a replay normalises as training did
    env = TransformedEnv(GymEnv("Pendulum-v1"), VecNorm(in_keys=["observation"], decay=0.99999, eps=1e-2))
    env.set_seed(0)
    env.rollout(50)
    norm = env.transform[0]
    frozen = ObservationNorm(loc=norm.loc["observation"], scale=norm.scale["observation"], in_keys=["observation"],
                             standard_normal=True)
    raw = torch.randn(7, 3)
    expected = (raw - norm.loc["observation"]) / norm.scale["observation"]
    torch.testing.assert_close(frozen(TensorDict({"observation": raw}, [7]))["observation"], expected)
    assert norm.standard_normal
    norm.decay = 1.0  # one more value moves the statistics by a known amount: the map is the transform's own
    value = torch.randn(3)
    total, squares, count = norm.sum__observation + value, norm.ssq__observation + value**2, norm.count__observation + 1
    mean = total / count
    scale = (squares / count - mean**2).clamp_min(norm.eps).sqrt()
    torch.testing.assert_close(norm(TensorDict({"observation": value}, []))["observation"], (value - mean) / scale)
    torch.testing.assert_close(norm.loc["observation"], mean)

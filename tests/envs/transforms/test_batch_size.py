"""BatchSizeTransform: batch sizes given to stateless envs, batches laid out anew (values,
specs, full and partial resets, errors)."""

from __future__ import annotations

import pytest
import torch

from cadence.data import Bounded, Composite, Unbounded
from cadence.envs import GymEnv, SerialEnv, check_env_specs
from cadence.envs.custom import PendulumEnv
from cadence.envs.transforms import Compose, TransformedEnv
from cadence.envs.transforms.batch_size import BatchSizeTransform, reshape_spec_batch
from cadence.envs.transforms.reward import RewardSum
from tests.fakes import CountingEnv


# ---------------------------------------------------------------------- batch_size (stateless envs)
def test_batch_size_gives_a_stateless_env_a_batch():
    env = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[4]))
    assert env.batch_size == torch.Size([4])
    assert env.observation_spec["th"].shape == torch.Size([4])
    assert env.state_spec["params", "g"].shape == torch.Size([4])
    assert env.action_spec.shape == torch.Size([4, 1])
    assert env.reward_spec.shape == torch.Size([4, 1])
    check_env_specs(env)
    data = env.rollout(5)
    assert data.batch_size == torch.Size([4, 5])
    # the steps are the stateless env's own, on the same inputs
    start = env.reset()
    start["action"] = torch.linspace(-1.0, 1.0, 4).unsqueeze(-1)
    ours = env.step(start.clone())["next"]
    theirs = PendulumEnv().step(start.clone())["next"]
    for key in ("th", "thdot", "reward"):
        torch.testing.assert_close(ours[key], theirs[key])
    # the base env is not changed
    assert env.base_env.batch_size == torch.Size([]) and env.base_env.observation_spec["th"].shape == torch.Size([])


def test_batch_size_batched_specs_and_serial_of_them():
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[3]))))
    env = TransformedEnv(PendulumEnv(batch_size=[3]), BatchSizeTransform(batch_size=[2, 3]))
    assert env.batch_size == torch.Size([2, 3])
    check_env_specs(env)


def test_batch_size_reset_input_is_expanded():
    env = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[4]))
    out = env.reset(PendulumEnv.gen_params(g=5.0))
    assert out.batch_size == torch.Size([4])
    assert out["params", "g"].tolist() == [5.0] * 4


def test_batch_size_partial_reset_keeps_the_others():
    env = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[3]))
    data = env.reset()
    data["th"] = torch.full((3,), 7.0)
    data["_reset"] = torch.tensor([[True], [False], [True]])
    out = env.reset(data)
    assert out["th"][1].item() == 7.0
    assert out["th"][0].item() != 7.0 and out["th"][2].item() != 7.0
    assert "_reset" not in data.keys()


def test_batch_size_reset_func_and_env_kwarg():
    seen = {}

    def upright(tensordict, tensordict_reset):
        seen["input"] = tensordict
        tensordict_reset["th"] = torch.zeros_like(tensordict_reset["th"])
        return tensordict_reset

    env = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[3], reset_func=upright))
    assert env.reset()["th"].tolist() == [0.0, 0.0, 0.0]
    assert seen["input"] is None
    check_env_specs(env)

    def from_specs(tensordict, tensordict_reset, env):
        seen["env"] = env
        out = env.full_state_spec.zero()
        out["th"] = torch.full(env.batch_size, 0.5)
        return out

    env = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[2], reset_func=from_specs, env_kwarg=True))
    out = env.reset()
    assert seen["env"] is env
    assert out["th"].tolist() == [0.5, 0.5] and out["done"].shape == torch.Size([2, 1])


# ---------------------------------------------------------------------- reshape_fn (batched envs)
def test_reshape_unsqueeze_serial_env_with_partial_resets():
    env = TransformedEnv(
        SerialEnv(2, lambda: CountingEnv(max_count=3)), BatchSizeTransform(reshape_fn=lambda td: td.unsqueeze(0))
    )
    assert env.batch_size == torch.Size([1, 2])
    assert env.observation_spec["count"].shape == torch.Size([1, 2, 1])
    assert env.full_done_spec["done"].shape == torch.Size([1, 2, 1])
    check_env_specs(env)
    data = env.rollout(7, break_when_any_done=False)
    assert data.batch_size == torch.Size([1, 2, 7])
    assert data["next", "count"][0, 0].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1]
    assert data["count"][0, 1].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_reshape_squeeze_and_flatten():
    env = TransformedEnv(SerialEnv(1, CountingEnv), BatchSizeTransform(reshape_fn=lambda td: td.squeeze(0)))
    assert env.batch_size == torch.Size([])
    check_env_specs(env)
    assert env.rollout(3)["next", "count"].squeeze(-1).tolist() == [1, 2, 3]
    flat = TransformedEnv(PendulumEnv(batch_size=[2, 3]), BatchSizeTransform(reshape_fn=lambda td: td.reshape(-1)))
    assert flat.batch_size == torch.Size([6]) and flat.state_spec["params", "g"].shape == torch.Size([6])
    check_env_specs(flat)
    data = flat.reset()
    data["th"] = torch.arange(6.0) / 10
    data["thdot"] = torch.zeros(6)
    data["action"] = torch.zeros(6, 1)
    ours = flat.step(data.clone())["next", "th"]
    theirs = PendulumEnv().step(data.clone())["next", "th"]  # stateless: the same physics on a flat batch
    torch.testing.assert_close(ours, theirs)


def test_reshape_gym_vector_env_matches_the_flat_env():
    def policy(td):  # deterministic: push towards the side the pole leans to
        right = td["observation"][..., 2:3] > 0
        td["action"] = torch.cat([~right, right], -1)
        return td

    env = TransformedEnv(
        GymEnv("CartPole-v1", num_envs=4),
        Compose(BatchSizeTransform(reshape_fn=lambda td: td.reshape(2, 2)), RewardSum()),
    )
    check_env_specs(env)
    env.set_seed(3)
    ours = env.rollout(60, policy, break_when_any_done=False)
    flat = TransformedEnv(GymEnv("CartPole-v1", num_envs=4), RewardSum())
    flat.set_seed(3)
    theirs = flat.rollout(60, policy, break_when_any_done=False)
    assert ours.batch_size == torch.Size([2, 2, 60])
    assert theirs["next", "done"].any()  # the partial resets are exercised
    for key in theirs.keys(True, True):
        torch.testing.assert_close(ours[key].reshape(theirs[key].shape), theirs[key], msg=str(key))


def test_reshape_partial_reset_maps_the_mask_back():
    env = TransformedEnv(
        SerialEnv(4, lambda: CountingEnv(max_count=100)), BatchSizeTransform(reshape_fn=lambda td: td.reshape(2, 2))
    )
    data = env.reset()
    for _ in range(2):
        data = env._step_mdp(env.step(env.rand_action(data)))
    data["_reset"] = torch.tensor([[[True], [False]], [[False], [True]]])
    out = env.reset(data)
    assert out["count"].squeeze(-1).tolist() == [[0.0, 2.0], [2.0, 0.0]]


def test_reshape_spec_batch_keeps_per_element_bounds():
    low = torch.arange(6.0).reshape(2, 3, 1)
    spec = Composite(x=Bounded(low, low + 1, shape=(2, 3, 1)), y=Unbounded(shape=(2, 3)), shape=(2, 3))
    out = reshape_spec_batch(spec, torch.Size([2, 3]), torch.Size([3, 2]))
    assert out.shape == torch.Size([3, 2]) and out["x"].shape == torch.Size([3, 2, 1])
    assert out["x"].low.reshape(-1).tolist() == list(range(6))
    assert out["y"].shape == torch.Size([3, 2])
    back = reshape_spec_batch(out, torch.Size([3, 2]), torch.Size([1, 6]))
    assert back["x"].low.reshape(-1).tolist() == list(range(6))


# ---------------------------------------------------------------------- errors
def test_errors_name_the_transform():
    with pytest.raises(ValueError, match="BatchSizeTransform needs exactly one"):
        BatchSizeTransform()
    with pytest.raises(ValueError, match="BatchSizeTransform needs exactly one"):
        BatchSizeTransform(batch_size=[2], reshape_fn=lambda td: td)
    with pytest.raises(ValueError, match="env_kwarg"):
        BatchSizeTransform(batch_size=[2], env_kwarg=True)
    with pytest.raises(ValueError, match=r"does not expand to batch_size=\(3,\)"):
        TransformedEnv(PendulumEnv(batch_size=[2]), BatchSizeTransform(batch_size=[3]))
    with pytest.raises(ValueError, match="batch-locked"):
        TransformedEnv(SerialEnv(2, CountingEnv), BatchSizeTransform(batch_size=[3, 2]))
    with pytest.raises(ValueError, match="reorders"):
        TransformedEnv(
            PendulumEnv(batch_size=[2, 3]), BatchSizeTransform(reshape_fn=lambda td: td.permute(1, 0).contiguous())
        )
    with pytest.raises(TypeError, match="must return a tensordict"):
        TransformedEnv(PendulumEnv(batch_size=[2]), BatchSizeTransform(reshape_fn=lambda td: td.get("index")))
    bad = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[2], reset_func=lambda td, out: out[0]))
    with pytest.raises(ValueError, match=r"reset_func must return a tensordict of batch size \(2,\), got \(\)"):
        bad.reset()

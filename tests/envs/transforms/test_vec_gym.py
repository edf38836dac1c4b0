"""VecGymEnvTransform: auto-resetting gymnasium vector envs give the data of
GymEnv(num_envs=N) (final observations in "next", reset observations at the next root,
resets served without the simulator), specs, errors."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from tensordict import TensorDict

from cadence.data import Composite, Unbounded
from cadence.envs import GymEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import Compose, TransformedEnv
from cadence.envs.transforms.reward import RewardSum
from cadence.envs.libs.gym import GymWrapper
from cadence.envs.transforms.vec_gym import FinalObservationReader, VecGymEnvTransform
from tests.fakes import CountingEnv


def test_a_same_step_vector_env_without_the_transform_says_to_append_it() -> None:
    env = GymWrapper(_vector(AutoresetMode.SAME_STEP, 2))
    with pytest.warns(UserWarning, match="Append VecGymEnvTransform"):
        env.rollout(100, break_when_any_done=False)
    assert GymWrapper(_vector(AutoresetMode.NEXT_STEP, 2)).autoreset_mode == "NextStep"


def _vector(mode: AutoresetMode, num_envs: int = 3, name: str = "CartPole-v1") -> gymnasium.vector.VectorEnv:
    return gymnasium.make_vec(
        name, num_envs=num_envs, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode}
    )


def _env(mode: AutoresetMode, num_envs: int = 3, **kwargs) -> TransformedEnv:
    return TransformedEnv(GymWrapper(_vector(mode, num_envs)), VecGymEnvTransform(**kwargs))


class _CountingResets:
    """Counts the simulator's resets and keeps their reset masks."""

    def __init__(self, vec):
        self.masks: list = []
        original = vec.reset

        def reset(*, seed=None, options=None):
            self.masks.append(None if not options or "reset_mask" not in options else options["reset_mask"].copy())
            return original(seed=seed, options=options)

        vec.reset = reset


def _done_step(env, data):
    """Steps with random actions until a sub-env finishes; returns the step and the next root."""
    for _ in range(500):
        step = env.step(env.rand_action(data))
        data = env._step_mdp(step)
        if step["next", "done"].any():
            return step, data
    raise AssertionError("no sub-env finished")


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP])
def test_rollout_equals_gym_env_with_the_same_seeds(mode):
    env = _env(mode)
    env.set_seed(0)
    ours = env.rollout(120, break_when_any_done=False)
    reference = GymEnv("CartPole-v1", num_envs=3)
    reference.set_seed(0)
    theirs = reference.rollout(120, break_when_any_done=False)
    assert int(theirs["next", "done"].sum()) >= 3  # several episodes ended in the rollout
    assert set(ours.keys(True, True)) == set(theirs.keys(True, True))
    for key in theirs.keys(True, True):
        assert torch.equal(ours[key], theirs[key]), key


def test_specs_single_and_batched():
    check_env_specs(_env(AutoresetMode.SAME_STEP))
    check_env_specs(_env(AutoresetMode.NEXT_STEP))
    check_env_specs(SerialEnv(2, lambda: _env(AutoresetMode.SAME_STEP, 2)))
    env = _env(AutoresetMode.SAME_STEP)
    assert "final" not in env.observation_spec.keys()
    assert "final" in env.base_env.observation_spec.keys()  # the reader's entry, on the wrapper
    check_env_specs(env.base_env)  # the wrapper with its reader keeps to its own specs
    check_env_specs(TransformedEnv(GymWrapper(_vector(AutoresetMode.SAME_STEP)),
                                   Compose(VecGymEnvTransform(), RewardSum())))


def test_next_holds_the_final_observation_and_reset_serves_the_kept_one():
    vec = _vector(AutoresetMode.SAME_STEP)
    env = TransformedEnv(GymWrapper(vec), VecGymEnvTransform())
    counter = _CountingResets(vec)
    env.set_seed(1)
    data = env.reset()
    step, root = _done_step(env, data)
    done = step["next", "done"].squeeze(-1)
    # the final observation: a pole past its limits or a cart out of bounds
    final = step["next", "observation"][done]
    assert bool(((final[:, 2].abs() > 0.2095) | (final[:, 0].abs() > 2.4)).all())
    simulator_obs = torch.as_tensor(vec._observations)  # already the new episodes' first observations
    assert not torch.equal(final, simulator_obs[done])
    resets_before = len(counter.masks)
    root["_reset"] = step["next", "done"].clone()
    out = env.reset(root)
    assert len(counter.masks) == resets_before  # served from what was kept: no simulator reset
    torch.testing.assert_close(out["observation"][done], simulator_obs[done])
    torch.testing.assert_close(out["observation"][~done], step["next", "observation"][~done])
    assert not out["done"].any()
    assert bool((out["observation"][done].abs() <= 0.05).all())  # CartPole's reset range


def test_reset_of_a_running_sub_env_goes_to_the_simulator():
    vec = _vector(AutoresetMode.SAME_STEP)
    env = TransformedEnv(GymWrapper(vec), VecGymEnvTransform())
    counter = _CountingResets(vec)
    env.set_seed(2)
    step, root = _done_step(env, env.reset())
    done = step["next", "done"].squeeze(-1)
    running = int(torch.nonzero(~done)[0])
    mask = step["next", "done"].clone()
    mask[running] = True
    root["_reset"] = mask
    resets_before = len(counter.masks)
    out = env.reset(root)
    assert len(counter.masks) == resets_before + 1
    expected = np.zeros(3, dtype=bool)
    expected[running] = True
    assert counter.masks[-1].tolist() == expected.tolist()  # only the running one
    torch.testing.assert_close(out["observation"][running], torch.as_tensor(vec._observations[running]))
    # a full reset resets everything and drops what was kept
    env.reset()
    assert counter.masks[-1] is None and env.transform[0]._stash is None


def test_next_step_mode_passes_resets_to_the_simulator():
    vec = _vector(AutoresetMode.NEXT_STEP)
    env = TransformedEnv(GymWrapper(vec), VecGymEnvTransform())
    counter = _CountingResets(vec)
    env.set_seed(3)
    step, root = _done_step(env, env.reset())
    root["_reset"] = step["next", "done"].clone()
    resets_before = len(counter.masks)
    env.reset(root)
    assert len(counter.masks) == resets_before + 1
    assert counter.masks[-1].tolist() == step["next", "done"].squeeze(-1).tolist()
    assert not vec._autoreset_envs.any()  # the pending autoreset is cancelled


def test_custom_final_name():
    env = _env(AutoresetMode.SAME_STEP, final_name="last")
    assert "last" in env.base_env.observation_spec.keys() and "last" not in env.observation_spec.keys()
    check_env_specs(env)
    assert "last" not in env.rollout(30, break_when_any_done=False)["next"].keys()


def test_reader_values_and_dict_observations():
    spec = Composite(pos=Unbounded(shape=(2, 2)), extra=Composite(v=Unbounded(shape=(2,)), shape=(2,)), shape=(2,))
    reader = FinalObservationReader(spec, "final")
    data = TensorDict({"pos": torch.zeros(2, 2), "extra": {"v": torch.zeros(2)}}, [2])
    finals = np.array([None, {"pos": np.array([1.0, 2.0]), "extra": {"v": 3.0}}], dtype=object)
    out = reader({"final_obs": finals, "_final_obs": np.array([False, True])}, data)
    assert out["final", "pos"].tolist() == [[0.0, 0.0], [1.0, 2.0]]
    assert out["final", "extra", "v"].tolist() == [0.0, 3.0]
    assert reader.info_spec(torch.Size([2]))["final", "pos"].shape == torch.Size([2, 2])
    data = TensorDict({"pos": torch.zeros(2, 2)}, [2])
    with pytest.raises(KeyError, match="FinalObservationReader.*'other'"):
        reader({"final_obs": np.array([{"other": 1.0}, None], dtype=object), "_final_obs": np.array([True, False])},
               data)


def test_errors_name_the_transform():
    with pytest.raises(ValueError, match="VecGymEnvTransform: final_name"):
        VecGymEnvTransform(final_name="")
    with pytest.raises(TypeError, match="VecGymEnvTransform handles GymWrapper"):
        TransformedEnv(CountingEnv(), VecGymEnvTransform())
    with pytest.raises(TypeError, match="VecGymEnvTransform handles GymWrapper"):
        TransformedEnv(GymEnv("CartPole-v1"), VecGymEnvTransform())
    with pytest.raises(ValueError, match="VecGymEnvTransform must be the first"):
        TransformedEnv(GymWrapper(_vector(AutoresetMode.SAME_STEP)),
                       Compose(RewardSum(), VecGymEnvTransform()))

"""The gymnasium kernel (``cadence/envs/libs/gym_simulator.py``): a ``SyncVectorEnv``'s
sub-envs stepped one by one into the arrays, the vector env going on from there."""

from __future__ import annotations

import numpy as np
import torch

from cadence.envs import GymEnv


def test_a_vector_env_stepped_by_the_kernel_then_reset_through_gymnasium_keeps_every_sub_env() -> None:
    env = GymEnv("CartPole-v1", num_envs=3)
    assert env.kernel == "gymnasium vector env, stepped into arrays"
    env.set_seed(0)
    root = env.reset()
    for _ in range(6):  # the manual loop: kernel steps
        _, root = env.step_and_maybe_reset(env.rand_action(root))
    standing = root["observation"].clone()
    states = [np.asarray(sub.unwrapped.state, dtype=np.float32) for sub in env._env.envs]
    assert torch.equal(standing, torch.as_tensor(np.stack(states)))  # the kernel's rows are where they stand
    # a partial reset through gymnasium's own masked reset: the others keep where they stand
    root["_reset"] = torch.tensor([[True], [False], [False]])
    out = env.reset(root)
    assert torch.equal(out["observation"][1:], standing[1:])
    assert not torch.equal(out["observation"][0], standing[0])
    # gymnasium's own step goes on from there
    obs, *_ = env._env.step(np.zeros(3, dtype=np.int64))
    assert obs.shape == (3, 4)


def test_a_vector_env_keeps_its_episodes_across_kernel_resets() -> None:
    env = GymEnv("CartPole-v1", num_envs=2)
    env.set_seed(1)
    data = env.rollout(200, break_when_any_done=False)  # resets inside the kernel's stretches
    done = data["next", "done"].squeeze(-1)
    assert done.any()
    # after a done step the next input is a fresh episode: a CartPole reset is within +-0.05
    for i, t in zip(*torch.nonzero(done[:, :-1], as_tuple=True)):
        assert data["observation"][i, t + 1].abs().max() <= 0.05

"""The DDPG tutorial's environment pipeline, run as written but for the import prefix:
`make_transformed_env`, the ObservationNorm `init_stats` / `state_dict` flow, and
`parallel_env_constructor`, on Pendulum-v1 and (with the mujoco extra) HalfCheetah-v5.

The tutorial's `make_env` also names dm_control (not a dependency here) and
"HalfCheetah-v4" with a CUDA `device`; the env ids and `device="cpu"` are the only changes.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from cadence.envs import (
    CatTensors,
    DoubleToFloat,
    EnvCreator,
    InitTracker,
    ObservationNorm,
    ParallelEnv,
    RewardScaling,
    StepCounter,
    TransformedEnv,
)
from cadence.envs.libs.gym import GymEnv

reward_scaling = 5.0
max_frames_per_traj = 500
init_env_steps = 50  # the tutorial uses 5000; fewer keep the test quick
device = "cpu"

ENV_IDS = [
    "Pendulum-v1",
    pytest.param(
        "HalfCheetah-v5",
        marks=pytest.mark.skipif(importlib.util.find_spec("mujoco") is None, reason="needs the mujoco extra"),
    ),
]


def make_env_for(env_name):
    def make_env(from_pixels=False):
        """Create a base ``env``."""
        env_kwargs = {
            "device": device,
            "from_pixels": from_pixels,
            "pixels_only": from_pixels,
            "frame_skip": 2,
        }
        return GymEnv(env_name, **env_kwargs)

    return make_env


def make_transformed_env(
    env,
):
    """Apply transforms to the ``env`` (such as reward scaling and state normalization)."""

    env = TransformedEnv(env)
    env.append_transform(RewardScaling(loc=0.0, scale=reward_scaling))
    selected_keys = list(env.observation_spec.keys())
    out_key = "observation_vector"
    env.append_transform(CatTensors(in_keys=selected_keys, out_key=out_key))
    env.append_transform(ObservationNorm(in_keys=[out_key], standard_normal=True))
    env.append_transform(DoubleToFloat())
    env.append_transform(StepCounter(max_frames_per_traj))
    env.append_transform(InitTracker())
    return env


@pytest.mark.parametrize("env_name", ENV_IDS)
def test_tutorial_pipeline(env_name):
    make_env = make_env_for(env_name)

    def get_env_stats():
        """Gets the stats of an environment."""
        proof_env = make_transformed_env(make_env())
        t = proof_env.transform[2]
        t.init_stats(init_env_steps)
        transform_state_dict = t.state_dict()
        proof_env.close()
        return transform_state_dict

    def parallel_env_constructor(
        env_per_collector,
        transform_state_dict,
    ):
        if env_per_collector == 1:

            def make_t_env():
                env = make_transformed_env(make_env())
                env.transform[2].init_stats(3)
                env.transform[2].loc.copy_(transform_state_dict["loc"])
                env.transform[2].scale.copy_(transform_state_dict["scale"])
                return env

            env_creator = EnvCreator(make_t_env)
            return env_creator

        parallel_env = ParallelEnv(
            num_workers=env_per_collector,
            create_env_fn=EnvCreator(lambda: make_env()),
            create_env_kwargs=None,
            pin_memory=False,
        )
        env = make_transformed_env(parallel_env)
        # we call `init_stats` for a limited number of steps, just to instantiate
        # the lazy buffers.
        env.transform[2].init_stats(3, cat_dim=1, reduce_dim=[0, 1])
        env.transform[2].load_state_dict(transform_state_dict)
        return env

    transform_state_dict = get_env_stats()
    assert set(transform_state_dict.keys()) == {"loc", "scale"}

    single = parallel_env_constructor(1, transform_state_dict)()
    data = single.rollout(5)
    assert torch.equal(single.transform[2].loc, transform_state_dict["loc"])
    assert data["next", "observation_vector"].dtype == torch.float32
    assert data["is_init"][0].all() and data["step_count"].squeeze(-1).tolist() == [0, 1, 2, 3, 4]

    parallel_env = parallel_env_constructor(2, transform_state_dict)
    try:
        assert torch.equal(parallel_env.transform[2].loc, transform_state_dict["loc"])
        data = parallel_env.rollout(5)
        assert data.batch_size == torch.Size([2, 5])
        assert torch.isfinite(data["next", "observation_vector"]).all()
    finally:
        parallel_env.close()

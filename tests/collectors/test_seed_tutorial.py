"""The seed tutorial's "Data collector" section, with Pendulum for speed: its calls run
as written (``torchrl`` replaced by ``cadence``)."""

from __future__ import annotations

import multiprocessing

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential

from cadence.collectors import SyncDataCollector
from cadence.data import CompositeSpec
from cadence.envs import (
    CatTensors,
    DoubleToFloat,
    EnvCreator,
    ExplorationType,
    GymEnv,
    InitTracker,
    ObservationNorm,
    ParallelEnv,
    StepCounter,
    TransformedEnv,
)
from cadence.modules import DdpgMlpActor, OrnsteinUhlenbeckProcessModule, ProbabilisticActor, TanhDelta


def make_env() -> GymEnv:
    return GymEnv("Pendulum-v1")


def make_transformed_env(env: object) -> TransformedEnv:
    env = TransformedEnv(env)  # type: ignore[arg-type]
    env.append_transform(CatTensors(in_keys=["observation"], out_key="observation_vector"))
    env.append_transform(ObservationNorm(in_keys=["observation_vector"], standard_normal=True))
    env.append_transform(DoubleToFloat())
    env.append_transform(StepCounter(50))
    env.append_transform(InitTracker())
    return env


def test_the_tutorial_collector_loop() -> None:
    env_per_collector = 2
    parallel_env = ParallelEnv(num_workers=env_per_collector, create_env_fn=EnvCreator(lambda: make_env()))
    env = make_transformed_env(parallel_env)
    env.transform[1].init_stats(3, cat_dim=1, reduce_dim=[0, 1])

    proof_environment = make_transformed_env(make_env())
    proof_environment.transform[1].init_stats(3)
    actor_net = DdpgMlpActor(action_dim=proof_environment.action_spec.shape[-1])
    actor = TensorDictModule(actor_net, in_keys=["observation_vector"], out_keys=["param"])
    actor = ProbabilisticActor(
        actor, distribution_class=TanhDelta, in_keys=["param"], spec=CompositeSpec(action=proof_environment.action_spec)
    )
    actor(proof_environment.reset())
    actor_model_explore = TensorDictSequential(
        actor, OrnsteinUhlenbeckProcessModule(spec=actor.spec.clone(), annealing_num_steps=1000)
    )
    actor_model_explore.share_memory()

    traj_len = 20
    frames_per_batch = env_per_collector * traj_len
    collector = SyncDataCollector(
        env,
        policy=actor_model_explore,
        total_frames=200,
        frames_per_batch=frames_per_batch,
        init_random_frames=80,
        reset_at_each_iter=False,
        split_trajs=False,
        device=torch.device("cpu"),
        exploration_type=ExplorationType.RANDOM,
    )
    collected_frames = 0
    keys = None
    for i, tensordict in enumerate(collector):
        collector.update_policy_weights_()
        assert tensordict.batch_size == torch.Size([env_per_collector, traj_len])
        keys = keys or set(tensordict.keys(True, True))
        assert set(tensordict.keys(True, True)) == keys  # random and policy batches alike
        current_frames = tensordict.numel()
        collected_frames += current_frames
        actor_model_explore[1].step(current_frames)
    assert i == 4 and collected_frames == 200
    assert actor_model_explore[1].eps < 1.0
    collector.shutdown()
    del collector
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("ParallelEnv")]

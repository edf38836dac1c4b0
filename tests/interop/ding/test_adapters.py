"""DingEnvAdapter (a DI-engine env in Cadence) and as_ding_env (a Cadence env in DI-engine's contract)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from cadence.collectors import SyncDataCollector
from cadence.data import LazyTensorStorage, ReplayBuffer
from cadence.envs import (
    GymEnv,
    ParallelEnv,
    PendulumEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)
from cadence.envs.worker_errors import WorkerException
from cadence.interop.ding import (
    BaseEnvTimestep,
    DataRuleError,
    DingEnvAdapter,
    DingEnvWrapper,
    as_ding_env,
    check_all,
    demonstrate_correct_procedure,
)
from cadence.modules import MLP, QValueActor
from tests.interop.ding.seed_envs import CartpoleEnv


def cartpole() -> DingEnvAdapter:
    return DingEnvAdapter(CartpoleEnv({}))


def test_specs_come_from_the_three_spaces():
    env = cartpole()
    assert env.observation_spec["observation"].shape == (4,)
    assert env.observation_spec["observation"].dtype == torch.float32
    assert env.action_spec.shape == (2,)  # one-hot, as GymEnv's
    assert DingEnvAdapter(CartpoleEnv({}), categorical_action_encoding=True).action_spec.shape == ()
    pendulum = DingEnvAdapter(DingEnvWrapper(cfg={"env_id": "Pendulum-v1"}))
    assert pendulum.action_spec.shape == (1,) and float(pendulum.action_spec.high) == 2.0
    check_env_specs(env)
    check_env_specs(pendulum)


def test_rollouts_match_the_ding_env_played_by_hand():
    env = cartpole()
    env.set_seed(5)
    data = env.rollout(200, break_when_any_done=False)
    assert data["next", "reward"].shape == (200, 1) and data["next", "done"].any()
    again = cartpole()
    again.set_seed(5)
    assert torch.equal(again.rollout(200, break_when_any_done=False)["observation"], data["observation"])
    # the same episode played through the DI-engine env itself
    ding = CartpoleEnv({})
    ding.seed(5, dynamic_seed=True)
    obs = [ding.reset()]
    for action in data["action"].argmax(-1)[:10]:
        obs.append(ding.step(np.array([int(action)])).obs)
    assert np.allclose(np.stack(obs[:10]), data["observation"][:10].numpy())


def test_truncation_and_termination_are_told_apart():
    env = DingEnvAdapter(DingEnvWrapper(cfg={"env_id": "Pendulum-v1"}))
    data = env.rollout(250)
    assert data.shape == (200,)
    assert data["next", "truncated"][-1].item() and not data["next", "terminated"][-1].item()
    cart = cartpole()
    cart.set_seed(0)
    data = cart.rollout(500)
    assert data["next", "terminated"][-1].item() and not data["next", "truncated"][-1].item()


def test_parallel_env_transforms_collector_and_replay_buffer():
    env = TransformedEnv(ParallelEnv(2, cartpole), RewardSum())
    env.append_transform(StepCounter())
    env.set_seed(0)
    policy = QValueActor(MLP(in_features=4, out_features=2, num_cells=[16]), in_keys=["observation"], spec=env.action_spec)
    collector = SyncDataCollector(env, policy, frames_per_batch=64, total_frames=128)
    buffer = ReplayBuffer(storage=LazyTensorStorage(256))
    batches = 0
    for batch in collector:
        assert batch.batch_size == (2, 32) and "step_count" in batch.keys()
        buffer.extend(batch.reshape(-1))
        batches += 1
    collector.shutdown()
    assert batches == 2 and len(buffer) == 128
    assert buffer.sample(8)["next", "observation"].shape == (8, 4)


class Breaking(CartpoleEnv):
    """Breaks one data rule at step 3 of each episode."""

    def __init__(self, cfg: dict, how: str = "obs") -> None:
        super().__init__(cfg)
        self.how = how

    def reset(self) -> np.ndarray:
        self.t = 0
        return super().reset()

    def step(self, action: np.ndarray) -> BaseEnvTimestep:
        timestep = super().step(action)
        self.t += 1
        if self.t < 3:
            return timestep
        if self.how == "obs":
            return timestep._replace(obs=timestep.obs.astype(np.float64))
        if self.how == "shape":
            return timestep._replace(obs=timestep.obs[:3])
        if self.how == "done":
            return timestep._replace(done=np.bool_(True))
        if self.how == "reward":
            return timestep._replace(reward=np.float32(1.0))
        if self.how == "return":
            return timestep._replace(done=True, info={})
        return timestep._replace(info=None)


@pytest.mark.parametrize(
    "how, key, rule",
    [
        ("obs", "obs", "dtype float32, int64 or uint8"),
        ("shape", "obs", "belong to their space"),
        ("done", "done", "Python bool"),
        ("reward", "reward", "one-dimensional"),
        ("return", "info['eval_episode_return']", "eval_episode_return"),
        ("info", "info", "info is a dict"),
    ],
)
def test_a_broken_rule_is_named_at_the_step_that_broke_it(how, key, rule):
    env = DingEnvAdapter(Breaking({}, how))
    env.set_seed(0)
    with pytest.raises(DataRuleError) as caught:
        env.rollout(10, break_when_any_done=False)
    assert caught.value.key == key and rule in caught.value.rule and caught.value.where == "step 3"


def test_a_broken_rule_in_a_parallel_worker_is_named_too():
    env = ParallelEnv(2, lambda: DingEnvAdapter(Breaking({}, "done")))
    env.set_seed(0)
    with pytest.raises(WorkerException, match=r"step 3: done breaks the rule \"done is a Python bool"):
        env.rollout(10, break_when_any_done=False)
    env.close()


def test_run_type_checks_also_checks_the_bounds():
    class Escapes(CartpoleEnv):
        def step(self, action: np.ndarray) -> BaseEnvTimestep:
            timestep = super().step(action)
            return timestep._replace(obs=np.full(4, 9.0, np.float32))

    DingEnvAdapter(Escapes({})).rollout(3)  # dtype and shape are right: passes unchecked
    with pytest.raises(DataRuleError, match="outside the bounds"):
        DingEnvAdapter(Escapes({}), run_type_checks=True).rollout(3)


def test_an_env_that_learns_its_spaces_at_reset_and_a_factory():
    class LateSpaces(CartpoleEnv):
        def __init__(self, cfg: dict) -> None:
            super().__init__(cfg)
            self._late = None

        @property
        def observation_space(self) -> gym.Space:
            return self._late

        def reset(self) -> np.ndarray:
            self._late = self._observation_space
            return super().reset()

    assert DingEnvAdapter(LateSpaces({})).observation_spec["observation"].shape == (4,)
    assert DingEnvAdapter(lambda: CartpoleEnv({})).rollout(3).shape == (3,)


def test_ding_env_methods_pass_through():
    env = DingEnvAdapter(DingEnvWrapper(cfg={"env_id": "CartPole-v1"}))
    assert env.random_action().shape == (1,)  # the DI-engine env's own method
    assert "DingEnvAdapter(env=DingEnvWrapper(CartPole-v1)" in repr(env)


# -- as_ding_env ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: GymEnv("CartPole-v1"),
        lambda: GymEnv("Pendulum-v1"),
        lambda: TransformedEnv(PendulumEnv(), StepCounter(max_steps=50)),  # nested observation keys
        lambda: TransformedEnv(GymEnv("CartPole-v1"), StepCounter(max_steps=30)),
        lambda: GymEnv("CartPole-v1", categorical_action_encoding=True),
    ],
)
def test_cadence_envs_pass_the_checker(make):
    check_all(as_ding_env(make()), max_episode_steps=1000)
    demonstrate_correct_procedure(lambda cfg: as_ding_env(make, cfg))


def test_as_ding_env_observations_and_steps():
    env = as_ding_env(TransformedEnv(GymEnv("CartPole-v1"), StepCounter(max_steps=5)))
    obs = env.reset()
    assert set(obs) == {"observation", "step_count"} and obs["step_count"].dtype == np.int64
    assert isinstance(env.observation_space, gym.spaces.Dict)
    for _ in range(5):
        timestep = env.step(np.array([0]))
    assert timestep.done and timestep.info["TimeLimit.truncated"] is True  # StepCounter truncates
    assert type(timestep.info["eval_episode_return"]) is float
    with pytest.raises(DataRuleError, match="Discrete\\(2\\)"):
        env.step(np.array([2]))


def test_as_ding_env_seeds_static_and_dynamic():
    def firsts(dynamic: bool, seed: int = 3) -> list[list[float]]:
        env = as_ding_env(lambda: GymEnv("CartPole-v1"))
        env.seed(seed, dynamic_seed=dynamic)
        return [env.reset().tolist() for _ in range(3)]

    static = firsts(False)
    assert static[0] == static[1] == static[2]
    dynamic = firsts(True)
    assert dynamic[0] != dynamic[1] and dynamic == firsts(True)


def test_as_ding_env_is_lazy_with_a_factory_and_refuses_batched_envs():
    made = []

    def make() -> GymEnv:
        made.append(1)
        return GymEnv("CartPole-v1")

    env = as_ding_env(make)
    assert not made and not env._init_flag
    env.reset()
    assert made == [1]
    env.close()
    env.reset()  # made again after close
    assert made == [1, 1]
    with pytest.raises(ValueError, match="unbatched env"):
        as_ding_env(SerialEnv(2, lambda: GymEnv("CartPole-v1")))
    with pytest.raises(TypeError, match="Cadence EnvBase or a callable"):
        as_ding_env(42)
    with pytest.raises(RuntimeError, match="before the first reset"):
        as_ding_env(GymEnv("CartPole-v1")).step(np.array([0]))


def test_old_gym_spaces_of_di_engine_envs_are_converted(monkeypatch):
    """DI-engine's envs use gym 0.25's space classes: stand-ins named and placed like them."""
    import types

    from cadence.interop.ding.adapters import as_gymnasium_space

    def old(kind: str, **fields: Any) -> Any:
        cls = type(kind, (), {"__module__": "gym.spaces." + kind.lower()})
        obj = cls()
        obj.__dict__.update(fields)
        return obj

    box = old("Box", low=np.zeros(2, np.float32), high=np.ones(2, np.float32), shape=(2,), dtype=np.dtype(np.float32))
    converted = as_gymnasium_space(old("Dict", spaces={"x": box, "k": old("Discrete", n=3, start=0)}))
    assert converted == gym.spaces.Dict(
        {"x": gym.spaces.Box(0, 1, (2,), np.float32), "k": gym.spaces.Discrete(3)}
    )
    assert as_gymnasium_space(old("MultiBinary", n=4)) == gym.spaces.MultiBinary(4)
    assert as_gymnasium_space(old("Tuple", spaces=(old("MultiDiscrete", nvec=np.array([2, 3]), dtype=np.dtype(np.int64)),))) == (
        gym.spaces.Tuple((gym.spaces.MultiDiscrete([2, 3]),))
    )
    with pytest.raises(TypeError, match="SimpleNamespace.action_space must be a gymnasium \\(or gym\\)"):
        DingEnvAdapter(types.SimpleNamespace(observation_space=gym.spaces.Discrete(2), action_space="left", step=None, reset=None))

    class OldSpaces(CartpoleEnv):
        @property
        def observation_space(self) -> Any:
            return old("Box", low=np.full(4, -np.inf, np.float32), high=np.full(4, np.inf, np.float32), shape=(4,),
                       dtype=np.dtype(np.float32))

    env = DingEnvAdapter(OldSpaces({}))
    assert env.rollout(5)["observation"].shape == (5, 4)


def test_a_ding_env_wrapper_is_stepped_without_the_round_trip_and_gives_the_same_episodes():
    class OwnStep(DingEnvWrapper):  # a subclass with its own step takes the general path
        def step(self, action: Any) -> BaseEnvTimestep:
            return super().step(action)

    def run(make: Any) -> Any:
        env = DingEnvAdapter(make(cfg={"env_id": "Pendulum-v1", "rew_clip": True, "act_scale": True}))
        env.set_seed(3)
        return env.rollout(450, break_when_any_done=False)

    shortcut, general = run(DingEnvWrapper), run(OwnStep)
    assert DingEnvAdapter(DingEnvWrapper(cfg={"env_id": "CartPole-v1"}))._env.step.__name__ == "_step_gymnasium"
    for key in ("observation", ("next", "observation"), ("next", "reward"), ("next", "truncated"), ("next", "done")):
        assert torch.equal(shortcut[key], general[key]), key
    assert shortcut["next", "truncated"].sum() == 2  # two 200-step episodes ended by the time limit

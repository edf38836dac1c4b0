"""StepCounter, InitTracker, TrajCounter, FrameSkipTransform: values, specs, resets."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from cadence.data import Composite, Unbounded
from cadence.envs import EnvBase, GymEnv, ParallelEnv, SerialEnv, check_env_specs
from cadence.envs.custom import PendulumEnv
from cadence.envs.transforms import Compose, TransformedEnv
from cadence.envs.transforms.episode import (
    EndOfLifeTransform,
    FiniteTensorDictCheck,
    FrameSkipTransform,
    InitTracker,
    NoopResetEnv,
    StepCounter,
    TimeMaxPool,
    TrajCounter,
)
from tests.fakes import CountingEnv


def _flat(value: torch.Tensor) -> list:
    return value.squeeze(-1).tolist()


def _check_all_specs(make_transform, make_env=lambda: CountingEnv(max_count=4)) -> None:
    check_env_specs(TransformedEnv(make_env(), make_transform()))
    check_env_specs(TransformedEnv(SerialEnv(2, make_env), make_transform()))
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(make_env(), make_transform())))


def _partial_reset(env, steps: int, mask: list[bool]):
    data = env.reset()
    for _ in range(steps):
        data = env._step_mdp(env.step(env.rand_action(data)))
    data["_reset"] = torch.tensor(mask).unsqueeze(-1)
    return env.reset(data)


def test_step_counter_counts_truncates_and_resets():
    base = CountingEnv(max_count=100)
    env = TransformedEnv(base, StepCounter(max_steps=3))
    data = env.rollout(7, break_when_any_done=False)
    assert _flat(data["next", "step_count"]) == [1, 2, 3, 1, 2, 3, 1]
    assert _flat(data["step_count"]) == [0, 1, 2, 0, 1, 2, 0]
    assert _flat(data["next", "truncated"]) == [False, False, True] * 2 + [False]
    assert _flat(data["next", "done"]) == _flat(data["next", "truncated"])
    assert not data["next", "terminated"].any()
    assert data["next", "step_count"].dtype == torch.int64
    assert "truncated" in env.full_done_spec.keys() and "truncated" not in base.full_done_spec.keys()
    assert "step_count" in env.full_state_spec.keys()
    _check_all_specs(lambda: StepCounter(max_steps=2))


def test_step_counter_options_and_existing_truncated():
    env = TransformedEnv(CountingEnv(max_count=100), StepCounter(max_steps=2, update_done=False))
    data = env.rollout(3)
    assert _flat(data["next", "truncated"]) == [False, True, True]
    assert not data["next", "done"].any()
    env = TransformedEnv(CountingEnv(max_count=100), StepCounter(step_count_key="t", truncated_key="cut"))
    data = env.rollout(4)
    assert _flat(data["next", "t"]) == [1, 2, 3, 4] and not data["next", "cut"].any()
    gym = TransformedEnv(GymEnv("CartPole-v1"), StepCounter(max_steps=2))
    assert list(gym.full_done_spec.keys()) == list(GymEnv("CartPole-v1").full_done_spec.keys())
    assert _flat(gym.rollout(5)["next", "truncated"]) == [False, True]
    with pytest.raises(ValueError, match="max_steps"):
        StepCounter(max_steps=0)


def test_step_counter_partial_reset():
    env = TransformedEnv(SerialEnv(3, lambda: CountingEnv(max_count=100)), StepCounter())
    out = _partial_reset(env, 2, [True, False, False])
    assert _flat(out["step_count"]) == [0, 2, 2]


def test_init_tracker_values_partial_reset_and_specs():
    env = TransformedEnv(CountingEnv(max_count=2), InitTracker())
    data = env.rollout(5, break_when_any_done=False)
    assert _flat(data["is_init"]) == [True, False, True, False, True]
    assert not data["next", "is_init"].any()
    assert env.observation_spec["is_init"].dtype == torch.bool
    batched = TransformedEnv(SerialEnv(3, lambda: CountingEnv(max_count=100)), InitTracker(init_key="first"))
    assert _flat(_partial_reset(batched, 1, [False, True, False])["first"]) == [False, True, False]
    _check_all_specs(InitTracker)


def test_traj_counter_ids_partial_reset_and_sharing():
    env = TransformedEnv(CountingEnv(max_count=2), TrajCounter())
    data = env.rollout(5, break_when_any_done=False)
    assert _flat(data["traj_count"]) == [0, 0, 1, 1, 2]
    assert _flat(data["next", "traj_count"]) == [0, 0, 1, 1, 2]
    batched = TransformedEnv(SerialEnv(3, lambda: CountingEnv(max_count=100)), TrajCounter())
    assert _flat(batched.reset()["traj_count"]) == [0, 1, 2]
    data = batched.reset()  # ids 3, 4, 5
    data["_reset"] = torch.tensor([[False], [True], [False]])
    assert _flat(batched.reset(data)["traj_count"]) == [3, 6, 5]
    # copies share the counter: ids stay unique across envs
    shared = TrajCounter()
    assert shared.traj_count.is_shared()
    envs = SerialEnv(2, [lambda: TransformedEnv(CountingEnv(), shared.clone())] * 2)
    assert _flat(envs.reset()["traj_count"]) == [0, 1]
    assert int(shared.traj_count) == 2
    _check_all_specs(TrajCounter)
    with pytest.raises(KeyError, match="traj_count"):
        env.step(env.rand_action(env.reset().exclude("traj_count")))


def test_frame_skip_sums_rewards_and_stops_at_done():
    env = TransformedEnv(CountingEnv(max_count=10), FrameSkipTransform(frame_skip=3))
    data = env.rollout(10)
    assert _flat(data["next", "count"]) == [3.0, 6.0, 9.0, 10.0]
    assert _flat(data["next", "reward"]) == [3.0, 3.0, 3.0, 1.0]
    assert _flat(data["next", "done"]) == [False, False, False, True]
    _check_all_specs(lambda: FrameSkipTransform(2))
    with pytest.raises(ValueError, match="frame_skip"):
        FrameSkipTransform(0)


def test_frame_skip_stateless_env_and_chain():
    base = PendulumEnv()
    env = TransformedEnv(base, Compose(FrameSkipTransform(2), StepCounter()))
    action = env.rand_action(env.reset())
    skipped = env.step(action.clone())["next"]
    first = base.step(action.clone())["next"]
    manual = first.exclude("reward").set("action", action["action"])
    second = base.step(manual)["next"]
    assert torch.allclose(skipped["th"], second["th"])
    assert torch.allclose(skipped["reward"], first["reward"] + second["reward"])
    assert _flat(skipped["step_count"]) == 1


class LivesEnv(EnvBase):
    """Loses a life every second step; terminates when no life is left."""

    def __init__(self, lives: int = 2) -> None:
        super().__init__()
        self.start = lives
        self.observation_spec = Composite(lives=Unbounded(shape=(1,), dtype=torch.int64))
        self.action_spec = Unbounded(shape=(1,))

    def _reset(self, tensordict):
        self.t = 0
        return TensorDict({"lives": torch.tensor([self.start])}, [])

    def _step(self, tensordict):
        self.t += 1
        lives = torch.tensor([self.start - self.t // 2])
        return TensorDict({"lives": lives, "reward": torch.ones(1), "done": lives <= 0}, [])


class NanEnv(CountingEnv):
    def _step(self, tensordict):
        out = super()._step(tensordict)
        if float(self.count.max()) >= 2:
            out["reward"] = torch.full_like(out["reward"], float("nan"))
        return out


def test_time_max_pool_window_and_specs():
    env = TransformedEnv(PendulumEnv(), TimeMaxPool(in_keys=["th"], out_keys=["th_max"], T=3))
    data = env.rollout(6)
    seen = torch.cat([data["th"][:1], data["next", "th"]])
    expected = [seen[max(0, t - 1) : t + 2].max() for t in range(6)]
    assert torch.allclose(data["next", "th_max"], torch.stack(expected))
    assert torch.equal(data["th_max"][0], data["th"][0])
    _check_all_specs(lambda: TimeMaxPool(in_keys=["count"], T=2))
    with pytest.raises(ValueError, match="T must"):
        TimeMaxPool(T=0)


def test_time_max_pool_resets_clear_history():
    env = TransformedEnv(CountingEnv(max_count=100), TimeMaxPool(in_keys=["count"], out_keys=["m"], T=5))
    env.rollout(3)
    assert _flat(env.rollout(2)["next", "m"]) == [1.0, 2.0]
    batched = TransformedEnv(SerialEnv(2, lambda: CountingEnv(max_count=100)), TimeMaxPool(["count"], ["m"], T=5))
    out = _partial_reset(batched, 3, [True, False])
    assert _flat(out["m"]) == [0.0, 3.0]
    out = batched.step(batched.rand_action(out))
    assert _flat(out["next", "m"]) == [1.0, 4.0]


def test_finite_check_raises_naming_the_key():
    env = TransformedEnv(NanEnv(max_count=100), FiniteTensorDictCheck())
    with pytest.raises(ValueError, match="'reward'"):
        env.rollout(5)
    _check_all_specs(FiniteTensorDictCheck)
    data = TensorDict({"a": {"b": torch.tensor([1.0, float("inf")])}, "i": torch.ones(1, dtype=torch.long)}, [])
    with pytest.raises(ValueError, match="'b'"):
        FiniteTensorDictCheck()(data)


def test_noop_reset_steps_and_seeding():
    env = TransformedEnv(CountingEnv(max_count=100), NoopResetEnv(noops=3, random=False))
    assert _flat(env.reset()["count"]) == 0.0 + 3
    env = TransformedEnv(CountingEnv(max_count=100), NoopResetEnv(noops=5))
    counts = []
    for _ in range(2):
        env.set_seed(3)
        counts.append([env.reset()["count"].item() for _ in range(6)])
    assert counts[0] == counts[1] and all(0 <= c <= 5 for c in counts[0]) and len(set(counts[0])) > 1
    _check_all_specs(lambda: NoopResetEnv(noops=2), lambda: CountingEnv(max_count=100))
    with pytest.raises(RuntimeError, match="lower noops"):
        TransformedEnv(CountingEnv(max_count=2), NoopResetEnv(noops=3, random=False)).reset()
    batched = TransformedEnv(SerialEnv(2, lambda: CountingEnv(max_count=100)), NoopResetEnv(noops=1))
    with pytest.raises(RuntimeError, match="partial resets"):
        _partial_reset(batched, 1, [True, False])


def test_end_of_life_flags_and_specs():
    env = TransformedEnv(LivesEnv(lives=3), EndOfLifeTransform())
    data = env.rollout(10)
    assert _flat(data["next", "end-of-life"]) == [False, True, False, True, False, True]
    assert _flat(data["next", "done"]) == [False] * 5 + [True]
    assert not data["end-of-life"][0] and torch.equal(data["end-of-life"][1:], data["next", "end-of-life"][:-1])
    _check_all_specs(EndOfLifeTransform, LivesEnv)
    with pytest.raises(KeyError, match="lives"):
        TransformedEnv(CountingEnv(), EndOfLifeTransform())


def test_counters_in_parallel_workers():
    shared = TrajCounter()
    env = ParallelEnv(2, [lambda: TransformedEnv(CountingEnv(max_count=2), shared.clone())] * 2)
    try:
        first = env.reset()["traj_count"].flatten().tolist()
        data = env.rollout(5, break_when_any_done=False)
        ids = data["traj_count"].flatten().unique().tolist()
        assert sorted(first) == [0, 1] and sorted(ids) == list(range(2, 8)) and int(shared.traj_count) == 8
    finally:
        env.close()
    env = ParallelEnv(2, lambda: TransformedEnv(CountingEnv(max_count=100), StepCounter(max_steps=3)))
    try:
        check_env_specs(env)
        counts = env.rollout(4, break_when_any_done=False)["next", "step_count"]
        assert counts.squeeze(-1).tolist() == [[1, 2, 3, 1]] * 2
    finally:
        env.close()

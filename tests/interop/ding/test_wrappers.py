"""cadence.interop.ding.wrappers: DI-engine's env preprocessing wrappers, on real ALE games,
classic-control envs and a small gym-hybrid-like env."""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cadence.interop.ding.wrappers import (
    ClipRewardEnv,
    EpisodicLifeEnv,
    FireResetEnv,
    FrameStack,
    GymHybridDictActionWrapper,
    MaxAndSkipEnv,
    NoopResetEnv,
    NoopResetWrapper,
    ObsNormEnv,
    ObsTransposeWrapper,
    RamWrapper,
    RewardNormEnv,
    RunningMeanStd,
    ScaledFloatFrame,
    WarpFrame,
    wrap_deepmind,
)


@pytest.fixture
def ale() -> Any:
    ale_py = pytest.importorskip("ale_py", reason="Atari games need the atari extra: pip install 'cadence[atari]'")
    gym.register_envs(ale_py)
    return ale_py


@pytest.fixture
def cv2() -> Any:
    return pytest.importorskip("cv2", reason="WarpFrame needs the atari extra: pip install 'cadence[atari]'")


def make_game(name: str, **kwargs: Any) -> gym.Env[Any, Any]:
    # frameskip=1 and no sticky actions: every frame is seen and runs are deterministic
    return gym.make(f"ALE/{name}-v5", frameskip=1, repeat_action_probability=0.0, **kwargs)


def frame_number(info: dict[str, Any]) -> int:
    return int(info["episode_frame_number"])


class CountingEnv(gym.Env[np.ndarray, int]):
    """Episodes of ``length`` steps; the observation is the step count in every pixel."""

    observation_space = gym.spaces.Box(0, 255, (2, 2, 3), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, length: int = 3, meanings: list[str] | None = None) -> None:
        self.length, self.meanings = length, meanings or ["NOOP", "FIRE", "UP"]
        self.resets, self.steps, self.t = 0, 0, 0

    def get_action_meanings(self) -> list[str]:
        return self.meanings

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.resets, self.t = self.resets + 1, 0
        return np.zeros((2, 2, 3), np.uint8), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.steps, self.t = self.steps + 1, self.t + 1
        obs = np.full((2, 2, 3), 10 * self.t, np.uint8)
        obs[0, 0, 0] = 200 - self.t  # a pixel that decreases, so the max of two frames differs from both
        return obs, float(self.t), self.t >= self.length, False, {"t": self.t}


# ---------------------------------------------------------------- NoopResetEnv


def test_noop_reset_is_reproducible_with_a_seed_and_differs_with_another(ale: Any) -> None:
    env = NoopResetEnv(make_game("Pong"), noop_max=30)
    assert env.observation_space == env.unwrapped.observation_space and env.action_space == gym.spaces.Discrete(6)
    # the number of no-ops is the wrapper's generator's first draw, seeded by reset(seed=...)
    expected = {seed: int(np.random.default_rng(seed).integers(1, 31)) for seed in (1, 2)}
    assert expected[1] != expected[2]
    obs_1, info_1 = env.reset(seed=1)
    assert frame_number(info_1) == expected[1]
    again, info_again = env.reset(seed=1)
    assert frame_number(info_again) == expected[1] and np.array_equal(obs_1, again)
    _, info_2 = env.reset(seed=2)
    assert frame_number(info_2) == expected[2]
    # unseeded resets continue the seeded generator: reproducible sequences
    rng = np.random.default_rng(2)
    rng.integers(1, 31)
    assert frame_number(env.reset()[1]) == int(rng.integers(1, 31))


def test_noop_reset_resets_again_when_an_episode_ends_during_the_noops() -> None:
    inner = CountingEnv(length=3)
    env = NoopResetEnv(inner, noop_max=30)
    seed = next(s for s in range(100) if np.random.default_rng(s).integers(1, 31) == 10)
    _, info = env.reset(seed=seed)
    # 10 no-ops through episodes of 3 steps: resets after steps 3, 6 and 9, then one more step
    assert inner.steps == 10 and inner.resets == 4 and info == {"t": 1}


def test_noop_reset_refuses_an_env_whose_action_0_is_not_noop() -> None:
    with pytest.raises(ValueError, match=r"action 0 to be 'NOOP'.*\['FIRE', 'NOOP', 'UP'\]"):
        NoopResetEnv(CountingEnv(meanings=["FIRE", "NOOP", "UP"]))
    with pytest.raises(ValueError, match="noop_max must be at least 1, got 0"):
        NoopResetEnv(CountingEnv(), noop_max=0)
    # the DI-engine name is the same class; envs without action meanings are accepted
    assert NoopResetWrapper is NoopResetEnv
    assert NoopResetEnv(gym.make("CartPole-v1"), noop_max=2).reset(seed=0)[0].shape == (4,)


# ---------------------------------------------------------------- MaxAndSkipEnv


def test_max_and_skip_matches_the_max_of_the_last_two_raw_frames(ale: Any) -> None:
    raw, env = make_game("Pong"), MaxAndSkipEnv(make_game("Pong"), skip=4)
    assert env.observation_space == raw.observation_space and env.skip == 4
    raw.reset(seed=0)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    max_differs_from_last, total = False, 0.0
    for _ in range(80):
        action = int(rng.integers(6))
        frames, rewards = [], []
        for _ in range(4):
            frame, reward, terminated, truncated, _ = raw.step(action)
            frames.append(frame)
            rewards.append(reward)
        obs, reward, terminated, truncated, info = env.step(action)
        expected = np.maximum(frames[-2], frames[-1])
        assert np.array_equal(obs, expected) and obs.dtype == np.uint8
        assert reward == sum(rewards) and not terminated and not truncated
        max_differs_from_last |= not np.array_equal(expected, frames[-1])
        total += reward
    assert max_differs_from_last  # the moving ball shows in both frames
    assert total != 0.0  # a point was scored within the 320 frames
    assert frame_number(info) == 320


def test_max_and_skip_stops_at_termination() -> None:
    inner = CountingEnv(length=2)
    env = MaxAndSkipEnv(inner, skip=4)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(0)
    assert inner.steps == 2 and terminated and reward == 1.0 + 2.0 and info == {"t": 2}
    # elementwise: frame 1 has the larger corner pixel, frame 2 the larger rest
    assert obs[0, 0, 0] == 199 and obs[1, 1, 1] == 20
    with pytest.raises(ValueError, match="skip must be at least 1, got 0"):
        MaxAndSkipEnv(inner, skip=0)


# ---------------------------------------------------------------- WarpFrame, ScaledFloatFrame


def test_warp_frame_matches_cv2_on_the_raw_frames(ale: Any, cv2: Any) -> None:
    raw, env = make_game("Pong"), WarpFrame(make_game("Pong"))
    assert env.observation_space == gym.spaces.Box(0, 255, (84, 84), np.uint8)
    raw_obs, _ = raw.reset(seed=0)
    obs, _ = env.reset(seed=0)

    def warp(frame: np.ndarray) -> np.ndarray:
        gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        return cv2.resize(gray, (84, 84), interpolation=cv2.INTER_AREA)

    assert np.array_equal(obs, warp(raw_obs)) and obs.dtype == np.uint8
    for action in [0, 2, 3] * 20:
        raw_obs = raw.step(action)[0]
        obs = env.step(action)[0]
        assert np.array_equal(obs, warp(raw_obs)) and env.observation_space.contains(obs)
    small = WarpFrame(make_game("Pong"), size=42)
    assert small.observation_space.shape == (42, 42) and small.reset(seed=0)[0].shape == (42, 42)


def test_warp_frame_refuses_observations_that_are_not_images(ale: Any, cv2: Any) -> None:
    with pytest.raises(ValueError, match=r"got shape \(4,\)"):
        WarpFrame(gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match=r"got shape \(128,\)"):
        WarpFrame(make_game("Pong", obs_type="ram"))
    with pytest.raises(TypeError, match="Box observation space; got Discrete"):
        WarpFrame(gym.make("FrozenLake-v1"))


def test_warp_frame_names_the_extra_when_opencv_is_missing(monkeypatch: pytest.MonkeyPatch, ale: Any) -> None:
    monkeypatch.setitem(sys.modules, "cv2", None)  # makes `import cv2` fail
    with pytest.raises(ImportError, match=r"cadence\[atari\]"):
        WarpFrame(make_game("Pong"))


def test_scaled_float_frame_divides_frames_by_255(ale: Any) -> None:
    raw, env = make_game("Pong"), ScaledFloatFrame(make_game("Pong"))
    assert env.observation_space == gym.spaces.Box(0.0, 1.0, (210, 160, 3), np.float32)
    raw_obs, obs = raw.reset(seed=0)[0], env.reset(seed=0)[0]
    assert obs.dtype == np.float32 and np.allclose(obs, raw_obs / 255.0, rtol=0, atol=1e-7)
    assert env.observation_space.contains(obs)
    with pytest.raises(ValueError, match="finite bounds"):
        ScaledFloatFrame(gym.make("CartPole-v1"))


# ---------------------------------------------------------------- ClipRewardEnv


def test_clip_reward_keeps_the_sign_of_pong_rewards(ale: Any) -> None:
    raw, env = make_game("Pong"), ClipRewardEnv(make_game("Pong"))
    assert env.reward_range == (-1.0, 1.0) and env.observation_space == raw.observation_space
    raw.reset(seed=0)
    env.reset(seed=0)
    seen = set()
    for _ in range(600):
        raw_reward = raw.step(0)[1]
        reward = env.step(0)[1]
        assert isinstance(reward, float) and reward == np.sign(raw_reward)
        seen.add(reward)
    assert -1.0 in seen and 0.0 in seen  # Pong's opponent scores against a still paddle
    assert (env.reward(7.5), env.reward(-0.25), env.reward(0.0)) == (1.0, -1.0, 0.0)


# ---------------------------------------------------------------- FrameStack, ObsTransposeWrapper


def test_frame_stack_stacks_on_the_first_axis_without_sharing_memory() -> None:
    inner = gym.make("Pendulum-v1")
    env = FrameStack(inner, n_frames=4)
    space = env.observation_space
    assert space.shape == (4, 3) and space.dtype == np.float32
    assert all(np.array_equal(space.low[k], inner.observation_space.low) for k in range(4))
    assert all(np.array_equal(space.high[k], inner.observation_space.high) for k in range(4))
    raw = gym.make("Pendulum-v1")
    first, _ = raw.reset(seed=0)
    obs, _ = env.reset(seed=0)
    assert np.array_equal(obs, np.stack([first] * 4)) and space.contains(obs)
    history = [first] * 4
    previous = obs
    for k in range(6):
        action = np.array([(-1.0) ** k], np.float32)
        history.append(raw.step(action)[0])
        obs = env.step(action)[0]
        assert np.array_equal(obs, np.stack(history[-4:]))
        assert not np.shares_memory(obs, previous)
        previous_copy = previous.copy()
        obs[...] = 99.0  # scribbling on a returned stack changes nothing stored
        assert np.array_equal(previous, previous_copy)
        obs = np.stack(history[-4:])
        previous = obs
    assert np.array_equal(env.step(np.zeros(1, np.float32))[0][:3], np.stack(history[-3:]))
    with pytest.raises(ValueError, match="n_frames must be at least 1"):
        FrameStack(inner, n_frames=0)


def test_obs_transpose_puts_channels_first(ale: Any) -> None:
    raw, env = make_game("Pong"), ObsTransposeWrapper(make_game("Pong"))
    assert env.observation_space == gym.spaces.Box(0, 255, (3, 210, 160), np.uint8)
    raw_obs, obs = raw.reset(seed=0)[0], env.reset(seed=0)[0]
    assert np.array_equal(obs, raw_obs.transpose(2, 0, 1)) and obs.flags.c_contiguous
    # stacked RGB frames (N, H, W, C) -> (N, C, H, W)
    stacked = ObsTransposeWrapper(FrameStack(make_game("Pong"), n_frames=2))
    assert stacked.observation_space.shape == (2, 3, 210, 160)
    assert np.array_equal(stacked.reset(seed=0)[0][1], raw_obs.transpose(2, 0, 1))
    with pytest.raises(ValueError, match=r"got Box.*of shape \(4,\)"):
        ObsTransposeWrapper(gym.make("CartPole-v1"))


def test_obs_transpose_stacks_a_tuple_of_frames_as_di_engine_does() -> None:
    class TwoCameras(gym.Env[tuple, int]):
        observation_space = gym.spaces.Tuple([gym.spaces.Box(0, 255, (4, 5, 3), np.uint8)] * 2)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[tuple, dict]:
            frames = np.arange(2 * 4 * 5 * 3, dtype=np.uint8).reshape(2, 4, 5, 3)
            return (frames[0], frames[1]), {}

        def step(self, action: int) -> tuple[tuple, float, bool, bool, dict]:
            return self.reset()[0], 0.0, False, False, {}

    env = ObsTransposeWrapper(TwoCameras())
    assert env.observation_space == gym.spaces.Box(0, 255, (2, 3, 4, 5), np.uint8)
    obs = env.reset()[0]
    assert obs.shape == (2, 3, 4, 5) and obs[1, 2, 3, 4] == TwoCameras().reset()[0][1][3, 4, 2]


# ---------------------------------------------------------------- ObsNormEnv, RewardNormEnv


def pooled_mean_var(samples: np.ndarray, epsilon: float = 1e-4) -> tuple[np.ndarray, np.ndarray]:
    """The statistics of the samples pooled with the prior (``epsilon`` samples of mean 0, var 1)."""
    n = samples.shape[0]
    mean = samples.sum(axis=0) / (n + epsilon)
    var = (epsilon * (1.0 + mean**2) + ((samples - mean) ** 2).sum(axis=0)) / (n + epsilon)
    return mean, var


def test_obs_norm_normalises_each_feature_after_30_steps() -> None:
    raw, env = gym.make("Pendulum-v1"), ObsNormEnv(gym.make("Pendulum-v1"))
    assert env.observation_space == gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    raw.reset(seed=0)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and env.data_count == 0
    seen = []
    for k in range(60):
        action = np.array([2.0 if (k // 10) % 2 else -2.0], np.float32)
        raw_obs = raw.step(action)[0]
        obs = env.step(action)[0]
        seen.append(raw_obs.astype(np.float64))
        assert obs.dtype == np.float32 and env.observation_space.contains(obs)
        if k < 30:
            assert np.array_equal(obs, raw_obs)
        else:
            mean, var = pooled_mean_var(np.stack(seen))
            expected = np.clip((raw_obs - mean) / (np.sqrt(var) + 1e-4), -3, 3)
            assert np.allclose(obs, expected, atol=1e-5)
    # one sample per observation: each feature has its own mean (DI-engine pools them)
    assert len(set(np.round(env.rms.mean, 6))) == 3
    saved = env.state_dict()
    env.step(np.zeros(1, np.float32))
    env.load_state_dict(saved)
    assert env.data_count == 60 and np.array_equal(env.rms.mean, saved["rms"]["mean"])
    # as in DI-engine, reset starts the statistics afresh
    obs, _ = env.reset(seed=1)
    assert env.data_count == 0 and env.rms.count == pytest.approx(1e-4)
    assert np.array_equal(obs, gym.make("Pendulum-v1").reset(seed=1)[0])


def test_reward_norm_divides_by_the_std_of_the_discounted_return() -> None:
    gamma = 0.9
    raw, env = gym.make("Pendulum-v1"), RewardNormEnv(gym.make("Pendulum-v1"), reward_discount=gamma)
    assert env.reward_range == (-np.inf, np.inf) and env.observation_space == raw.observation_space
    raw.reset(seed=0)
    env.reset(seed=0)
    ret, returns = 0.0, []
    for k in range(50):
        action = np.array([1.5], np.float32)
        raw_reward = float(raw.step(action)[1])
        reward = env.step(action)[1]
        ret = gamma * ret + raw_reward
        returns.append([ret])
        if k < 30:
            assert reward == raw_reward
        else:
            _, var = pooled_mean_var(np.array(returns))
            assert reward == pytest.approx(raw_reward / (np.sqrt(var[0]) + 1e-4), rel=1e-9)
    assert env.cum_reward[0] == pytest.approx(ret)
    saved = env.state_dict()
    env.reset(seed=0)
    assert env.cum_reward[0] == 0.0 and env.data_count == 0 and env.rms.count == pytest.approx(1e-4)
    env.load_state_dict(saved)
    assert env.cum_reward[0] == pytest.approx(ret) and env.data_count == 50


def test_running_mean_std_matches_numpy_and_checks_shapes() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(500, 2))
    rms = RunningMeanStd(shape=(2,), epsilon=0.0 + 1e-12)
    for chunk in np.array_split(data, 7):
        rms.update(chunk)
    assert np.allclose(rms.mean, data.mean(axis=0)) and np.allclose(rms.var, data.var(axis=0))
    with pytest.raises(ValueError, match=r"samples of shape \(2,\); got shape \(3,\)"):
        rms.update(np.zeros(3))


# ---------------------------------------------------------------- RamWrapper


def test_ram_wrapper_gives_the_ram_as_a_128_1_1_float_image(ale: Any) -> None:
    env = RamWrapper(make_game("Pong", obs_type="ram"))
    assert env.observation_space == gym.spaces.Box(0.0, 255.0, (128, 1, 1), np.float32)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and np.array_equal(obs.ravel(), env.unwrapped.ale.getRAM())
    obs = env.step(0)[0]
    assert np.array_equal(obs.ravel(), env.unwrapped.ale.getRAM()) and env.observation_space.contains(obs)
    with pytest.raises(ValueError, match=r"1-D Box.*of shape \(210, 160, 3\)"):
        RamWrapper(make_game("Pong"))


# ---------------------------------------------------------------- EpisodicLifeEnv, FireResetEnv


def test_episodic_life_ends_an_episode_per_life_and_resets_only_at_game_over(ale: Any) -> None:
    env = EpisodicLifeEnv(make_game("Qbert"))
    _, info = env.reset(seed=0)
    assert env.lives == 4 and frame_number(info) == 0
    rng = np.random.default_rng(0)
    episodes = []  # (lives at the end, was_real_done, frame number at the end)
    while True:
        _, _, terminated, truncated, info = env.step(int(rng.integers(6)))
        if terminated or truncated:
            episodes.append((env.lives, env.was_real_done, frame_number(info)))
            if env.was_real_done:
                break
            end_frame = frame_number(info)
            _, info = env.reset()
            # the same game goes on, one no-op frame later, with the lives it had
            assert frame_number(info) == end_frame + 1 and env.lives == episodes[-1][0]
    assert [lives for lives, _, _ in episodes] == [3, 2, 1, 0]
    assert [real for _, real, _ in episodes] == [False, False, False, True]
    _, info = env.reset()
    assert frame_number(info) == 0 and env.lives == 4  # a real reset after game over
    with pytest.raises(TypeError, match="needs an ALE env.*CartPoleEnv"):
        EpisodicLifeEnv(gym.make("CartPole-v1"))


def test_episodic_life_resets_the_game_when_a_seed_is_given(ale: Any) -> None:
    env = EpisodicLifeEnv(make_game("Qbert"))
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    while not env.step(int(rng.integers(6)))[2]:
        pass
    assert env.lives == 3 and not env.was_real_done
    _, info = env.reset(seed=0)  # a seed asks for a fresh game
    assert frame_number(info) == 0 and env.lives == 4


def test_fire_reset_presses_fire_after_reset_on_breakout(ale: Any) -> None:
    raw, env = make_game("Breakout"), FireResetEnv(make_game("Breakout"))
    raw.reset(seed=0)
    expected = raw.step(1)[0]
    obs, info = env.reset(seed=0)
    assert np.array_equal(obs, expected) and frame_number(info) == 1
    assert env.observation_space == raw.observation_space
    with pytest.raises(ValueError, match=r"action 1 to be 'FIRE'.*\['NOOP', 'UP', 'DOWN'\]"):
        FireResetEnv(make_game("Freeway"))
    with pytest.raises(ValueError, match="names its actions.*CartPoleEnv"):
        FireResetEnv(gym.make("CartPole-v1"))


# ---------------------------------------------------------------- the DeepMind chain


def test_the_deepmind_chain_updates_the_space_after_each_wrapper(ale: Any, cv2: Any) -> None:
    raw = make_game("Breakout")
    chain: list[tuple[Any, tuple[int, ...], Any]] = [
        (lambda e: NoopResetEnv(e, noop_max=30), (210, 160, 3), np.uint8),
        (lambda e: MaxAndSkipEnv(e, skip=4), (210, 160, 3), np.uint8),
        (EpisodicLifeEnv, (210, 160, 3), np.uint8),
        (FireResetEnv, (210, 160, 3), np.uint8),
        (WarpFrame, (84, 84), np.uint8),
        (ScaledFloatFrame, (84, 84), np.float32),
        (ClipRewardEnv, (84, 84), np.float32),
        (lambda e: FrameStack(e, n_frames=4), (4, 84, 84), np.float32),
    ]
    env: gym.Env[Any, Any] = raw
    for wrap, shape, dtype in chain:
        env = wrap(env)
        assert env.observation_space.shape == shape and env.observation_space.dtype == dtype
        assert env.observation_space.contains(env.reset(seed=0)[0])
    assert env.action_space == raw.action_space
    assert env.observation_space == wrap_deepmind(make_game("Breakout")).observation_space
    rng = np.random.default_rng(0)
    for _ in range(150):
        obs, reward, terminated, truncated, _ = env.step(int(rng.integers(4)))
        assert env.observation_space.contains(obs) and reward in (-1.0, 0.0, 1.0)
        if terminated or truncated:
            obs = env.reset()[0]


def test_the_rgb_chain_ends_channel_first_with_obs_transpose(ale: Any) -> None:
    env = wrap_deepmind(make_game("Pong"), warp_frame=False, frame_stack=2)
    assert env.observation_space == gym.spaces.Box(0.0, 1.0, (2, 210, 160, 3), np.float32)
    env = ObsTransposeWrapper(env)
    assert env.observation_space == gym.spaces.Box(0.0, 1.0, (2, 3, 210, 160), np.float32)
    obs = env.reset(seed=0)[0]
    assert env.observation_space.contains(obs) and env.observation_space.contains(env.step(0)[0])


# ---------------------------------------------------------------- GymHybridDictActionWrapper


class HybridEnv(gym.Env[np.ndarray, tuple]):
    """gym-hybrid's action layout: Tuple((Discrete(3), Box(-1, 1, (2,)))); it records each action."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (10,), np.float32)
    action_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))

    def __init__(self) -> None:
        self.received: list[Any] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.zeros(10, np.float32), {}

    def step(self, action: tuple) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.received.append(action)
        return np.zeros(10, np.float32), 0.0, False, False, {}


def test_gym_hybrid_dict_action_hands_the_inner_env_its_tuple() -> None:
    inner = HybridEnv()
    env = GymHybridDictActionWrapper(inner)
    assert isinstance(env, gym.ActionWrapper)
    assert set(env.action_space.spaces) == {"action_type", "action_args"}
    assert env.action_space["action_type"] == gym.spaces.Discrete(3)
    assert env.action_space["action_args"] == inner.action_space[1]
    env.reset(seed=0)
    env.step({"action_type": np.int64(1), "action_args": [0.25, -0.5]})
    action_type, action_args = inner.received[-1]
    assert action_type == 1 and isinstance(action_type, int)
    assert action_args.dtype == np.float32 and np.array_equal(action_args, [0.25, -0.5])
    assert inner.action_space.contains(inner.received[-1])
    env.action_space.seed(0)
    sampled = env.action_space.sample()
    env.step(sampled)
    assert inner.received[-1][0] == sampled["action_type"]
    assert np.array_equal(inner.received[-1][1], sampled["action_args"])
    # DI-engine's own wrapper's keys ('mask' ignored)
    env.step({"type": 2, "mask": np.array([0, 0]), "args": np.zeros(2, np.float32)})
    assert inner.received[-1][0] == 2


def test_gym_hybrid_dict_action_names_what_it_expected() -> None:
    env = GymHybridDictActionWrapper(HybridEnv())
    with pytest.raises(KeyError, match=r"'action_type' and 'action_args'.*got \['action_type'\]"):
        env.step({"action_type": 0})
    with pytest.raises(TypeError, match="got tuple"):
        env.step((0, np.zeros(2, np.float32)))
    with pytest.raises(ValueError, match=r"Tuple\(\(Discrete\(n\), Box\(...\)\)\).*got Discrete\(2\)"):
        GymHybridDictActionWrapper(gym.make("CartPole-v1"))

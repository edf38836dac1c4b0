"""DingEnvWrapper on real gymnasium envs: classic control, Box2D, MuJoCo, Atari, hybrid actions."""

from __future__ import annotations

import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from cadence.interop.ding import DingEnvWrapper, check_all, demonstrate_correct_procedure


def play(env: DingEnvWrapper, steps: int) -> list[Any]:
    out = []
    for _ in range(steps):
        timestep = env.step(env.random_action())
        out.append(timestep)
        if timestep.done:
            env.reset()
    return out


@pytest.mark.parametrize(
    "env_id, obs_shape, extra",
    [
        ("CartPole-v1", (4,), None),
        ("Pendulum-v1", (3,), None),
        ("LunarLander-v3", (8,), "Box2D"),
        ("HalfCheetah-v5", (17,), "mujoco"),
    ],
)
def test_real_envs_keep_the_data_rules_and_pass_the_checker(env_id, obs_shape, extra):
    if extra:
        pytest.importorskip(extra, reason=f"{env_id} needs {extra} (the box2d/mujoco extras)")
    env = DingEnvWrapper(cfg={"env_id": env_id})
    assert not env._init_flag  # lazy init
    env.seed(0)
    obs = env.reset()
    assert env._init_flag and obs.dtype == np.float32 and obs.shape == obs_shape
    assert env.observation_space.dtype == np.float32 and env.reward_space.shape == (1,)
    for timestep in play(env, 50):
        assert timestep.obs.dtype == np.float32 and timestep.reward.dtype == np.float32
        assert timestep.reward.shape == (1,) and type(timestep.done) is bool
    check_all(DingEnvWrapper(cfg={"env_id": env_id, "env_kwargs": {"max_episode_steps": 60}}), episodes=2)
    env.close()


def test_eval_episode_return_is_the_python_sum_of_the_rewards():
    env = DingEnvWrapper(cfg={"env_id": "Pendulum-v1"})
    env.seed(3)
    env.reset()
    total, done = 0.0, False
    while not done:
        timestep = env.step(env.random_action())
        total += float(timestep.reward[0])
        done = timestep.done
    assert type(timestep.info["eval_episode_return"]) is float
    assert timestep.info["eval_episode_return"] == pytest.approx(total, rel=1e-5)
    assert timestep.info["TimeLimit.truncated"] is True  # Pendulum ends by its time limit


def test_seeds_static_for_evaluators_dynamic_for_collectors():
    def first_obs(dynamic: bool, seed: int = 7) -> list[list[float]]:
        env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
        env.seed(seed, dynamic_seed=dynamic)
        return [env.reset().tolist() for _ in range(3)]

    static = first_obs(False)
    assert static[0] == static[1] == static[2]
    dynamic = first_obs(True)
    assert dynamic[0] != dynamic[1] and dynamic == first_obs(True)
    assert first_obs(True, seed=8) != dynamic


def test_discrete_actions_as_int64_arrays_ints_or_dicts_and_act_scale():
    env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
    env.reset()
    for action in (np.array([1]), 1, np.int64(0)):
        assert env.step(action).obs.shape == (4,)
    with pytest.raises(TypeError, match="action must be an ndarray, an int or a dict"):
        env.step([1])

    seen = []

    class Recorder(gym.ActionWrapper):
        def action(self, action: Any) -> Any:
            seen.append(np.array(action))
            return action

    scaled = DingEnvWrapper(cfg={"env_id": "Pendulum-v1", "act_scale": True, "env_wrapper": [Recorder]})
    scaled.reset()
    scaled.step(np.array([1.0], np.float32))
    scaled.step(np.array([-0.5], np.float32))
    assert seen[0].tolist() == [2.0] and seen[1].tolist() == [-1.0]  # [-1, 1] onto [-2, 2]


def test_a_given_env_is_ready_at_once_and_spaces_of_a_lazy_one_make_it():
    given = DingEnvWrapper(gym.make("CartPole-v1"))
    assert given._init_flag and given.action_space == gym.spaces.Discrete(2)
    lazy = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
    assert not lazy._init_flag
    assert lazy.observation_space.shape == (4,) and lazy._init_flag
    with pytest.raises(KeyError, match="needs a gymnasium env or cfg\\['env_id'\\]"):
        DingEnvWrapper(cfg={})
    with pytest.raises(TypeError, match="wraps a gymnasium.Env"):
        DingEnvWrapper(object())
    with pytest.raises(RuntimeError, match="before the first reset"):
        DingEnvWrapper(cfg={"env_id": "CartPole-v1"}).step(np.array([0]))
    with pytest.raises(ValueError, match="'retro' is not a preset"):
        DingEnvWrapper(cfg={"env_id": "CartPole-v1", "env_wrapper": "retro"}).reset()


def test_discrete_and_dict_observations_follow_the_contract():
    env = DingEnvWrapper(cfg={"env_id": "FrozenLake-v1"})
    env.seed(0)
    obs = env.reset()
    assert obs.dtype == np.int64 and obs.shape == (1,)
    check_all(DingEnvWrapper(cfg={"env_id": "FrozenLake-v1"}))


def test_create_env_cfgs_and_the_correct_procedure():
    cfgs = DingEnvWrapper.create_collector_env_cfg({"collector_env_num": 2, "env_id": "CartPole-v1"})
    envs = [DingEnvWrapper(cfg=cfg) for cfg in cfgs]
    assert [env._cfg["is_train"] for env in envs] == [True, True]
    demonstrate_correct_procedure(lambda cfg: DingEnvWrapper(cfg={"env_id": "CartPole-v1", **cfg}))


def test_enable_save_replay_writes_one_video_per_episode(tmp_path):
    pytest.importorskip("imageio_ffmpeg", reason="videos need the video extra")
    env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
    env.seed(413)
    env.enable_save_replay(str(tmp_path / "replay_video"))
    env.reset()
    episodes = 0
    while episodes < 2:
        if env.step(env.random_action()).done:
            episodes += 1
            env.reset()
    env.close()
    names = sorted(os.listdir(tmp_path / "replay_video"))
    assert len(names) == 2 and names[0].endswith("-episode-0.mp4") and names[1].endswith("-episode-1.mp4")
    given = DingEnvWrapper(gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        given.enable_save_replay(str(tmp_path))


def test_atari_default_preset_on_pong():
    ale_py = pytest.importorskip("ale_py", reason="Atari needs the atari extra")
    pytest.importorskip("cv2", reason="Atari frames need the atari extra (opencv)")
    del ale_py
    train = DingEnvWrapper(cfg={"env_id": "PongNoFrameskip-v4", "env_wrapper": "atari_default", "is_train": True})
    train.seed(0)
    obs = train.reset()
    assert obs.shape == (4, 84, 84) and obs.dtype == np.float32 and 0.0 <= obs.min() <= obs.max() <= 1.0
    assert train.observation_space.shape == (4, 84, 84)
    rewards = {float(t.reward[0]) for t in play(train, 300)}
    assert rewards <= {-1.0, 0.0, 1.0}
    evaluate = DingEnvWrapper(cfg={"env_id": "PongNoFrameskip-v4", "env_wrapper": "atari_default", "is_train": False})
    evaluate.reset()
    assert "EpisodicLifeEnv" not in str(evaluate._env) and "EpisodicLifeEnv" in str(train._env)
    assert "ClipRewardEnv" not in str(evaluate._env)


def test_gym_hybrid_default_preset_gives_dict_actions():
    class Hybrid(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
        action_space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(2), {}

        def step(self, action: tuple) -> tuple:
            kind, args = action
            assert isinstance(kind, int) and args.shape == (2,)
            self.t += 1
            return np.clip(args, -1, 1).astype(np.float64), float(kind), self.t >= 5, False, {}

    env = DingEnvWrapper(Hybrid(), cfg={"env_wrapper": "gym_hybrid_default"})
    assert set(env.action_space.spaces) == {"action_type", "action_args"}
    env.seed(0)
    env.reset()
    action = env.random_action()
    assert action["action_type"].dtype == np.int64 and action["action_type"].shape == (1,)
    timestep = env.step(action)
    assert timestep.obs.dtype == np.float32 and timestep.reward[0] == float(action["action_type"][0])
    check_all(DingEnvWrapper(Hybrid(), cfg={"env_wrapper": "gym_hybrid_default"}))


def test_di_engines_signature_seed_api_caller_rew_clip_and_clone():
    no_seed = DingEnvWrapper(cfg={"env_id": "CartPole-v1"}, seed_api=False)
    no_seed.seed(0, dynamic_seed=False)
    assert no_seed.reset().tolist() != no_seed.reset().tolist()  # the env's own seeding
    evaluate = DingEnvWrapper(cfg={"env_id": "CartPole-v1", "env_wrapper": "default"}, caller="evaluator")
    assert evaluate._wrapper_chain() == []
    with pytest.raises(ValueError, match="caller must be"):
        DingEnvWrapper(cfg={"env_id": "CartPole-v1"}, caller="learner")

    class Punishing(gym.RewardWrapper):
        def reward(self, reward: float) -> float:
            return -100.0

    clipped = DingEnvWrapper(cfg={"env_id": "CartPole-v1", "rew_clip": True, "env_wrapper": [Punishing]})
    clipped.reset()
    assert clipped.step(np.array([0])).reward.tolist() == [-10.0]
    twin = clipped.clone("evaluator")
    assert twin._cfg == clipped._cfg and twin._cfg is not clipped._cfg and not twin._init_flag
    given = DingEnvWrapper(gym.make("CartPole-v1"))
    assert given.clone()._env is not given._env

"""Tests for cadence/trainers/environments.py: which env a config names, and its errors."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import gymnasium
import pytest
import torch

from cadence.collectors import SyncDataCollector
from cadence.trainers.config import ConfigError, TrainConfig
from cadence.trainers.environments import (
    check_env_name,
    episode_step_limit,
    import_env_module,
    is_dm_control,
    make_env,
)


def test_gymnasium_envs_stay_on_the_collector_fast_path() -> None:
    env = make_env(TrainConfig(), seed=0)
    assert SyncDataCollector(env, frames_per_batch=10).uses_fast_path
    batched = make_env(TrainConfig(max_episode_steps=30), seed=0, num_envs=2)
    assert batched.batch_size == torch.Size([2])
    assert SyncDataCollector(batched, frames_per_batch=10).uses_fast_path
    data = batched.rollout(40, break_when_any_done=False)
    assert data["next", "truncated"][:, 29].all() and not data["next", "done"][:, :29].any()


def test_seeded_envs_repeat() -> None:
    a = make_env(TrainConfig(), seed=3).rollout(5)
    b = make_env(TrainConfig(), seed=3).rollout(5)
    c = make_env(TrainConfig(), seed=4).rollout(5)
    assert torch.equal(a["observation"], b["observation"]) and not torch.equal(a["observation"], c["observation"])


def test_step_limits() -> None:
    assert episode_step_limit(TrainConfig()) == 200
    assert episode_step_limit(TrainConfig(env="HalfCheetah-v5")) == 1000
    assert episode_step_limit(TrainConfig(max_episode_steps=77)) == 77


def test_rendering_env_writes_pixels() -> None:
    data = make_env(TrainConfig(), seed=0, render=True).rollout(2)
    assert data["pixels"].dtype == torch.uint8 and data["pixels"].shape[-1] == 3


def test_unknown_envs_name_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"^unknown env 'Pendulum-v9'; did you mean Pendulum-v1.*valid gymnasium ids: "
                                          r"Acrobot-v1, .*Pendulum-v1"):
        check_env_name("Pendulum-v9")
    with pytest.raises(ConfigError, match="env module 'no_such_module' cannot be imported"):
        check_env_name("no_such_module:Thing-v0")


def test_module_prefixed_ids_register_user_envs(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("user_envs_for_test")

    def register() -> None:
        gymnasium.register("UserPendulum-v0", entry_point="gymnasium.envs.classic_control:PendulumEnv",
                           max_episode_steps=50)

    monkeypatch.setitem(sys.modules, "user_envs_for_test", module)
    register()
    try:
        check_env_name("user_envs_for_test:UserPendulum-v0")
        config = TrainConfig(env="user_envs_for_test:UserPendulum-v0")
        assert episode_step_limit(config) == 50
        assert make_env(config, seed=0).rollout(60)["next", "truncated"][-1].all()
    finally:
        gymnasium.registry.pop("UserPendulum-v0", None)


def test_dm_control_tasks() -> None:
    pytest.importorskip("dm_control", reason="dm_control tasks need the dm_control extra")
    assert is_dm_control("cheetah/run") and not is_dm_control("phys2d/CartPole-v1")
    env = make_env(TrainConfig(env="cheetah/run"), seed=0)
    data = env.rollout(3)
    assert data["observation"].shape == (3, 17) and data["observation"].dtype == torch.float32
    assert episode_step_limit(TrainConfig(env="cheetah/run")) == 1000
    with pytest.raises(ConfigError, match=r"^unknown dm_control task 'cheetah/walk'; valid tasks: acrobot/swingup"):
        check_env_name("cheetah/walk")


def test_unknown_envs_stay_one_readable_line_with_atari_registered() -> None:
    ale_py = pytest.importorskip("ale_py", reason="ale-py registers hundreds of ids (the atari extra)")
    import gymnasium

    gymnasium.register_envs(ale_py)
    with pytest.raises(ConfigError) as caught:
        check_env_name("Pendulum-v9")
    message = str(caught.value)
    assert "valid gymnasium ids: Acrobot-v1, " in message and "Pendulum-v1" in message
    assert "ALE/Pong-v5" not in message and "more from other packages" in message and len(message) < 3000


def test_an_env_module_is_found_in_the_current_folder_for_its_import_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cwd_envs_for_test.py").write_text(
        "import gymnasium\n"
        "gymnasium.register('CwdPendulum-v0', entry_point='gymnasium.envs.classic_control:PendulumEnv')\n"
    )
    monkeypatch.chdir(tmp_path)
    path = list(sys.path)
    try:
        check_env_name("cwd_envs_for_test:CwdPendulum-v0")  # the console script does not search "." by itself
        assert "cwd_envs_for_test" in sys.modules and sys.path == path
    finally:
        sys.modules.pop("cwd_envs_for_test", None)
        gymnasium.registry.pop("CwdPendulum-v0", None)


@pytest.mark.parametrize("module", ["", ".evil", "..", "a/b", "os.path/../x", "a..b", "1st"])
def test_an_env_module_must_be_a_module_name(module: str) -> None:
    with pytest.raises(ConfigError, match=f"^env module {re.escape(repr(module))} is not a module name"):
        import_env_module(module)


def test_an_env_module_that_fails_to_import_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_envs_for_test.py").write_text("raise RuntimeError('no licence server\\nat line 2')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^env module 'broken_envs_for_test' cannot be imported: RuntimeError: "
                                          r"no licence server$"):
        check_env_name("broken_envs_for_test:X-v0")

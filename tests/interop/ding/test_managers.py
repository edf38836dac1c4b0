"""DI-engine's env managers (BaseEnvManager, SyncSubprocessEnvManager, AsyncSubprocessEnvManager),
through their public API: the step loop, auto-reset, episode limits, seeds, reset params,
retries, timeouts, dying and abnormal envs, configs, and what happens after close.

Every test is bounded (a hang dumps the stacks and ends the run) and must leave no worker
process behind.
"""

from __future__ import annotations

import faulthandler
import functools
import multiprocessing
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from easydict import EasyDict

from cadence.interop.ding.data import BaseEnvTimestep, deep_merge_dicts
from cadence.interop.ding.managers import BaseEnvManager, EnvManagerError, EnvState
from cadence.interop.ding.subprocess_managers import AsyncSubprocessEnvManager, SyncSubprocessEnvManager
from tests.interop.ding.ding_envs import (
    AbnormalEnv,
    CartPoleEnv,
    CountingEnv,
    DyingEnv,
    FlakyResetEnv,
    RaisingStepEnv,
    StuckResetEnv,
    StuckStepEnv,
)

ALL = [BaseEnvManager, SyncSubprocessEnvManager, AsyncSubprocessEnvManager]
SUBPROCESS = [SyncSubprocessEnvManager, AsyncSubprocessEnvManager]
MANAGER_NAMES = tuple(cls.__name__ for cls in SUBPROCESS)


@pytest.fixture(autouse=True)
def _bounded_and_clean() -> Iterator[None]:
    faulthandler.dump_traceback_later(60, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
    left = [p for p in multiprocessing.active_children() if p.name.startswith(MANAGER_NAMES)]
    assert not left, f"worker processes left behind: {left}"


def fns(env_cls: type, n: int = 2, **cfg: Any) -> list[Callable[[], Any]]:
    return [functools.partial(env_cls, cfg) for _ in range(n)]


def make(cls: type, env_fns: list[Callable[[], Any]], **cfg: Any) -> BaseEnvManager:
    # the async manager waits for every env here, so that the shared tests see whole steps;
    # test_async_* cover its partial steps
    if cls is AsyncSubprocessEnvManager:
        cfg = {"wait_num": len(env_fns), "step_wait_timeout": None, **cfg}
    return cls(env_fns, cfg)


def gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def pids_of(manager: BaseEnvManager) -> list[int | None]:
    return list(manager.pids) if isinstance(manager, AsyncSubprocessEnvManager) else []


# ---------------------------------------------------------------------------------------
# The step loop
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL)
def test_launch_step_and_auto_reset_keep_the_terminal_obs(cls: type) -> None:
    with make(cls, fns(CountingEnv, 2, length=3)) as manager:
        assert manager.closed and manager.env_states == {0: EnvState.VOID, 1: EnvState.VOID}
        manager.launch()
        assert manager.ready_obs_id == [0, 1] and manager.active_env == [0, 1]
        assert [obs[0] for obs in manager.ready_obs.values()] == [0.0, 0.0]
        for t in (1, 2):
            timesteps = manager.step({0: 1, 1: 1})
            assert [ts.obs[0] for ts in timesteps.values()] == [t, t]
            assert not any(ts.done for ts in timesteps.values())
            assert manager.ready_obs[0][0] == t
        timesteps = manager.step({0: 1, 1: 1})
        assert all(isinstance(ts, BaseEnvTimestep) for ts in timesteps.values())
        final = timesteps[0]
        assert final.done and final.obs[0] == 3.0 and final.info["eval_episode_return"] == 3.0
        assert manager.ready_obs[0][0] == 0.0  # the new episode's first obs
        assert manager.env_states[0] == EnvState.RUN
        partial = manager.step({1: 0})  # stepping some envs only
        assert list(partial) == [1] and manager.ready_obs[1][0] == 1.0 and manager.ready_obs[0][0] == 0.0


@pytest.mark.parametrize("cls", ALL)
def test_episode_num_stops_each_env_and_done_follows(cls: type) -> None:
    with make(cls, fns(CountingEnv, 2, length=2), episode_num=2) as manager:
        manager.launch()
        steps = {0: 0, 1: 0}
        returns = []
        while not manager.done:
            for env_id, ts in manager.step({i: 0 for i in manager.ready_obs_id}).items():
                steps[env_id] += 1
                if ts.done:
                    returns.append(ts.info["eval_episode_return"])
        assert steps == {0: 4, 1: 4} and returns == [2.0] * 4
        assert manager.ready_obs == {} and manager.env_state_done(0) and manager.env_state_done(1)
        with pytest.raises(ValueError, match=r"env 0 cannot act: its state is DONE"):
            manager.step({0: 0})
        manager.reset()  # DI-engine: a reset brings DONE envs back, episode counts kept
        assert manager.ready_obs_id == [0, 1]


@pytest.mark.parametrize("cls", ALL)
def test_without_auto_reset_an_ended_env_waits_for_reset(cls: type) -> None:
    with make(cls, fns(CountingEnv, 2, length=1), auto_reset=False) as manager:
        manager.launch()
        timesteps = manager.step({0: 0, 1: 0})
        assert all(ts.done for ts in timesteps.values())
        assert manager.env_states == {0: EnvState.NEED_RESET, 1: EnvState.NEED_RESET} and manager.ready_obs == {}
        with pytest.raises(ValueError, match=r"NEED_RESET .*reset\(\{1: None\}\)"):
            manager.step({1: 0})
        manager.reset({1: None})
        assert manager.ready_obs_id == [1]


# ---------------------------------------------------------------------------------------
# Seeds, reset params, replays
# ---------------------------------------------------------------------------------------


def first_obs_draws(cls: type, seed: Any, dynamic_seed: bool | None, episodes: int = 3) -> list[list[float]]:
    """The ``draw`` of each episode's first observation, per env."""
    with make(cls, fns(CountingEnv, 2, length=1)) as manager:
        manager.seed(seed, dynamic_seed=dynamic_seed)
        manager.launch()
        draws = [[float(obs[1])] for obs in manager.ready_obs.values()]
        for _ in range(episodes - 1):
            manager.step({0: 0, 1: 0})
            for env_id, obs in manager.ready_obs.items():
                draws[env_id].append(float(obs[1]))
    return draws


@pytest.mark.parametrize("cls", ALL)
def test_seeds_static_and_dynamic_reproduce(cls: type) -> None:
    static = first_obs_draws(cls, 7, dynamic_seed=False)
    assert all(len(set(env)) == 1 for env in static)  # the same seed every episode
    assert static[0][0] != static[1][0]  # env i gets seed + i
    assert static[1][0] == first_obs_draws(cls, 8, dynamic_seed=False)[0][0]
    dynamic = first_obs_draws(cls, 7, dynamic_seed=True)
    assert all(len(set(env)) == 3 for env in dynamic)
    assert dynamic == first_obs_draws(cls, 7, dynamic_seed=True)
    assert first_obs_draws(cls, [7, 8], dynamic_seed=True) == dynamic
    assert first_obs_draws(cls, 9, dynamic_seed=True) != dynamic


def test_the_three_managers_give_the_same_seeded_episodes() -> None:
    runs = [first_obs_draws(cls, 3, dynamic_seed=True) for cls in ALL]
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("cls", ALL)
def test_seed_arguments_are_checked(cls: type) -> None:
    manager = make(cls, fns(CountingEnv, 2))
    with pytest.raises(ValueError, match=r"one per env \(2\), got 3"):
        manager.seed([1, 2, 3])
    with pytest.raises(ValueError, match=r"env ids are 0..1, got 5"):
        manager.seed({5: 1})
    with pytest.raises(TypeError, match=r"seed must be an int"):
        manager.seed(1.5)
    manager.seed({1: 4}, dynamic_seed=False)  # a dict seeds some envs only
    manager.launch()
    assert manager.ready_obs[1][1] == first_obs_draws(BaseEnvManager, [0, 4], dynamic_seed=False)[1][0]
    manager.close()


@pytest.mark.parametrize("cls", ALL)
def test_reset_param_is_used_and_kept_for_auto_resets(cls: type) -> None:
    with make(cls, fns(CountingEnv, 2, length=2)) as manager:
        with pytest.raises(ValueError, match=r"every env id 0..1 .*missing \[1\]"):
            manager.launch({0: {"start": 5}})
        with pytest.raises(TypeError, match=r"reset_param\[1\] must be a dict"):
            manager.launch({0: None, 1: 5})
        manager.launch({0: {"start": 5}, 1: None})
        assert [obs[0] for obs in manager.ready_obs.values()] == [5.0, 0.0]
        manager.step({0: 0, 1: 0})
        timesteps = manager.step({0: 0, 1: 0})
        assert timesteps[0].done and timesteps[0].obs[0] == 7.0
        assert manager.ready_obs[0][0] == 5.0  # the auto-reset used the kept kwargs
        manager.reset({1: {"start": 2}})
        assert [obs[0] for obs in manager.ready_obs.values()] == [5.0, 2.0]
        with pytest.raises(ValueError, match=r"env ids are 0..1, got 3"):
            manager.reset({3: None})


@pytest.mark.parametrize("cls", ALL)
def test_replay_paths_reach_the_envs(cls: type) -> None:
    with make(cls, fns(CountingEnv, 2)) as manager:
        with pytest.raises(ValueError, match=r"one per env \(2\); got 1"):
            manager.enable_save_replay(["a"])
        manager.enable_save_replay(["a", "b"])
        manager.launch()
        assert manager.replay_path == ["a", "b"]


# ---------------------------------------------------------------------------------------
# Retries
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("retry_type", ["reset", "renew"])
@pytest.mark.parametrize("cls", ALL)
def test_max_retry_recovers_a_flaky_reset(cls: type, retry_type: str, tmp_path: Path) -> None:
    counter = tmp_path / "resets"
    env_fns = [functools.partial(FlakyResetEnv, {"counter": str(counter), "fail_on": (2, 3)})]
    env_fns.append(functools.partial(CountingEnv, {}))
    with make(cls, env_fns, max_retry=3, retry_type=retry_type, retry_waiting_time=0.01) as manager:
        manager.enable_save_replay("videos")
        manager.seed(11, dynamic_seed=False)
        manager.launch()  # attempt 1 succeeds
        token, pids, draw = manager.token[0], pids_of(manager), manager.ready_obs[0][1]
        manager.reset({0: None})  # attempts 2 and 3 fail, 4 succeeds
        assert counter.read_text() == "4" and manager.ready_obs_id == [0, 1]
        if retry_type == "reset":
            assert manager.token[0] == token and manager.resets[0] == 4 and pids_of(manager) == pids
        else:  # a fresh env: new object (and process), with the replay path and seed of the old one
            assert manager.token[0] != token and manager.resets[0] == 1
            assert manager.replay_path[0] == "videos" and manager.ready_obs[0][1] == draw
            if pids:
                new = pids_of(manager)
                assert new[0] != pids[0] and gone(pids[0]) and new[1] == pids[1]


@pytest.mark.parametrize("cls", ALL)
def test_a_failed_auto_reset_is_retried_and_exhaustion_closes(cls: type, tmp_path: Path) -> None:
    def flaky(name: str) -> list[Callable[[], Any]]:
        return [functools.partial(FlakyResetEnv, {"counter": str(tmp_path / name), "fail_on": (2,), "length": 1})]

    with make(cls, flaky("a"), max_retry=2, retry_waiting_time=0.01) as manager:
        manager.launch()
        assert manager.step({0: 0})[0].done  # its auto-reset fails once, the retry works
        assert manager.ready_obs_id == [0] and (tmp_path / "a").read_text() == "3"
    manager = make(cls, flaky("b"), max_retry=1)
    manager.launch()
    with pytest.raises(EnvManagerError, match=r"env 0: reset failed on all 1 attempt\(s\).*attempt 2") as info:
        manager.step({0: 0})
    assert info.value.timesteps[0].done and manager.closed


@pytest.mark.parametrize("cls", ALL)
def test_a_reset_that_always_fails_raises_and_closes(cls: type, tmp_path: Path) -> None:
    env_fns = fns(FlakyResetEnv, 2, counter=str(tmp_path / "resets"), fail_on="all")
    manager = make(cls, env_fns, max_retry=3, retry_type="renew", retry_waiting_time=0.01)
    with pytest.raises(EnvManagerError, match=r"env 0: reset failed on all 3 attempt\(s\).*flaky reset") as info:
        manager.launch()
    assert info.value.env_id == 0 and info.value.method == "reset"
    assert manager.closed and all(pid is None for pid in pids_of(manager))
    with pytest.raises(RuntimeError, match=r"is closed"):
        _ = manager.ready_obs


# ---------------------------------------------------------------------------------------
# Timeouts, dying envs, failing steps, abnormal timesteps
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL)
def test_a_stuck_step_times_out(cls: type) -> None:
    env_fns = [functools.partial(StuckStepEnv, {"stuck_at": 2}), functools.partial(CountingEnv, {"length": 9})]
    with make(cls, env_fns, step_timeout=0.5) as manager:
        manager.launch()
        manager.step({0: 0, 1: 0})
        pids = pids_of(manager)
        started = time.monotonic()
        with pytest.raises(EnvManagerError, match=r"env 0: step gave no .*step_timeout=0.5 s") as info:
            manager.step({0: 0, 1: 0})
        assert time.monotonic() - started < 5
        assert info.value.env_id == 0 and list(info.value.timesteps) == [1]
        assert manager.env_states[0] == EnvState.ERROR and manager.ready_obs_id == [1]
        if pids:
            assert gone(pids[0]) and not gone(pids[1])
        manager.reset({0: None})  # a fresh worker where the old one was killed
        assert manager.ready_obs_id == [0, 1]
        if pids:
            assert pids_of(manager)[0] != pids[0]
        manager.step({0: 0, 1: 0})


@pytest.mark.parametrize("cls", ALL)
def test_a_stuck_reset_times_out(cls: type) -> None:
    manager = make(cls, fns(StuckResetEnv, 2), reset_timeout=0.3, max_retry=2, retry_waiting_time=0.01)
    started = time.monotonic()
    with pytest.raises(EnvManagerError, match=r"env 0: reset failed on all 2 attempt\(s\)"):
        manager.launch()
    assert time.monotonic() - started < 10
    assert manager.closed


@pytest.mark.parametrize("cls", SUBPROCESS)
def test_a_dying_env_is_named_and_can_be_reset(cls: type) -> None:
    env_fns = [functools.partial(DyingEnv, {}), functools.partial(CountingEnv, {"length": 9})]
    with make(cls, env_fns) as manager:
        manager.launch()
        pids = pids_of(manager)
        with pytest.raises(EnvManagerError, match=r"env 0: its worker process died during step \(exit code 3\)") as info:
            manager.step({0: 0, 1: 0})
        assert list(info.value.timesteps) == [1] and gone(pids[0])
        assert manager.ready_obs_id == [1]
        with pytest.raises(ValueError, match=r"env 0 cannot act: its state is ERROR"):
            manager.step({0: 0})
        manager.reset({0: None})
        assert manager.ready_obs_id == [0, 1] and pids_of(manager)[0] != pids[0]


@pytest.mark.parametrize("cls", ALL)
def test_a_raising_step_is_named_and_the_others_go_on(cls: type) -> None:
    env_fns = [functools.partial(RaisingStepEnv, {}), functools.partial(CountingEnv, {"length": 9})]
    with make(cls, env_fns) as manager:
        manager.launch()
        with pytest.raises(EnvManagerError, match=r"env 0: step raised ValueError: bad step 1") as info:
            manager.step({0: 0, 1: 0})
        assert info.value.method == "step" and list(info.value.timesteps) == [1]
        assert manager.ready_obs_id == [1] and manager.ready_obs[1][0] == 1.0
        manager.step({1: 0})
        manager.reset({0: None})
        assert manager.ready_obs_id == [0, 1]


@pytest.mark.parametrize("cls", ALL)
def test_an_abnormal_env_is_excluded_until_reset(cls: type) -> None:
    env_fns = [functools.partial(AbnormalEnv, {}), functools.partial(CountingEnv, {"length": 9})]
    with make(cls, env_fns, episode_num=1) as manager:
        manager.launch()
        timesteps = manager.step({0: 0, 1: 0})
        assert timesteps[0].info["abnormal"] and not timesteps[1].done
        assert manager.env_states[0] == EnvState.ERROR and manager.ready_obs_id == [1]
        assert not manager.done  # an abnormal episode is not counted
        manager.step({1: 0})
        manager.reset({0: None})
        assert manager.ready_obs_id == [0, 1]
        assert manager.step({0: 0})[0].obs[0] == 1.0


# ---------------------------------------------------------------------------------------
# The async manager's partial steps
# ---------------------------------------------------------------------------------------


def test_async_returns_the_envs_that_answered_and_collects_the_rest_later() -> None:
    env_fns = [
        functools.partial(CountingEnv, {"length": 50}),
        functools.partial(StuckStepEnv, {"length": 50, "stuck_at": 1, "seconds": 0.5}),
    ]
    with AsyncSubprocessEnvManager(env_fns, {"wait_num": 1, "step_wait_timeout": 0.0}) as manager:
        manager.launch()
        timesteps = manager.step({0: 0, 1: 0})  # env 1 sleeps 0.5 s in this step
        assert list(timesteps) == [0] and manager.stepping_env == [1]
        assert manager.ready_obs_id == [0] and manager.active_env == [0, 1]
        with pytest.raises(ValueError, match=r"env 1 cannot act: .*has not come back yet"):
            manager.step({1: 0})
        with pytest.raises(RuntimeError, match=r"envs \[1\], whose steps have not come back"):
            _ = manager.token
        collected: dict[int, Any] = {}
        while 1 not in collected:
            collected.update(manager.step({}))
        assert manager.ready_obs_id == [0, 1] and collected[1].obs[0] == 1.0
        for _ in range(3):  # whichever envs are ready
            manager.step({i: 0 for i in manager.ready_obs_id})
        manager.reset()  # drains whatever is still out
        assert manager.stepping_env == [] and manager.ready_obs_id == [0, 1]


def test_async_step_timeout_counts_from_the_send() -> None:
    env_fns = [
        functools.partial(CountingEnv, {"length": 50}),
        functools.partial(StuckStepEnv, {"length": 50, "stuck_at": 1}),
    ]
    with AsyncSubprocessEnvManager(env_fns, {"wait_num": 1, "step_wait_timeout": 0.0, "step_timeout": 0.4}) as manager:
        manager.launch()
        stuck_pid = manager.pids[1]
        assert list(manager.step({0: 0, 1: 0})) == [0]
        with pytest.raises(EnvManagerError, match=r"env 1: step gave no reply"):
            while True:
                manager.step({0: 0})
        assert gone(stuck_pid) and manager.env_states[1] == EnvState.ERROR
        while manager.stepping_env:  # env 0's last step may still be out
            manager.step({})
        assert manager.ready_obs_id == [0]


# ---------------------------------------------------------------------------------------
# Config, attributes, close
# ---------------------------------------------------------------------------------------

BASE_KEYS = {
    "episode_num", "max_retry", "retry_type", "auto_reset", "step_timeout", "reset_timeout",
    "retry_waiting_time", "cfg_type",
}
SUBPROCESS_KEYS = BASE_KEYS | {
    "shared_memory", "copy_on_get", "context", "wait_num", "step_wait_timeout", "connect_timeout", "reset_inplace",
}


@pytest.mark.parametrize("cls", ALL)
def test_default_config_has_di_engines_keys_and_merges(cls: type) -> None:
    cfg = cls.default_config()
    assert isinstance(cfg, EasyDict) and cfg.cfg_type == f"{cls.__name__}Dict"
    assert set(cfg) == (BASE_KEYS if cls is BaseEnvManager else SUBPROCESS_KEYS)
    assert cfg.episode_num == float("inf") and cfg.max_retry == 1 and cfg.retry_type == "reset"
    assert cfg.auto_reset is True and cfg.step_timeout is None and cfg.retry_waiting_time == 0.1
    if cls is SyncSubprocessEnvManager:
        assert cfg.wait_num == float("inf") and cfg.step_wait_timeout is None
    if cls is AsyncSubprocessEnvManager:
        assert cfg.wait_num == 2 and cfg.step_wait_timeout == 0.01 and cfg.connect_timeout == 60
    cfg.max_retry = 5
    assert cls.default_config().max_retry == 1  # a copy each time
    for user in ({"episode_num": 1}, EasyDict(episode_num=1), deep_merge_dicts(cls.default_config(), {"episode_num": 1})):
        with make(cls, fns(CountingEnv, 1, length=1), **user) as manager:
            manager.launch()
            manager.step({0: 0})
            assert manager.done
    with pytest.raises(ValueError, match=r"retry_type must be 'reset' .*got 'again'"):
        cls(fns(CountingEnv, 1), {"retry_type": "again"})
    with pytest.raises(ValueError, match=r"step_timeout must be None .*got -1"):
        cls(fns(CountingEnv, 1), {"step_timeout": -1})
    with pytest.raises(TypeError, match=r"cfg must be a dict or an EasyDict"):
        cls(fns(CountingEnv, 1), [("episode_num", 1)])
    with pytest.raises(TypeError, match=r"env_fn must be a non-empty list"):
        cls([], {})


@pytest.mark.parametrize("cls", ALL)
def test_env_ref_spaces_and_attributes(cls: type) -> None:
    with make(cls, fns(CountingEnv, 2, length=4)) as manager:
        assert isinstance(manager.env_ref, CountingEnv) and not manager.env_ref._init_flag
        assert manager.observation_space.shape == (2,) and manager.action_space.n == 2
        assert manager.reward_space.shape == (1,)
        with pytest.raises(RuntimeError, match=r"not launched: length is not available; call launch\(\) first"):
            _ = manager.length
        manager.launch()
        assert manager.length == [4, 4]
        with pytest.raises(AttributeError, match=r"no attribute 'nothing'"):
            _ = manager.nothing
        with pytest.raises(RuntimeError, match=r"'episode_seed' is not in method_name_list"):
            _ = manager.episode_seed
        assert sorted(manager.random_action()) == [0, 1]


@pytest.mark.parametrize("cls", ALL)
def test_every_call_after_close_raises(cls: type) -> None:
    manager = make(cls, fns(CountingEnv, 2))
    with pytest.raises(RuntimeError, match=r"not launched: step is not available"):
        manager.step({0: 0})
    manager.launch()
    with pytest.raises(RuntimeError, match=r"is launched already"):
        manager.launch()
    pids = pids_of(manager)
    manager.close()
    manager.close()
    assert all(gone(pid) for pid in pids)
    for call in (
        lambda: manager.step({0: 0}),
        lambda: manager.reset(),
        lambda: manager.ready_obs,
        lambda: manager.ready_obs_id,
        lambda: manager.random_action(),
        lambda: manager.length,
        lambda: manager.reward_shaping(0, []),
    ):
        with pytest.raises(RuntimeError, match=rf"{cls.__name__} is closed: .* launch\(\) it again"):
            call()
    manager.launch()  # DI-engine: a closed manager may be launched again
    assert manager.ready_obs_id == [0, 1]
    manager.close()


def test_cartpole_in_subprocesses_follows_di_engines_data_rules() -> None:
    with SyncSubprocessEnvManager(fns(CartPoleEnv, 2), {"episode_num": 2}) as manager:
        manager.seed(0)
        manager.launch()
        rng = np.random.default_rng(0)
        ended = 0
        while not manager.done:
            actions = {i: np.array([rng.integers(2)], np.int64) for i in manager.ready_obs_id}
            for ts in manager.step(actions).values():
                assert ts.obs.dtype == np.float32 and ts.reward.shape == (1,) and type(ts.done) is bool
                if ts.done:
                    ended += 1
                    assert ts.info["eval_episode_return"] > 0
        assert ended == 4


def test_cadence_and_gymnasium_envs_in_the_subprocess_managers() -> None:
    """as_ding_env (a Cadence env) and DingEnvWrapper (a gymnasium env) under both subprocess managers."""
    import functools

    from cadence.envs import GymEnv
    from cadence.interop.ding import AsyncSubprocessEnvManager, DingEnvWrapper, SyncSubprocessEnvManager, as_ding_env

    fns = [
        functools.partial(as_ding_env, functools.partial(GymEnv, "CartPole-v1")),
        functools.partial(DingEnvWrapper, None, {"env_id": "CartPole-v1"}),
    ]
    for cls in (SyncSubprocessEnvManager, AsyncSubprocessEnvManager):
        with make(cls, fns, episode_num=2) as manager:
            manager.seed(0)
            manager.launch()
            returns = []
            while not manager.done:
                actions = {i: np.array([i % 2]) for i in manager.ready_obs}
                for timestep in manager.step(actions).values():
                    assert timestep.obs.dtype == np.float32 and timestep.reward.shape == (1,)
                    if timestep.done:
                        returns.append(timestep.info["eval_episode_return"])
            pids = manager.pids
        assert len(returns) == 4 and all(type(r) is float and r > 0 for r in returns)
        assert all(gone(pid) for pid in pids)


@pytest.mark.parametrize("cls,key", [
    (cls, key) for cls in ALL for key in ("step_timeout", "reset_timeout", "retry_waiting_time")
] + [(cls, key) for cls in ALL if cls is not BaseEnvManager for key in ("connect_timeout", "step_wait_timeout")])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), 10.0**9])
def test_timeouts_that_are_not_finite_or_beyond_a_day_are_refused_at_construction(cls: type, key: str,
                                                                                    value: float) -> None:
    started = []
    with pytest.raises(ValueError, match=rf"{cls.__name__} config: {key} must be .*seconds in .*86400\], got "
                                         rf"{re.escape(repr(value))}"):
        cls([lambda: started.append(1)], {key: value})
    assert started == []  # no env was made, no worker started

"""DI-engine compatibility and speed: Cadence's ``cadence.interop.ding`` against the real DI-engine 0.5.3.

Four parts, each check printed with PASS/FAIL (or INFO: an informative row, no target), its
numbers and the python (virtual environment) that made them:

1. Cadence -> DI-engine: Cadence envs (``GymEnv`` CartPole-v1 and Pendulum-v1) through
   ``as_ding_env`` pass DI-engine's own ``check_all`` and run in DI-engine's own
   ``BaseEnvManager`` and ``SyncSubprocessEnvManager`` (fork, and spawn, which pickles the
   env factories): launch, seed, a few hundred steps of ``random_action()``, episodes that end
   with ``info["eval_episode_return"]``, close.
2. DI-engine -> Cadence: dizoo's ``CartPoleEnv`` (dizoo's DQN config) and a small env written
   here against the real ``ding.envs.BaseEnv`` through ``DingEnvAdapter`` as they are (their gym
   0.25 spaces rebuilt as gymnasium spaces by the adapter): ``check_env_specs``, then
   ``ParallelEnv(2, ...)`` in a ``SyncDataCollector`` with a small ``QValueActor``.
3. Speed of ``SyncSubprocessEnvManager``, 2 envs, pre-drawn random actions: DI-engine's own
   manager against Cadence's (``from cadence.interop.ding import SyncSubprocessEnvManager``),
   both in the DI-engine venv (so the env class is the same), env steps/s over ``--seconds``
   after a warm-up, best of ``--rounds`` alternating rounds, one fresh process per round. With
   dizoo's CartPole envs, target: Cadence >= 3x DI-engine. Informative rows: the same in both
   managers with ``LeanCartPoleEnv`` (``ding.envs.BaseEnv`` over gymnasium's CartPole-v1, doing
   only what the contract asks), and the floor: Cadence's ``WorkerPool`` with 2 workers whose
   ``step`` does nothing (send to both, receive both), calls/s against DI-engine's dizoo
   ``manager.step`` calls/s.
4. Cost of ``DingEnvAdapter``. Target, in the main .venv: ``ParallelEnv(2,
   DingEnvAdapter(DingEnvWrapper(CartPole-v1)))`` against ``ParallelEnv(2, GymEnv("CartPole-v1"))``
   on the paths users take: ``rollout(N)`` with no policy (the chunked fast path), a
   ``SyncDataCollector`` with a small policy, and a manual ``step_and_maybe_reset`` loop with
   random actions; adapter time / GymEnv time <= 1.2 on each path. Informative: the same with
   a hand-written env (``cadence.interop.ding.BaseEnv`` over gymnasium's CartPole-v1, its own
   conversions its cost); and, in the DI-engine venv, in one process, dizoo's ``CartPoleEnv``
   (gym 0.25's CartPole-v0): the adapter's rollout against a bare loop over the same env
   ("adapter overhead") and that bare loop against ``GymEnv("CartPole-v0")`` ("dizoo env vs
   gymnasium"). Best of ``--rounds`` alternating rounds.

DI-engine pins gym 0.25 and numpy < 2, so it lives in its own venv (``benchmarks/ding-venv.sh``
builds it once and prints its python; Cadence is installed there editable, so it runs this
working tree). The parts that need ``ding`` run this file again with that python and an
internal ``--part`` flag; each prints one JSON line that this process reads. Nothing is fetched
at run time.

Usage::

    .venv/bin/python benchmarks/ding_compat.py                        # all parts, 5 s x 3 rounds (about 4 min)
    .venv/bin/python benchmarks/ding_compat.py --seconds 2 --rounds 1 --parts 1,2
    .venv/bin/python benchmarks/ding_compat.py --ding-python ~/.cache/cadence-ding-venv/bin/python
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # only for the annotations: the parent process never imports torch or ding
    # (ding is imported at module level only where it is installed: see LeanCartPoleEnv)
    import gymnasium
    import torch
    from cadence.envs import EnvBase

ROOT = Path(__file__).resolve().parent.parent
MARKER = "DING_COMPAT_JSON "  # prefixes the one result line of a part (ding logs to stdout too)
MANAGER_STEPS = 300  # manager.step calls per env manager check in part 1
MANAGER_WARMUP = 300  # manager.step calls before the timing in part 3
SPEED_TARGET = 3.0  # part 3: Cadence's manager at least this many times DI-engine's
ADAPTER_TARGET = 1.2  # part 4: the adapter takes at most 20% more time than GymEnv

Check = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# Helpers shared by the parts


def _check(name: str, body: Callable[[], dict[str, Any]]) -> Check:
    """Runs one check; a raised exception is a FAIL with its traceback, never the end of the part."""
    start = time.perf_counter()
    try:
        numbers = body()
        ok = bool(numbers.pop("ok", True))
        error = numbers.pop("error", None)
    except Exception:  # noqa: BLE001 - every failure is reported, with its traceback
        numbers, ok, error = {}, False, traceback.format_exc()
    numbers["wall_s"] = round(time.perf_counter() - start, 2)
    return {"name": name, "ok": ok, "numbers": numbers, "error": error}


def _skip(name: str, why: str) -> Check:
    return {"name": name, "ok": None, "numbers": {}, "error": why}


def _versions() -> dict[str, str]:
    """The versions that matter to the numbers, of this python."""
    out = {"python": platform.python_version()}
    for module in ("torch", "numpy", "gymnasium", "gym", "tensordict", "ding"):
        with contextlib.suppress(Exception):
            out[module] = str(__import__(module).__version__)
    return out


@contextlib.contextmanager
def _quiet() -> Iterator[io.StringIO]:
    """Keeps what DI-engine prints (check_all's stage lines) off the stdout that carries the JSON."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        yield buffer


def _settle_before_close(manager: Any, limit_s: float = 5.0) -> None:
    """Waits (at most ``limit_s``) until no env of a subprocess manager is still resetting.

    DI-engine's own race: after a done step its subprocess managers reset that env in a
    background thread, and ``close()`` does not wait for it, so the child can get the reset's
    message after ``close`` and exit with it unread; the parent's ``recv`` then raises
    ``ConnectionResetError`` (seen with dizoo's own CartPoleEnv: 2 closes in 30 right after a
    done step, with ``shared_memory=False``). Waiting here keeps that out of the measurements.
    """
    reset = 3  # EnvState.RESET, in DI-engine and in Cadence's managers alike (an IntEnum)
    deadline = time.perf_counter() + limit_s
    states = getattr(manager, "_env_states", None)
    while states and any(int(state) == reset for state in states.values()) and time.perf_counter() < deadline:
        time.sleep(0.001)


def _import_cadence_managers() -> tuple[Any, Any, str]:
    """Cadence's v1 env managers, as ``cadence.interop.ding`` exports them (ImportError if not)."""
    from cadence.interop.ding import BaseEnvManager, SyncSubprocessEnvManager

    return BaseEnvManager, SyncSubprocessEnvManager, "cadence.interop.ding"


def _small_policy(env: EnvBase, seed: int) -> Any:
    """A greedy ``QValueActor`` over a 32-unit MLP, its weights drawn from a ``torch.Generator``."""
    import torch
    from cadence.modules import MLP, QValueActor

    obs_dim = env.observation_spec["observation"].shape[-1]
    num_actions = env.action_spec.shape[-1]
    net = MLP(in_features=obs_dim, out_features=num_actions, num_cells=[32])
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.3)
    return QValueActor(net, spec=env.action_spec)


# ---------------------------------------------------------------------------------------------
# Env factories: module-level functions, so that functools.partial of them pickles (spawn)


def make_cadence_gym(env_id: str) -> Any:
    """``as_ding_env`` over a lazily made Cadence ``GymEnv``: a DI-engine env from Cadence."""
    from cadence.envs import GymEnv
    from cadence.interop.ding import as_ding_env

    return as_ding_env(functools.partial(GymEnv, env_id))


def dizoo_cartpole_cfg() -> Any:
    """The env section of dizoo's own CartPole DQN config (an EasyDict), as dizoo's entry passes it."""
    from dizoo.classic_control.cartpole.config.cartpole_dqn_config import main_config

    return type(main_config.env)(dict(main_config.env))


def make_dizoo_cartpole() -> Any:
    """dizoo's ``CartPoleEnv`` (gym 0.25's CartPole-v0, made at the first reset)."""
    from dizoo.classic_control.cartpole.envs import CartPoleEnv

    return CartPoleEnv(dizoo_cartpole_cfg())


@functools.cache
def _walk_env_class() -> type:
    """A small env written as a DI-engine user writes one: ``ding.envs.BaseEnv``, gym spaces.

    A noisy walk on a line: the action moves left, stays or moves right; the episode ends when
    the walker leaves [-5, 5] (a termination) or after ``max_steps`` (a truncation, flagged as
    gym's TimeLimit does). Seeds follow DI-engine's convention (``seed + 100 * k`` per episode for
    dynamic seeds), drawn from a numpy Generator rather than DI-engine's global ``np.random``.
    Made lazily: the base class needs ``ding``, which only the DI-engine venv has.
    """
    import gym  # gym 0.25, as DI-engine's own envs use it
    from ding.envs import BaseEnv, BaseEnvTimestep

    class WalkEnv(BaseEnv):
        def __init__(self, cfg: dict[str, Any]) -> None:
            self._cfg = cfg
            self._max_steps = int(cfg.get("max_steps", 50))
            self._init_flag = False
            self._seed: int | None = None
            self._dynamic_seed = True
            self._seed_rng = np.random.default_rng(0)
            self._rng = np.random.default_rng(0)
            self._observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
            self._action_space = gym.spaces.Discrete(3)
            self._reward_space = gym.spaces.Box(-1.0, 0.0, (1,), np.float32)

        @property
        def observation_space(self) -> gym.spaces.Space:
            return self._observation_space

        @property
        def action_space(self) -> gym.spaces.Space:
            return self._action_space

        @property
        def reward_space(self) -> gym.spaces.Space:
            return self._reward_space

        def seed(self, seed: int, dynamic_seed: bool = True) -> None:
            self._seed, self._dynamic_seed = seed, dynamic_seed
            self._seed_rng = np.random.default_rng(seed)

        def reset(self) -> np.ndarray:
            self._init_flag = True
            if self._seed is not None:
                offset = 100 * int(self._seed_rng.integers(1, 1000)) if self._dynamic_seed else 0
                self._rng = np.random.default_rng(self._seed + offset)
            self._position, self._steps, self._eval_episode_return = 0.0, 0, 0.0
            return self._obs()

        def _obs(self) -> np.ndarray:
            noise = self._rng.uniform(-1.0, 1.0)
            return np.array([self._position / 5.0, self._steps / self._max_steps, noise], np.float32)

        def step(self, action: np.ndarray) -> Any:
            move = int(np.asarray(action).reshape(())) - 1
            self._position += move + self._rng.normal(0.0, 0.3)
            self._steps += 1
            reward = -min(abs(self._position) / 5.0, 1.0)
            self._eval_episode_return += reward
            terminated = abs(self._position) >= 5.0
            truncated = not terminated and self._steps >= self._max_steps
            info: dict[str, Any] = {}
            if terminated or truncated:
                info["eval_episode_return"] = self._eval_episode_return
                if truncated:
                    info["TimeLimit.truncated"] = True
            self._position = float(np.clip(self._position, -5.0, 5.0))
            return BaseEnvTimestep(self._obs(), np.array([reward], np.float32), terminated or truncated, info)

        def random_action(self) -> np.ndarray:
            return np.array([self._rng.integers(0, 3)], np.int64)

        def close(self) -> None:
            self._init_flag = False

        def __repr__(self) -> str:
            return f"WalkEnv(max_steps={self._max_steps})"

    return WalkEnv


def make_walk_env(max_steps: int = 50) -> Any:
    """The small ``ding.envs.BaseEnv`` env of :func:`_walk_env_class`."""
    from easydict import EasyDict

    return _walk_env_class()(EasyDict({"max_steps": max_steps}))


#: gymnasium's CartPole-v1 observation bounds (x, x', theta, theta'), as a user copies them
CARTPOLE_HIGH = np.array([4.8, np.inf, 12 * 2 * np.pi / 360 * 2, np.inf], np.float32)


@functools.cache
def _handmade_env_class() -> type:
    """A DI-engine env written by hand over gymnasium's CartPole-v1, on Cadence's ``BaseEnv``.

    What a user writes to the contract (part 4): the gymnasium env made at the first reset,
    episodes seeded with ``episode_seed()``, float32 copies of the observations,
    ``to_ndarray([rew], np.float32)`` rewards, a Python bool ``done`` and
    ``info["eval_episode_return"]`` at done (``"TimeLimit.truncated"`` at a truncation). Made
    lazily: ``cadence.interop.ding`` imports torch, which the parent process never does.
    """
    import gymnasium
    from cadence.interop.ding import BaseEnv, BaseEnvTimestep, to_ndarray

    class HandmadeCartPoleEnv(BaseEnv):
        def __init__(self, cfg: dict[str, Any] | None = None) -> None:
            self._cfg = {} if cfg is None else cfg
            self._init_flag = False
            self.observation_space = gymnasium.spaces.Box(-CARTPOLE_HIGH, CARTPOLE_HIGH, (4,), np.float32)
            self.action_space = gymnasium.spaces.Discrete(2)
            self.reward_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)

        def reset(self) -> np.ndarray:
            if not self._init_flag:
                self._env = gymnasium.make("CartPole-v1")
                self._init_flag = True
            obs, _ = self._env.reset(seed=self.episode_seed())
            self._eval_episode_return = 0.0
            return obs.astype(np.float32)

        def step(self, action: np.ndarray) -> Any:
            obs, rew, terminated, truncated, info = self._env.step(int(action.item()))
            self._eval_episode_return += rew
            done = bool(terminated or truncated)
            if done:
                info["eval_episode_return"] = self._eval_episode_return
                if truncated and not terminated:
                    info["TimeLimit.truncated"] = True
            return BaseEnvTimestep(obs.astype(np.float32), to_ndarray([rew], np.float32), done, info)

        def close(self) -> None:
            if self._init_flag:
                self._env.close()
            self._init_flag = False

        def __repr__(self) -> str:
            return "HandmadeCartPoleEnv(CartPole-v1)"

    return HandmadeCartPoleEnv


def make_handmade_adapter() -> Any:
    """Part 4's hand-written env (:func:`_handmade_env_class`) through ``DingEnvAdapter``."""
    from cadence.interop.ding import DingEnvAdapter

    return DingEnvAdapter(_handmade_env_class()())


# Part 3's lean env, in both managers: a class at module level, so that it pickles by reference.
# It subclasses the real ``ding.envs.BaseEnv``, so it exists only where ``ding`` is installed
# (the DI-engine venv; ``find_spec`` imports nothing, so the main .venv's parent never imports
# ding or torch).
if importlib.util.find_spec("ding") is not None:
    import gymnasium
    from ding.envs import BaseEnv as DingBaseEnv
    from ding.envs import BaseEnvTimestep as DingBaseEnvTimestep

    class LeanCartPoleEnv(DingBaseEnv):
        """A lean DI-engine env over gymnasium's CartPole-v1 on ``ding.envs.BaseEnv``.

        Does what the contract asks and nothing more: the gymnasium env made at the first
        reset, DI-engine's seeds (``seed + 100 * k`` per episode for dynamic seeds, drawn from
        a numpy Generator), float32 observations, ``np.array([r], np.float32)`` rewards, a
        Python bool ``done``, ``info["eval_episode_return"]`` at done.
        """

        def __init__(self, cfg: dict[str, Any] | None = None) -> None:
            self._cfg = {} if cfg is None else cfg
            self._init_flag = False
            self._seed: int | None = None
            self._dynamic_seed = True
            self._seed_rng = np.random.default_rng(0)
            self._observation_space = gymnasium.spaces.Box(-CARTPOLE_HIGH, CARTPOLE_HIGH, (4,), np.float32)
            self._action_space = gymnasium.spaces.Discrete(2)
            self._reward_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)

        @property
        def observation_space(self) -> gymnasium.spaces.Space:
            return self._observation_space

        @property
        def action_space(self) -> gymnasium.spaces.Space:
            return self._action_space

        @property
        def reward_space(self) -> gymnasium.spaces.Space:
            return self._reward_space

        def seed(self, seed: int, dynamic_seed: bool = True) -> None:
            self._seed, self._dynamic_seed = seed, dynamic_seed
            self._seed_rng = np.random.default_rng(seed)

        def reset(self) -> np.ndarray:
            if not self._init_flag:
                self._env = gymnasium.make("CartPole-v1")
                self._init_flag = True
            seed = None
            if self._seed is not None:
                seed = self._seed + (100 * int(self._seed_rng.integers(1, 1000)) if self._dynamic_seed else 0)
            obs, _ = self._env.reset(seed=seed)
            self._eval_episode_return = 0.0
            return obs.astype(np.float32)

        def step(self, action: np.ndarray) -> DingBaseEnvTimestep:
            obs, rew, terminated, truncated, info = self._env.step(int(action.item()))
            self._eval_episode_return += rew
            done = bool(terminated or truncated)
            if done:
                info["eval_episode_return"] = self._eval_episode_return
            return DingBaseEnvTimestep(obs.astype(np.float32), np.array([rew], np.float32), done, info)

        def random_action(self) -> np.ndarray:
            return np.array([self._action_space.sample()], np.int64)

        def close(self) -> None:
            if self._init_flag:
                self._env.close()
            self._init_flag = False

        def __repr__(self) -> str:
            return "LeanCartPoleEnv(CartPole-v1)"


def make_lean_cartpole() -> Any:
    """Part 3's :class:`LeanCartPoleEnv` (DI-engine venv only)."""
    return LeanCartPoleEnv()


class NoOpStep:
    """Part 3's floor: the object a ``WorkerPool`` worker serves; its ``step`` does nothing."""

    def step(self) -> None:
        return None


def make_adapter(make_ding_env: Callable[[], Any]) -> Any:
    """``DingEnvAdapter`` over a freshly made DI-engine env (gym 0.25 spaces and all)."""
    from cadence.interop.ding import DingEnvAdapter

    return DingEnvAdapter(make_ding_env())


def make_cadence_wrapper_adapter() -> Any:
    """Part 4's adapter in the main .venv: Cadence's own ``DingEnvWrapper`` of CartPole-v1."""
    from cadence.interop.ding import DingEnvAdapter, DingEnvWrapper

    return DingEnvAdapter(DingEnvWrapper(cfg={"env_id": "CartPole-v1"}))


def make_gym_env(env_id: str) -> Any:
    from cadence.envs import GymEnv

    return GymEnv(env_id)


# ---------------------------------------------------------------------------------------------
# Part 1: Cadence envs in DI-engine


def _check_timestep_data(timestep: Any, space: Any) -> str | None:
    """What is wrong with a timestep against the contract (None if nothing)."""
    obs, reward, done, info = timestep
    if not (isinstance(obs, np.ndarray) and obs.dtype == space.dtype and obs.shape == space.shape):
        return f"obs {type(obs).__name__} {getattr(obs, 'dtype', '')} {getattr(obs, 'shape', '')} vs {space}"
    if not (isinstance(reward, np.ndarray) and reward.shape == (1,) and reward.dtype == np.float32):
        return f"reward {reward!r}"
    if type(done) is not bool or type(info) is not dict:
        return f"done {done!r} ({type(done).__name__}), info {type(info).__name__}"
    if done and "eval_episode_return" not in info:
        return f"done without eval_episode_return: {info}"
    return None


def _run_manager(manager_cls: Any, env_id: str, context: str | None) -> dict[str, Any]:
    """Launch, seed, ``MANAGER_STEPS`` steps of ``random_action()``, close; what it saw."""
    env_fn = [functools.partial(make_cadence_gym, env_id) for _ in range(2)]
    cfg = manager_cls.default_config()
    if context is not None:
        cfg.context = context
    if context == "spawn":
        # DI-engine's own limit, with any env: its shared-memory buffers are made in the default
        # (fork) context, and a spawned child refuses their locks (RuntimeError: "A SemLock created
        # in a fork context is being shared with a process in a spawn context")
        cfg.shared_memory = False
    sampler = make_cadence_gym(env_id)  # random_action() in the contract's types, seeded, own RNG
    sampler.seed(0)
    sampler.reset()
    manager = manager_cls(env_fn=env_fn, cfg=cfg)
    manager.seed(0)
    start = time.perf_counter()
    manager.launch()
    launch_s = time.perf_counter() - start
    returns: list[float] = []
    env_steps, problem = 0, None
    start = time.perf_counter()
    for _ in range(MANAGER_STEPS):
        ready = manager.ready_obs
        timesteps = manager.step({env_id_: sampler.random_action() for env_id_ in ready})
        env_steps += len(timesteps)
        for timestep in timesteps.values():
            problem = problem or _check_timestep_data(timestep, sampler.observation_space)
            if timestep.done:
                returns.append(float(timestep.info["eval_episode_return"]))
    step_s = time.perf_counter() - start
    _settle_before_close(manager)
    manager.close()
    closed = bool(manager.closed)
    sampler.close()
    return {
        "ok": bool(returns) and closed and problem is None,
        "error": problem if problem else (None if returns and closed else f"episodes {len(returns)}, closed {closed}"),
        "env_steps": env_steps,
        "episodes": len(returns),
        "mean_return": round(float(np.mean(returns)), 1) if returns else None,
        "steps_per_s": round(env_steps / step_s),
        "launch_s": round(launch_s, 2),
        "closed": closed,
    }


def part_to_ding(args: argparse.Namespace) -> list[Check]:
    from ding.envs import BaseEnvManager, SyncSubprocessEnvManager
    from ding.envs.env import check_all

    checks: list[Check] = []

    def run_check_all(env_id: str) -> dict[str, Any]:
        env = make_cadence_gym(env_id)
        with _quiet() as printed:
            check_all(env)  # DI-engine's own checker: dtypes, reset, 3 episodes of step, deep copies
        stages = sum(line.startswith("==") for line in printed.getvalue().splitlines())
        spaces = f"obs {env.observation_space}, act {env.action_space}, rew {env.reward_space}"
        env.close()
        return {"stages_passed": stages, "spaces": spaces}

    for env_id in ("CartPole-v1", "Pendulum-v1"):
        name = f"ding check_all(as_ding_env(GymEnv({env_id!r})))"
        checks.append(_check(name, functools.partial(run_check_all, env_id)))
    for env_id in ("CartPole-v1", "Pendulum-v1"):
        checks.append(
            _check(
                f"ding BaseEnvManager x2 as_ding_env({env_id})",
                functools.partial(_run_manager, BaseEnvManager, env_id, None),
            )
        )
        checks.append(
            _check(
                f"ding SyncSubprocessEnvManager x2 (fork) as_ding_env({env_id})",
                functools.partial(_run_manager, SyncSubprocessEnvManager, env_id, "fork"),
            )
        )
    # spawn pickles env_fn: functools.partial of module-level functions must travel
    checks.append(
        _check(
            "ding SyncSubprocessEnvManager x2 (spawn, no shared memory) as_ding_env(CartPole-v1)",
            functools.partial(_run_manager, SyncSubprocessEnvManager, "CartPole-v1", "spawn"),
        )
    )
    return checks


# ---------------------------------------------------------------------------------------------
# Part 2: DI-engine envs in Cadence


def _collect(make_env: Callable[[], Any], batches: int, frames_per_batch: int) -> dict[str, Any]:
    """``ParallelEnv(2, make_env)`` in a ``SyncDataCollector`` with a small policy: what came out."""
    import torch
    from cadence.collectors import SyncDataCollector
    from cadence.envs import ParallelEnv

    env = ParallelEnv(2, make_env)
    env.set_seed(0)
    policy = _small_policy(env, seed=0)
    collector = SyncDataCollector(
        env, policy, frames_per_batch=frames_per_batch, total_frames=batches * frames_per_batch
    )
    frames, episodes, shapes = 0, 0, None
    start = time.perf_counter()
    for batch in collector:
        frames += batch.numel()
        if shapes is None:
            shapes = [list(batch.batch_size), list(batch["next", "reward"].shape), str(batch["observation"].dtype)]
        done = batch["next", "done"].squeeze(-1)
        episodes += int(done.sum())
        assert torch.isfinite(batch["observation"]).all(), "non-finite observations"
        assert bool((batch["action"].sum(-1) == 1).all()), "actions are not one-hot"
    elapsed = time.perf_counter() - start
    collector.shutdown()
    if not env.is_closed:
        env.close()
    return {
        "batches": batches,
        "frames": frames,
        "episodes_ended": episodes,
        "batch/reward shape, obs dtype": shapes,
        "frames_per_s": round(frames / elapsed),
        "ok": frames == batches * frames_per_batch and episodes > 0,
    }


def part_from_ding(args: argparse.Namespace) -> list[Check]:
    from cadence.envs import check_env_specs

    checks: list[Check] = []
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("dizoo CartPoleEnv(dqn config)", make_dizoo_cartpole),
        ("WalkEnv(ding.envs.BaseEnv)", make_walk_env),
    ]
    for label, make_ding_env in cases:
        make_env = functools.partial(make_adapter, make_ding_env)

        def as_it_is(make_ding_env: Callable[[], Any] = make_ding_env) -> dict[str, Any]:
            """The env with its own gym 0.25 spaces, which the adapter rebuilds as gymnasium spaces."""
            from cadence.interop.ding import DingEnvAdapter

            ding_env = make_ding_env()
            spaces_from = type(ding_env.observation_space).__module__.split(".")[0]
            env = DingEnvAdapter(ding_env)
            out = {
                "env's spaces": spaces_from,
                "observation_spec": type(env.observation_spec["observation"]).__name__,
                "action_spec": type(env.action_spec).__name__,
            }
            env.close()
            return out

        def specs(make_env: Callable[[], Any] = make_env) -> dict[str, Any]:
            env = make_env()
            check_env_specs(env, seed=0)
            out = {
                "action_spec": type(env.action_spec).__name__,
                "obs_shape": list(env.observation_spec["observation"].shape),
            }
            env.close()
            return out

        checks.append(_check(f"DingEnvAdapter({label}) as it is", as_it_is))
        checks.append(_check(f"check_env_specs(DingEnvAdapter({label}))", specs))
        checks.append(
            _check(
                f"ParallelEnv(2, DingEnvAdapter({label})) + SyncDataCollector(QValueActor)",
                functools.partial(_collect, make_env, 3, 200),
            )
        )
    return checks


# ---------------------------------------------------------------------------------------------
# Part 3: SyncSubprocessEnvManager speed (one contender, one round, per process)


MANAGER_ENVS: dict[str, tuple[str, Callable[[], Any]]] = {
    "dizoo": ("dizoo CartPoleEnv", make_dizoo_cartpole),
    "lean": ("LeanCartPoleEnv", make_lean_cartpole),
}


def _measure_floor(args: argparse.Namespace) -> dict[str, Any]:
    """``WorkerPool`` with 2 workers serving :class:`NoOpStep`: send to both, receive both, calls/s."""
    from cadence.envs.workers import WorkerPool

    start = time.perf_counter()
    pool = WorkerPool([NoOpStep, NoOpStep], name="floor").start()
    launch_s = time.perf_counter() - start
    indices = range(pool.num_workers)

    def call() -> None:
        for i in indices:
            pool.send(i, "step")
        for i in indices:
            pool.recv(i)

    for _ in range(MANAGER_WARMUP):
        call()
    calls = 0
    clock = time.perf_counter
    start = clock()
    deadline = start + args.seconds
    while clock() < deadline:
        call()
        calls += 1
    elapsed = clock() - start
    start = clock()
    pool.close()
    return {
        "manager": f"cadence.envs.workers.WorkerPool ({pool.start_method})",
        "steps_per_s": 2 * calls / elapsed,
        "calls_per_s": calls / elapsed,
        "launch_s": round(launch_s, 2),
        "close_s": round(clock() - start, 3),
    }


def part_manager_speed(args: argparse.Namespace) -> list[Check]:
    who = args.who
    if who == "floor":
        return [_check("floor: WorkerPool x2 NoOpStep.step", functools.partial(_measure_floor, args))]
    env_label, make_env = MANAGER_ENVS[args.env]
    name = f"{who} SyncSubprocessEnvManager x2 {env_label}"
    if who == "ding":
        from ding.envs import SyncSubprocessEnvManager

        source = "ding.envs"
    else:
        try:
            _, SyncSubprocessEnvManager, source = _import_cadence_managers()
        except ImportError as error:
            return [_skip(name, f"skipped: Cadence's managers do not import from cadence.interop.ding: {error}")]

    def measure() -> dict[str, Any]:
        cfg = SyncSubprocessEnvManager.default_config()
        manager = SyncSubprocessEnvManager(env_fn=[make_env for _ in range(2)], cfg=cfg)
        manager.seed(0)
        start = time.perf_counter()
        manager.launch()
        launch_s = time.perf_counter() - start
        # actions drawn beforehand, as int64 (1,) arrays (the contract's Discrete action), so the
        # loop times the manager and the envs, not the sampling
        drawn = np.random.default_rng(args.round).integers(0, 2, size=(4096, 2, 1), dtype=np.int64)
        table = [[drawn[k, 0], drawn[k, 1]] for k in range(len(drawn))]
        k = 0
        for _ in range(MANAGER_WARMUP):
            row = table[k % 4096]
            manager.step({i: row[i] for i in manager.ready_obs})
            k += 1
        env_steps, calls = 0, 0
        clock = time.perf_counter
        start = clock()
        deadline = start + args.seconds
        while clock() < deadline:
            row = table[k % 4096]
            env_steps += len(manager.step({i: row[i] for i in manager.ready_obs}))
            calls += 1
            k += 1
        elapsed = clock() - start
        _settle_before_close(manager)
        start = clock()
        manager.close()
        return {
            "manager": source,
            "steps_per_s": env_steps / elapsed,
            "calls_per_s": calls / elapsed,
            "launch_s": round(launch_s, 2),
            "close_s": round(clock() - start, 3),
        }

    return [_check(name, measure)]


# ---------------------------------------------------------------------------------------------
# Part 4: the adapter's cost in ParallelEnv, path by path


def part_adapter_speed(args: argparse.Namespace) -> list[Check]:
    """Part 4: the DingEnvWrapper family in ParallelEnv(2) (main .venv), or dizoo's env in one process."""
    if args.env == "dizoo":
        return _adapter_speed_dizoo(args)
    return _adapter_speed_parallel(args)


def _adapter_speed_parallel(args: argparse.Namespace) -> list[Check]:
    """``ParallelEnv(2, DingEnvAdapter(...))`` against ``ParallelEnv(2, GymEnv("CartPole-v1"))``.

    Two adapted envs: Cadence's ``DingEnvWrapper`` (the target, <= ``ADAPTER_TARGET``) and the
    hand-written env of :func:`_handmade_env_class` (informative: its own conversions count).
    """
    import torch
    from cadence.collectors import SyncDataCollector
    from cadence.envs import ParallelEnv

    gym_id = "CartPole-v1"
    contenders: dict[str, Callable[[], Any]] = {
        "adapter": make_cadence_wrapper_adapter,
        "handmade": make_handmade_adapter,
        "gym": functools.partial(make_gym_env, gym_id),
    }
    labels = {
        "adapter": "DingEnvAdapter(DingEnvWrapper(CartPole-v1))",
        "handmade": "DingEnvAdapter(HandmadeCartPoleEnv(CartPole-v1))",
    }

    envs: dict[str, Any] = {}
    collectors: dict[str, Iterator[Any]] = {}
    inputs: dict[str, Any] = {}
    built: dict[str, Any] = {}
    for who, make in contenders.items():
        env = ParallelEnv(2, make)
        env.set_seed(0)
        env.rollout(100, break_when_any_done=False)  # warm-up: workers started, fast path taken once
        envs[who] = env
        # the collector gets its own ParallelEnv: it resets and steps it between our measurements
        collector_env = ParallelEnv(2, make)
        collector_env.set_seed(1)
        collector = SyncDataCollector(
            collector_env, _small_policy(collector_env, seed=0), frames_per_batch=args.frames_per_batch, total_frames=-1
        )
        built[who] = collector
        collectors[who] = iter(collector)
        next(collectors[who])  # warm-up batch
        inputs[who] = env.reset()
        for _ in range(50):
            _, inputs[who] = env.step_and_maybe_reset(env.rand_action(inputs[who]))

    def rollout(who: str) -> float:
        start = time.perf_counter()
        envs[who].rollout(args.rollout_steps, break_when_any_done=False)
        return time.perf_counter() - start

    def collect(who: str) -> float:
        iterator = collectors[who]
        start = time.perf_counter()
        for _ in range(args.batches):
            next(iterator)
        return time.perf_counter() - start

    def loop(who: str) -> float:
        env, td = envs[who], inputs[who]
        start = time.perf_counter()
        with torch.no_grad():
            for _ in range(args.loop_steps):
                _, td = env.step_and_maybe_reset(env.rand_action(td))
        inputs[who] = td
        return time.perf_counter() - start

    paths: dict[str, tuple[Callable[[str], float], int]] = {
        f"(a) rollout({args.rollout_steps}), no policy": (rollout, 2 * args.rollout_steps),
        f"(b) SyncDataCollector {args.batches} x {args.frames_per_batch} frames, QValueActor": (
            collect,
            args.batches * args.frames_per_batch,
        ),
        f"(c) step_and_maybe_reset x {args.loop_steps}, rand_action": (loop, 2 * args.loop_steps),
    }
    times, failures = _alternate(contenders, paths, args.rounds)
    for who in contenders:
        built[who].shutdown()
        if not envs[who].is_closed:
            envs[who].close()

    checks: list[Check] = []
    for who, label in labels.items():
        target = who == "adapter"  # the hand-written env's own conversions are its cost: informative
        for path, (_, env_steps) in paths.items():
            name = f"{path}: {label} / GymEnv({gym_id!r}), ParallelEnv(2)"
            failed = failures.get((path, who)) or failures.get((path, "gym"))
            if failed:
                checks.append({"name": name, "ok": False, "numbers": {}, "error": failed})
                continue
            best = {key: min(times[path][key]) for key in (who, "gym")}
            ratio = best[who] / best["gym"]
            numbers: dict[str, Any] = {
                "adapter_s": round(best[who], 3),
                "gym_s": round(best["gym"], 3),
                "adapter_steps_per_s": round(env_steps / best[who]),
                "gym_steps_per_s": round(env_steps / best["gym"]),
                "time_ratio": round(ratio, 3),
            }
            if not target:
                checks.append({"name": name, "ok": None, "info": True, "numbers": numbers, "error": None})
                continue
            numbers["target"] = f"<= {ADAPTER_TARGET}"
            ok = ratio <= ADAPTER_TARGET
            error = None if ok else f"adapter/GymEnv time {ratio:.2f} > {ADAPTER_TARGET}"
            checks.append({"name": name, "ok": ok, "numbers": numbers, "error": error})
    return checks


def _alternate(
    contenders: dict[str, Any], paths: dict[str, tuple[Callable[[str], float], int]], rounds: int
) -> tuple[dict[str, dict[str, list[float]]], dict[tuple[str, str], str]]:
    """Times every path for every contender, ``rounds`` times, alternating who goes first.

    Returns the times (path -> contender -> seconds per round) and the failures ((path,
    contender) -> traceback); a contender that failed on a path is not timed there again.
    """
    times: dict[str, dict[str, list[float]]] = {path: {who: [] for who in contenders} for path in paths}
    failures: dict[tuple[str, str], str] = {}
    for round_ in range(rounds):
        order = list(contenders) if round_ % 2 == 0 else list(reversed(contenders))
        for path, (measure, _) in paths.items():
            for who in order:
                if (path, who) in failures:
                    continue
                try:
                    times[path][who].append(measure(who))
                except Exception:  # noqa: BLE001 - reported as that path's FAIL
                    failures[(path, who)] = f"{who}: {traceback.format_exc()}"
    return times, failures


def _adapter_speed_dizoo(args: argparse.Namespace) -> list[Check]:
    """dizoo's ``CartPoleEnv`` in one process (no ParallelEnv): two informative ratios.

    (i) the adapter's own cost: ``DingEnvAdapter(CartPoleEnv()).rollout(N)`` against a bare
    Python loop over the same dizoo env doing what that rollout needs (step with pre-drawn
    ``np.array([a])`` actions, reset at done, copy obs, reward and done into preallocated
    arrays); (ii) the dizoo env's own cost: that bare loop against
    ``GymEnv("CartPole-v0").rollout(N)`` (gymnasium's CartPole-v0, the same 200-step
    episodes), with a bare loop over gymnasium's ``CartPole-v0`` alongside. dizoo steps gym
    0.25's CartPole and converts every step itself, so (ii) measures dizoo, not the adapter.
    """
    import gymnasium
    from cadence.interop.ding import DingEnvAdapter

    steps = args.rollout_steps
    drawn = np.random.default_rng(0).integers(0, 2, size=steps)
    ding_actions = [np.array([a]) for a in drawn]  # what the adapter hands dizoo's env, made beforehand
    gym_actions = [int(a) for a in drawn]

    adapter = DingEnvAdapter(make_dizoo_cartpole())
    adapter.set_seed(0)
    adapter.rollout(1000, break_when_any_done=False)  # warm-up: made the gym env, took the fast path
    dizoo_env = make_dizoo_cartpole()
    dizoo_env.seed(0)
    gym_env = make_gym_env("CartPole-v0")
    gym_env.set_seed(0)
    gym_env.rollout(1000, break_when_any_done=False)
    gymnasium_env = gymnasium.make("CartPole-v0")
    gymnasium_env.reset(seed=0)
    obs_buf = np.empty((steps, 4), np.float32)
    reward_buf = np.empty(steps, np.float32)
    done_buf = np.empty(steps, bool)

    def rollout(env: Any) -> float:
        start = time.perf_counter()
        env.rollout(steps, break_when_any_done=False)
        return time.perf_counter() - start

    def bare_dizoo(_: str) -> float:
        env = dizoo_env
        start = time.perf_counter()
        obs_buf[0] = env.reset()
        for t in range(steps):
            obs, reward, done, _info = env.step(ding_actions[t])
            obs_buf[t] = obs
            reward_buf[t] = reward[0]
            done_buf[t] = done
            if done:
                env.reset()
        return time.perf_counter() - start

    def bare_gymnasium(_: str) -> float:
        env = gymnasium_env
        start = time.perf_counter()
        obs_buf[0], _ = env.reset()
        for t in range(steps):
            obs, reward, terminated, truncated, _info = env.step(gym_actions[t])
            obs_buf[t] = obs
            reward_buf[t] = reward
            done_buf[t] = done = terminated or truncated
            if done:
                env.reset()
        return time.perf_counter() - start

    measures: dict[str, Callable[[str], float]] = {
        "adapter": lambda _: rollout(adapter),
        "dizoo_bare": bare_dizoo,
        "gymenv": lambda _: rollout(gym_env),
        "gymnasium_bare": bare_gymnasium,
    }
    bare_dizoo("")  # warm-up: dizoo makes gym's env at its first reset
    bare_gymnasium("")

    path = f"rollout({steps}), one process"
    times, failures = _alternate(measures, {path: (lambda who: measures[who](who), steps)}, args.rounds)
    adapter.close()
    dizoo_env.close()
    gym_env.close()
    gymnasium_env.close()
    if failures:
        error = "\n".join(failures.values())
        return [{"name": f"dizoo CartPoleEnv, {path}", "ok": False, "numbers": {}, "error": error}]
    best = {who: min(times[path][who]) for who in measures}
    per_s = {who: round(steps / best[who]) for who in measures}
    overhead = {
        "adapter_s": round(best["adapter"], 3),
        "bare_loop_s": round(best["dizoo_bare"], 3),
        "adapter_steps_per_s": per_s["adapter"],
        "bare_loop_steps_per_s": per_s["dizoo_bare"],
        "time_ratio": round(best["adapter"] / best["dizoo_bare"], 3),
        "adapter_us_per_step": round(1e6 * (best["adapter"] - best["dizoo_bare"]) / steps, 1),
    }
    env_cost = {
        "dizoo_bare_loop_s": round(best["dizoo_bare"], 3),
        "gymenv_rollout_s": round(best["gymenv"], 3),
        "dizoo_steps_per_s": per_s["dizoo_bare"],
        "gymenv_steps_per_s": per_s["gymenv"],
        "time_ratio": round(best["dizoo_bare"] / best["gymenv"], 3),
        "gymnasium_bare_loop_steps_per_s": per_s["gymnasium_bare"],
        "adapter/GymEnv (product)": round(best["adapter"] / best["gymenv"], 3),
    }
    return [
        {
            "name": f"adapter overhead: DingEnvAdapter(dizoo CartPoleEnv).{path} / bare loop over the same env",
            "ok": None,
            "info": True,
            "numbers": overhead,
            "error": None,
        },
        {
            "name": f"dizoo env vs gymnasium: bare loop over dizoo CartPoleEnv / GymEnv('CartPole-v0').{path}",
            "ok": None,
            "info": True,
            "numbers": env_cost,
            "error": None,
        },
    ]


PARTS: dict[str, Callable[[argparse.Namespace], list[Check]]] = {
    "to_ding": part_to_ding,
    "from_ding": part_from_ding,
    "manager_speed": part_manager_speed,
    "adapter_speed": part_adapter_speed,
}


# ---------------------------------------------------------------------------------------------
# The parent: runs the parts in the right pythons and prints them


def find_ding_python() -> tuple[str | None, str]:
    """The DI-engine venv's python, from ``benchmarks/ding-venv.sh`` (which builds it once)."""
    script = ROOT / "benchmarks" / "ding-venv.sh"
    if not script.exists():
        return None, f"{script} is missing"
    result = subprocess.run(["bash", str(script)], capture_output=True, text=True, cwd=ROOT, timeout=1800)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        return None, f"ding-venv.sh failed (rc {result.returncode}): {result.stderr.strip()[-500:]}"
    return lines[-1], "ding-venv.sh"


def run_part(python: str, part: str, extra: list[str], timeout: float) -> dict[str, Any]:
    """Runs one part in ``python``; its result, or one FAIL check saying why there is none."""
    command = [python, str(Path(__file__).resolve()), "--part", part, *extra]
    try:
        result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
    except subprocess.TimeoutExpired as error:
        return {"checks": [{"name": part, "ok": False, "numbers": {}, "error": f"timed out after {error.timeout} s"}]}
    for line in reversed(result.stdout.splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER) :])
    tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-40:])
    error = f"no result (rc {result.returncode}):\n{tail}"
    return {"checks": [{"name": part, "ok": False, "numbers": {}, "error": error}]}


def _label(python: str, ding_python: str | None) -> str:
    # absolute, not resolved: both venvs' pythons are links to the same interpreter
    if ding_python is not None and os.path.abspath(python) == os.path.abspath(ding_python):
        return "DI-engine venv"
    if os.path.abspath(python).startswith(str(ROOT / ".venv") + os.sep):
        return "main .venv"
    return python


def print_checks(result: dict[str, Any], label: str, verdicts: list[tuple[str, str]]) -> None:
    for check in result["checks"]:
        if check.get("info"):
            verdict = "INFO"  # informative: numbers, no target
        else:
            verdict = "SKIP" if check["ok"] is None else ("PASS" if check["ok"] else "FAIL")
        numbers = ", ".join(f"{key} {value}" for key, value in check["numbers"].items())
        print(f"  {verdict}  {check['name']}  [{label}]")
        if numbers:
            print(f"        {numbers}")
        if check["error"]:
            print("        " + check["error"].rstrip().replace("\n", "\n        "))
        verdicts.append((verdict, check["name"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="timed seconds per manager round (part 3)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (parts 3 and 4), best kept")
    parser.add_argument("--ding-python", default=None, help="the DI-engine venv's python (default: ding-venv.sh)")
    parser.add_argument("--parts", default="1,2,3,4", help="which parts to run, e.g. 1,2")
    parser.add_argument("--rollout-steps", type=int, default=50000, help="part 4 (a): batch steps per rollout")
    parser.add_argument("--batches", type=int, default=10, help="part 4 (b): collector batches per measurement")
    parser.add_argument("--frames-per-batch", type=int, default=200, help="part 4 (b): frames per batch")
    parser.add_argument("--loop-steps", type=int, default=2000, help="part 4 (c): step_and_maybe_reset calls")
    # internal: a part run in a subprocess (the DI-engine venv's python for the parts that need ding)
    parser.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    parser.add_argument("--who", choices=["ding", "cadence", "floor"], default="ding", help=argparse.SUPPRESS)
    parser.add_argument(
        "--env", choices=["wrapper", "dizoo", "lean", "floor"], default="wrapper", help=argparse.SUPPRESS
    )
    parser.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.part is not None:
        import warnings

        warnings.filterwarnings("ignore")  # gym's and treevalue's deprecation notices, in every subprocess
        checks = PARTS[args.part](args)
        print(MARKER + json.dumps({"python": sys.executable, "versions": _versions(), "checks": checks}, default=str))
        return

    parts = {int(p) for p in args.parts.split(",")}
    ding_python, how = (args.ding_python, "--ding-python") if args.ding_python else find_ding_python()
    here = sys.executable
    print(f"ding_compat.py  {time.strftime('%Y-%m-%d %H:%M')}  {platform.node()}  {os.cpu_count()} cores")
    print(f"main python:      {here}  [{_label(here, ding_python)}]  {_versions()}")
    print(f"DI-engine python: {ding_python}  ({how})")
    verdicts: list[tuple[str, str]] = []
    sizes = [
        f"--{name}={getattr(args, name.replace('-', '_'))}"
        for name in ("rollout-steps", "batches", "frames-per-batch", "loop-steps")
    ]
    rounds = [f"--rounds={args.rounds}"]

    printed_versions: list[bool] = []  # the DI-engine venv's versions, printed with its first result

    def ding_part(part: str, extra: list[str], timeout: float) -> dict[str, Any] | None:
        if ding_python is None:
            print(f"  SKIP  {part}: no DI-engine python ({how})")
            verdicts.append(("SKIP", part))
            return None
        result = run_part(ding_python, part, extra, timeout)
        if "versions" in result and not printed_versions:
            print(f"  DI-engine venv: {result['versions']}")
            printed_versions.append(True)
        return result

    if 1 in parts:
        print("\n1. Cadence -> DI-engine: as_ding_env in DI-engine's check_all and env managers")
        result = ding_part("to_ding", [], 600)
        if result:
            print_checks(result, "DI-engine venv", verdicts)
    if 2 in parts:
        print("\n2. DI-engine -> Cadence: DingEnvAdapter, check_env_specs, ParallelEnv(2) + SyncDataCollector")
        result = ding_part("from_ding", [], 600)
        if result:
            print_checks(result, "DI-engine venv", verdicts)
    if 3 in parts:
        print(
            f"\n3. SyncSubprocessEnvManager x2, DI-engine's against Cadence's, {args.seconds:g} s a round, "
            f"best of {args.rounds} (dizoo CartPoleEnv: target >= {SPEED_TARGET:g}x; LeanCartPoleEnv and the "
            "WorkerPool floor: informative)"
        )
        # (env, who) -> the numbers of each round; ("floor", "cadence"): the WorkerPool floor
        runs = [(env, who) for env in MANAGER_ENVS for who in ("ding", "cadence")] + [("floor", "floor")]
        rounds_done: dict[tuple[str, str], list[dict[str, Any]]] = {run: [] for run in runs}
        for round_ in range(args.rounds if ding_python else 0):
            for env in [*MANAGER_ENVS, "floor"]:
                whos = [who for env_, who in runs if env_ == env]
                # alternate who goes first, so that a slow spell of the shared machine hits both
                for who in whos if round_ % 2 == 0 else list(reversed(whos)):
                    extra = [f"--who={who}", f"--env={env}", f"--seconds={args.seconds}", f"--round={round_}"]
                    result = ding_part("manager_speed", extra, args.seconds + 300)
                    check = result["checks"][0] if result else None
                    if check and check["ok"]:
                        rounds_done[(env, who)].append(check["numbers"])
                        numbers = check["numbers"]
                        steps = "" if env == "floor" else f"{numbers['steps_per_s']:>9,.0f} env steps/s, "
                        print(
                            f"  round {round_ + 1} {env:6s} {who:8s} {steps:>23s}"
                            f"{numbers['calls_per_s']:>7,.0f} calls/s  [DI-engine venv]"
                        )
                    elif result:
                        print_checks(result, "DI-engine venv", verdicts)
        best = {
            run: max(done, key=lambda numbers: numbers["steps_per_s"]) for run, done in rounds_done.items() if done
        }
        for (env, who), numbers in best.items():
            if env == "floor":
                speed = f"{numbers['calls_per_s']:,.0f} NoOpStep.step calls/s on both workers"
            else:
                speed = f"{numbers['steps_per_s']:>9,.0f} env steps/s, {numbers['calls_per_s']:,.0f} manager.step/s"
            print(
                f"        {env:6s} {who:8s} best {speed}, launch {numbers['launch_s']} s, "
                f"close {numbers['close_s']} s (from {numbers['manager']})"
            )
        for env, (env_label, _) in MANAGER_ENVS.items():
            if (env, "ding") not in best or (env, "cadence") not in best:
                continue
            ratio = best[(env, "cadence")]["steps_per_s"] / best[(env, "ding")]["steps_per_s"]
            name = f"Cadence / DI-engine SyncSubprocessEnvManager speed, {env_label}: {ratio:.2f}x"
            if env == "dizoo":
                name += f" (target >= {SPEED_TARGET:g}x)"
                verdict = "PASS" if ratio >= SPEED_TARGET else "FAIL"
            else:
                name += " (informative: the same lean env in both managers)"
                verdict = "INFO"
            print(f"  {verdict}  {name}  [DI-engine venv]")
            verdicts.append((verdict, name))
        if ("floor", "floor") in best and ("dizoo", "ding") in best:
            floor = best[("floor", "floor")]["calls_per_s"]
            ratio = floor / best[("dizoo", "ding")]["calls_per_s"]
            name = (
                f"floor: WorkerPool x2 no-op step, {floor:,.0f} calls/s = {ratio:.2f}x DI-engine's "
                "dizoo manager.step/s (informative: the round trip of two processes here)"
            )
            print(f"  INFO  {name}  [DI-engine venv]")
            verdicts.append(("INFO", name))
    if 4 in parts:
        print(
            f"\n4. DingEnvAdapter vs GymEnv, best of {args.rounds} alternating rounds (time ratio adapter/GymEnv; "
            f"target <= {ADAPTER_TARGET} for DingEnvWrapper in ParallelEnv(2), the others informative)"
        )
        result = run_part(here, "adapter_speed", ["--env=wrapper", *rounds, *sizes], 1200)
        print_checks(result, _label(here, ding_python), verdicts)
        result = ding_part("adapter_speed", ["--env=dizoo", *rounds, *sizes], 1200)
        if result:
            print_checks(result, "DI-engine venv", verdicts)

    print("\nSummary")
    for verdict, name in verdicts:
        print(f"  {verdict}  {name}")


if __name__ == "__main__":
    main()

"""DI-engine's Atari wrappers that drive the game: random no-op starts, frame skipping with
max-pooling, one life per episode, firing at reset, and RAM observations as images.

``NoopResetEnv``, ``MaxAndSkipEnv``, ``EpisodicLifeEnv`` and ``FireResetEnv`` keep the
spaces of the env they wrap; ``RamWrapper`` turns a RAM vector of shape ``(n,)`` into a
float32 "image" of shape ``(n, 1, 1)``. All follow gymnasium's API
(``reset(*, seed, options) -> (obs, info)``, ``step(a) -> (obs, reward, terminated,
truncated, info)``); where DI-engine (written for gym's 4-tuple) speaks of ``done``, these
read ``terminated or truncated``.

Examples:
    >>> import gymnasium as gym, ale_py
    >>> from cadence.interop.ding.wrappers import MaxAndSkipEnv, NoopResetEnv
    >>> gym.register_envs(ale_py)
    >>> env = MaxAndSkipEnv(NoopResetEnv(gym.make("ALE/Pong-v5", frameskip=1), noop_max=30), skip=4)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, env.observation_space == env.unwrapped.observation_space
    ((210, 160, 3), True)
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

__all__ = ["EpisodicLifeEnv", "FireResetEnv", "MaxAndSkipEnv", "NoopResetEnv", "RamWrapper"]

StepResult = tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]


def _action_meanings(env: gym.Env[Any, Any]) -> list[str] | None:
    """The ALE action meanings of ``env`` (``None`` for an env that does not name its actions)."""
    get_meanings = getattr(env.unwrapped, "get_action_meanings", None)
    return None if get_meanings is None else list(get_meanings())


def _ale_lives(env: gym.Env[Any, Any]) -> int:
    """The number of lives left in the ALE game under ``env``."""
    return int(env.unwrapped.ale.lives())  # type: ignore[attr-defined]


class NoopResetEnv(gym.Wrapper[Any, Any, Any, Any]):
    """At reset, take a random number (1 to ``noop_max``) of no-op actions (action 0).

    This varies the starting states of deterministic games. If the game ends during the
    no-ops, the env is reset again and the remaining no-ops continue from there. The
    number of no-ops comes from a ``numpy.random.Generator`` owned by the wrapper: it is
    re-made from ``seed`` by ``reset(seed=seed)`` (which is also passed to the inner env),
    so a seeded reset is reproduced exactly; before any seed it draws from fresh OS
    entropy. Spaces are unchanged.

    Args:
        env: the env to wrap; if it names its actions (``env.unwrapped.get_action_meanings()``,
            as ALE games do), action 0 must be ``'NOOP'``.
        noop_max: the largest number of no-ops (at least 1).

    Raises:
        ValueError: ``noop_max < 1``, or action 0 is not ``'NOOP'`` (the meanings are named).

    Examples:
        >>> import gymnasium as gym, ale_py
        >>> gym.register_envs(ale_py)
        >>> env = NoopResetEnv(gym.make("ALE/Pong-v5", frameskip=1), noop_max=30)
        >>> first = env.reset(seed=3)[1]["episode_frame_number"]
        >>> again = env.reset(seed=3)[1]["episode_frame_number"]
        >>> first == again and 1 <= first <= 30
        True
    """

    def __init__(self, env: gym.Env[Any, Any], noop_max: int = 30) -> None:
        super().__init__(env)
        if int(noop_max) < 1:
            raise ValueError(f"NoopResetEnv: noop_max must be at least 1, got {noop_max}")
        meanings = _action_meanings(env)
        if meanings is not None and (not meanings or meanings[0] != "NOOP"):
            raise ValueError(f"NoopResetEnv needs action 0 to be 'NOOP'; this env's action meanings are {meanings}")
        self.noop_max = int(noop_max)
        self.noop_action = 0
        # unseeded until the first reset(seed=...): OS entropy, never numpy's global state
        self._rng = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the inner env, then take 1 to ``noop_max`` no-ops.

        Args:
            seed: seeds both the inner env and the wrapper's generator.
            options: passed to every inner reset.

        Returns:
            The observation and info after the last no-op.
        """
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        obs, info = self.env.reset(seed=seed, options=options)
        for _ in range(int(self._rng.integers(1, self.noop_max + 1))):
            obs, _, terminated, truncated, info = self.env.step(self.noop_action)
            if terminated or truncated:
                obs, info = self.env.reset(options=options)
        return obs, info


class MaxAndSkipEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Repeat each action ``skip`` times; return the summed reward and the elementwise
    maximum of the last two frames (ALE draws some sprites on alternate frames only).

    The repetition stops early when the episode terminates or is truncated; the max is
    then over the last two frames reached (or the only one). Spaces are unchanged; the
    info is the last inner step's.

    Args:
        env: the env to wrap (with frame skipping off, e.g. ``frameskip=1``).
        skip: the number of inner steps per step (at least 1).

    Raises:
        ValueError: ``skip < 1``.

    Examples:
        >>> import gymnasium as gym, ale_py
        >>> gym.register_envs(ale_py)
        >>> env = MaxAndSkipEnv(gym.make("ALE/Pong-v5", frameskip=1), skip=4)
        >>> _ = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(0)
        >>> obs.shape, info["episode_frame_number"]
        ((210, 160, 3), 4)
    """

    def __init__(self, env: gym.Env[Any, Any], skip: int = 4) -> None:
        super().__init__(env)
        if int(skip) < 1:
            raise ValueError(f"MaxAndSkipEnv: skip must be at least 1, got {skip}")
        self._skip = int(skip)

    @property
    def skip(self) -> int:
        """The number of inner steps per step."""
        return self._skip

    def step(self, action: Any) -> StepResult:
        """Repeat ``action`` up to ``skip`` times.

        Args:
            action: the action to repeat.

        Returns:
            The max of the last two frames, the summed reward, and the last inner step's
            ``terminated``, ``truncated`` and info.
        """
        total_reward = 0.0
        previous: Any = None
        obs: Any = None
        for _ in range(self._skip):
            previous = obs
            obs, reward, terminated, truncated, info = self.env.step(action)
            total_reward += float(reward)
            if terminated or truncated:
                break
        frame = obs if previous is None else np.maximum(previous, obs)
        return frame, total_reward, terminated, truncated, info


class EpisodicLifeEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Make the loss of a life look like the end of an episode, but only really reset at
    game over (the DQN papers' trick: it helps value estimation).

    ``step`` reports ``terminated=True`` when the number of lives drops (and stays above
    zero: some games sit at zero lives for a few frames before the game is over).
    ``was_real_done`` says whether the last step ended the real game (terminated or
    truncated). ``reset`` resets the game only then (or when given a ``seed``, which asks
    for a fresh game); otherwise it takes one no-op step to leave the lost-life state and
    continues the same game. Spaces are unchanged.

    Args:
        env: an ALE env (``env.unwrapped.ale.lives()`` must exist).

    Raises:
        TypeError: the env has no ALE interface.

    Examples:
        >>> import gymnasium as gym, ale_py
        >>> gym.register_envs(ale_py)
        >>> env = EpisodicLifeEnv(gym.make("ALE/Qbert-v5", frameskip=1, repeat_action_probability=0.0))
        >>> _ = env.reset(seed=0)
        >>> env.lives, env.was_real_done
        (4, True)
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        if not hasattr(getattr(env.unwrapped, "ale", None), "lives"):
            raise TypeError(
                f"EpisodicLifeEnv needs an ALE env (env.unwrapped.ale.lives()); got {type(env.unwrapped).__name__}"
            )
        self.lives = 0
        self.was_real_done = True

    def step(self, action: Any) -> StepResult:
        """Step the game; a lost life (with lives left) ends the agent's episode.

        Args:
            action: the action to take.

        Returns:
            The inner step's results, with ``terminated`` also set by a lost life.
        """
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = bool(terminated or truncated)
        lives = _ale_lives(self.env)
        if 0 < lives < self.lives:
            terminated = True
        # updated every step so that bonus lives raise the reference
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the game after a game over (or for a seed); else continue it with a no-op.

        Args:
            seed: seeds the inner env; a seeded reset always resets the game.
            options: passed to the inner reset.

        Returns:
            The observation and info.
        """
        if self.was_real_done or seed is not None:
            obs, info = self.env.reset(seed=seed, options=options)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                # the no-op itself ended the game: start a new one rather than hand out a terminal state
                obs, info = self.env.reset(options=options)
        self.lives = _ale_lives(self.env)
        return obs, info


class FireResetEnv(gym.Wrapper[Any, Any, Any, Any]):
    """Press FIRE (action 1) after each reset, for games that wait for it to start.

    As DI-engine 0.5.3 does, only action 1 is taken (openai/baselines also takes action 2).
    If that step ends the episode, the env is reset again (without firing). Spaces are
    unchanged.

    Args:
        env: an env whose action 1 is ``'FIRE'`` and that has at least 3 actions
            (``env.unwrapped.get_action_meanings()``).

    Raises:
        ValueError: action 1 is not ``'FIRE'`` or there are fewer than 3 actions (the
            meanings are named), or the env does not name its actions.

    Examples:
        >>> import gymnasium as gym, ale_py
        >>> gym.register_envs(ale_py)
        >>> env = FireResetEnv(gym.make("ALE/Breakout-v5", frameskip=1))
        >>> obs, info = env.reset(seed=0)
        >>> info["episode_frame_number"]
        1
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        meanings = _action_meanings(env)
        if meanings is None:
            raise ValueError(
                "FireResetEnv needs an env that names its actions (env.unwrapped.get_action_meanings()); "
                f"{type(env.unwrapped).__name__} does not"
            )
        if len(meanings) < 3 or meanings[1] != "FIRE":
            raise ValueError(
                "FireResetEnv needs action 1 to be 'FIRE' and at least 3 actions; "
                f"this env's action meanings are {meanings}"
            )

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset the inner env and take action 1.

        Args:
            seed: seeds the inner env.
            options: passed to the inner reset.

        Returns:
            The observation and info after firing.
        """
        self.env.reset(seed=seed, options=options)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            obs, info = self.env.reset(options=options)
        return obs, info


class RamWrapper(gym.ObservationWrapper[Any, Any, Any]):
    """Turn a RAM observation (a vector of shape ``(n,)``, 128 bytes for ALE) into a float32
    "image" of shape ``(n, 1, 1)``, so that image models take it.

    The observation space becomes ``Box(low, high, (n, 1, 1), float32)`` with the inner
    bounds reshaped.

    Args:
        env: an env with a 1-D ``Box`` observation space (e.g. an ALE game with ``obs_type="ram"``).
        render: accepted for DI-engine's signature; it has no effect (nor does it in DI-engine).

    Raises:
        ValueError: the observation space is not a 1-D ``Box`` (its shape is named).

    Examples:
        >>> import gymnasium as gym, ale_py
        >>> gym.register_envs(ale_py)
        >>> env = RamWrapper(gym.make("ALE/Pong-v5", obs_type="ram"))
        >>> env.observation_space
        Box(0.0, 255.0, (128, 1, 1), float32)
        >>> env.reset(seed=0)[0].dtype
        dtype('float32')
    """

    def __init__(self, env: gym.Env[Any, Any], render: bool = False) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            shape = getattr(space, "shape", None)
            raise ValueError(f"RamWrapper needs a 1-D Box observation space (RAM bytes); got {space} of shape {shape}")
        self.render_ram = bool(render)
        self._shape: tuple[int, ...] = (space.shape[0], 1, 1)
        self.observation_space = gym.spaces.Box(
            low=space.low.reshape(self._shape).astype(np.float32),
            high=space.high.reshape(self._shape).astype(np.float32),
            dtype=np.float32,
        )

    def observation(self, observation: Any) -> np.ndarray:
        """The RAM vector reshaped to ``(n, 1, 1)`` as float32.

        Args:
            observation: the RAM vector.

        Returns:
            The reshaped float32 array.
        """
        return np.asarray(observation, dtype=np.float32).reshape(self._shape)

"""Deterministic evaluation of a policy, and videos of it.

:func:`evaluate_policy` plays whole episodes with exploration off (the policy's
deterministic action) and returns their returns; each episode starts from a reset
seeded from the evaluation's own seed, so that an evaluation depends on the policy and
that seed only (not on what the env did before: a resumed run evaluates as an
unbroken one). :func:`record_video` plays one episode on an env that renders and writes
the frames to an mp4 (or GIF) file.

Examples:
    >>> import torch
    >>> from tensordict.nn import TensorDictModule
    >>> from cadence.envs import GymEnv
    >>> still = TensorDictModule(lambda obs: torch.zeros(*obs.shape[:-1], 1), ["observation"], ["action"])
    >>> result = evaluate_policy(still, GymEnv("Pendulum-v1"), episodes=2, seed=0, max_steps=200)
    >>> result.lengths, result.mean_return < 0
    ([200, 200], True)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDictBase

from cadence.envs.common import EnvBase
from cadence.envs.utils import ExplorationType, set_exploration_type

__all__ = ["EvaluationResult", "evaluate_policy", "record_video"]

Policy = Callable[[TensorDictBase], TensorDictBase | None]


@dataclasses.dataclass
class EvaluationResult:
    """The returns and lengths of the episodes of one evaluation.

    Examples:
        >>> EvaluationResult(returns=[-1.0, -3.0], lengths=[5, 5]).mean_return
        -2.0
    """

    returns: list[float]
    lengths: list[int]

    @property
    def mean_return(self) -> float:
        """The mean episode return."""
        return float(np.mean(self.returns))


def _episode_seed(seed: int, episode: int) -> int:
    return int(np.random.SeedSequence([seed, episode]).generate_state(1)[0])


@torch.no_grad()
def evaluate_policy(policy: Policy, env: EnvBase, episodes: int, seed: int, max_steps: int) -> EvaluationResult:
    """Plays ``episodes`` episodes of ``env`` (an unbatched env) with ``policy`` under
    ``ExplorationType.DETERMINISTIC``.

    Args:
        policy: writes ``"action"`` into the tensordict it is given.
        env: the evaluation env (not the training one).
        episodes: how many episodes.
        seed: the evaluation's seed; episode ``k`` resets with a seed derived from it.
        max_steps: the longest episode (an episode still running then is cut there).

    Returns:
        The episodes' returns (summed rewards) and lengths.

    Raises:
        ValueError: for a batched env or a number of episodes below 1.

    Examples:
        >>> from cadence.envs import GymEnv
        >>> evaluate_policy(None, GymEnv("Pendulum-v1"), episodes=1, seed=0, max_steps=10).lengths
        [10]
    """
    if env.batch_size.numel() != 1 or env.batch_dims:
        raise ValueError(f"evaluate_policy needs an unbatched env, got batch size {tuple(env.batch_size)}.")
    if episodes < 1:
        raise ValueError(f"evaluate_policy: episodes must be >= 1, got {episodes}.")
    returns, lengths = [], []
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        for episode in range(episodes):
            env.set_seed(_episode_seed(seed, episode))
            data = env.rollout(max_steps, policy, break_when_any_done=True)
            returns.append(float(data.get(("next", "reward")).sum()))
            lengths.append(int(data.batch_size[-1]))
    return EvaluationResult(returns, lengths)


@torch.no_grad()
def record_video(
    policy: Policy, env: EnvBase, path: str | os.PathLike[str], seed: int, max_steps: int, fps: float = 30.0
) -> EvaluationResult:
    """Plays one deterministic episode on ``env``, which writes rendered frames under
    ``"pixels"`` (``GymEnv(..., from_pixels=True)``), and writes them to ``path`` (``.mp4``
    or ``.gif``).

    Args:
        policy: the deterministic policy.
        env: an unbatched env that renders.
        path: the video file.
        seed: the episode's seed.
        max_steps: the longest episode.
        fps: frames per second of the video.

    Returns:
        The episode's return and length.

    Raises:
        KeyError: if the env writes no ``"pixels"``.

    Examples:
        >>> import os, tempfile
        >>> from cadence.envs import GymEnv
        >>> path = os.path.join(tempfile.mkdtemp(), "episode.gif")
        >>> record_video(None, GymEnv("Pendulum-v1", from_pixels=True), path, seed=0, max_steps=5).lengths
        [5]
        >>> os.path.getsize(path) > 0
        True
    """
    from cadence.record.loggers._video import write_gif, write_mp4

    with set_exploration_type(ExplorationType.DETERMINISTIC):
        env.set_seed(_episode_seed(seed, 0))
        data = env.rollout(max_steps, policy, break_when_any_done=True)
    if "pixels" not in data.keys():
        raise KeyError(f"record_video: the env writes no 'pixels'; its data holds {sorted(map(str, data.keys()))}.")
    first = data.get("pixels")[:1]
    frames = torch.cat([first, data.get(("next", "pixels"))]).numpy().astype(np.uint8)
    path = Path(path)
    (write_gif if path.suffix.lower() == ".gif" else write_mp4)(path, frames, fps)
    return EvaluationResult([float(data.get(("next", "reward")).sum())], [int(data.batch_size[-1])])

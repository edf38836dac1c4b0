"""``Recorder``: evaluates a policy every so many training iterations.

The seed's DDPG tutorial calls ``recorder(None)`` once per collected batch; at the first
call and every ``record_interval`` calls after it (calls 0, ``record_interval``,
``2 * record_interval``, ...: the tutorial's output shows an evaluation from its first
batch on) the recorder rolls its own environment out for
``record_frames`` steps with the policy in a fixed exploration mode (deterministic, in the
tutorial: ``ExplorationType.MEAN``), without gradients, and returns what it measured;
the other calls return ``None``.

Examples:
    >>> from cadence.envs.custom import PendulumEnv
    >>> from cadence.envs.utils import ExplorationType
    >>> recorder = Recorder(record_frames=50, policy_exploration=None, environment=PendulumEnv(),
    ...                     exploration_type=ExplorationType.MEAN, record_interval=2)
    >>> sorted(recorder(None).keys()), recorder(None) is None, recorder(None) is None
    (['episode_return', 'r_evaluation'], True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase

from cadence.envs.common import EnvBase
from cadence.envs.utils import ExplorationType, set_exploration_type

__all__ = ["Recorder"]


class Recorder:
    """Evaluates ``policy_exploration`` on ``environment`` at the first call and every
    ``record_interval`` calls after it.

    A recording is one rollout of ``record_frames // frame_skip`` steps that does not stop
    at episode ends (the environment resets itself), run under ``torch.no_grad()`` and
    ``set_exploration_type(exploration_type)``. It returns a tensordict holding:

    * ``r_evaluation``: the mean reward per step (what the tutorial prints and plots);
    * ``episode_return``: the mean return of the episodes that ended during the rollout,
      or, when none ended, the return accumulated by each env (averaged over the batch);
    * ``<out_key>`` for each other entry of ``log_keys`` (its mean), with ``suffix``
      appended to every name.

    Recorder transforms of the environment (a ``VideoRecorder``, say) are told to write
    out what they hold after each recording (``environment.transform.dump()``).

    Args:
        record_frames: the env frames one recording runs.
        policy_exploration: the policy (a callable writing ``"action"`` into a tensordict);
            ``None`` takes random actions from the action spec.
        environment: the environment to evaluate on (not the training one).
        exploration_type: how exploration modules behave while recording.
        record_interval: record once every this many calls (the first call records).
        frame_skip: frames per env step (the rollout runs ``record_frames // frame_skip``
            steps).
        log_keys: the entries averaged into the output (default ``[("next", "reward")]``).
        out_keys: the output name of each log key (default: ``("next", "reward")`` ->
            ``"r_evaluation"``, other keys their last name).
        suffix: appended to every output name.

    Raises:
        ValueError: for a ``record_interval``, ``record_frames`` or ``frame_skip`` below 1.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from cadence.envs.custom import PendulumEnv
        >>> policy = TensorDictModule(lambda th: torch.zeros(*th.shape, 1), ["th"], ["action"])
        >>> recorder = Recorder(record_frames=400, policy_exploration=policy, environment=PendulumEnv(),
        ...                     record_interval=1)
        >>> result = recorder(None)
        >>> result["r_evaluation"].shape, bool(result["episode_return"] < 0)
        (torch.Size([]), True)
    """

    def __init__(
        self,
        *,
        record_frames: int,
        policy_exploration: Callable[[TensorDictBase], TensorDictBase] | None,
        environment: EnvBase,
        exploration_type: ExplorationType = ExplorationType.DETERMINISTIC,
        record_interval: int = 1,
        frame_skip: int = 1,
        log_keys: Sequence[NestedKey] | None = None,
        out_keys: dict[NestedKey, str] | None = None,
        suffix: str | None = None,
    ) -> None:
        for name, value in (("record_interval", record_interval), ("record_frames", record_frames),
                            ("frame_skip", frame_skip)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Recorder: {name} must be a positive int, got {value!r}.")
        if record_frames < frame_skip:
            raise ValueError(
                f"Recorder: record_frames ({record_frames}) must be at least frame_skip ({frame_skip})."
            )
        self.record_frames = record_frames
        self.frame_skip = frame_skip
        self.policy_exploration = policy_exploration
        self.environment = environment
        self.exploration_type = exploration_type
        self.record_interval = record_interval
        self.log_keys: list[NestedKey] = list(log_keys) if log_keys is not None else [("next", "reward")]
        self.out_keys = dict(out_keys) if out_keys is not None else {}
        self.suffix = suffix or ""
        self.count = 0

    def _out_name(self, key: NestedKey) -> str:
        if key in self.out_keys:
            return self.out_keys[key] + self.suffix
        if key == ("next", "reward"):
            return "r_evaluation" + self.suffix
        return (key if isinstance(key, str) else key[-1]) + self.suffix

    @torch.no_grad()
    def __call__(self, batch: TensorDictBase | None = None) -> TensorDictBase | None:
        """Counts a call; the first and every ``record_interval``-th after it evaluate and
        return the figures.

        Args:
            batch: the training batch (unused: the tutorial passes ``None``).

        Returns:
            The figures (scalars), or ``None`` on the calls that do not record.
        """
        due = self.count % self.record_interval == 0
        self.count += 1
        if not due:
            return None
        with set_exploration_type(self.exploration_type):
            rollout = self.environment.rollout(
                self.record_frames // self.frame_skip, self.policy_exploration, break_when_any_done=False
            )
        transform = getattr(self.environment, "transform", None)
        if transform is not None and hasattr(transform, "dump"):
            transform.dump()
        result: dict[str, torch.Tensor] = {}
        for key in self.log_keys:
            if key not in rollout.keys(True):
                raise KeyError(
                    f"Recorder: log key {key!r} is not in the evaluation rollout; it holds "
                    f"{sorted(map(str, rollout.keys(True, True)))}."
                )
            result[self._out_name(key)] = rollout.get(key).float().mean()
        result["episode_return" + self.suffix] = episode_return(rollout)
        return TensorDict(result, batch_size=[])

    def state_dict(self) -> dict[str, Any]:
        """The call count (where the next recording falls).

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> recorder = Recorder(record_frames=10, policy_exploration=None, environment=PendulumEnv(),
            ...                     record_interval=3)
            >>> _ = recorder(None)
            >>> recorder.state_dict()
            {'count': 1}
        """
        return {"count": self.count}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores the call count from :meth:`state_dict`.

        Examples:
            >>> from cadence.envs.custom import PendulumEnv
            >>> recorder = Recorder(record_frames=10, policy_exploration=None, environment=PendulumEnv(),
            ...                     record_interval=3)
            >>> recorder.load_state_dict({"count": 3})
            >>> recorder(None) is not None
            True
        """
        self.count = int(state_dict["count"])


def episode_return(rollout: TensorDictBase) -> torch.Tensor:
    """The mean return of the episodes that end in ``rollout`` (time last), or, if none
    ends, the mean over the batch of the reward summed over the rollout.

    Args:
        rollout: a rollout with ``("next", "reward")`` and ``("next", "done")``.

    Returns:
        A float scalar tensor.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> reward = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0]).view(5, 1)
        >>> done = torch.tensor([False, True, False, False, True]).view(5, 1)
        >>> rollout = TensorDict({"next": {"reward": reward, "done": done}}, [5])
        >>> episode_return(rollout).item()  # (1 + 2 and 3 + 4 + 5) / 2
        7.5
    """
    reward = rollout.get(("next", "reward")).float()
    done = rollout.get(("next", "done")).bool()
    # time is the last batch dim: [*B, T, *reward_shape] -> [*B, T] per-step rewards
    time_dim = rollout.batch_dims - 1
    per_step = reward.reshape(*reward.shape[: time_dim + 1], -1).sum(-1)
    ended = done.reshape(*done.shape[: time_dim + 1], -1).any(-1)
    if not ended.any():
        return per_step.sum(time_dim).mean()
    # returns of finished episodes: running sums reset after each done step
    per_step = per_step.movedim(time_dim, -1)
    ended = ended.movedim(time_dim, -1)
    running = torch.zeros_like(per_step[..., 0])
    totals = []
    for t in range(per_step.shape[-1]):
        running = running + per_step[..., t]
        totals.append(running[ended[..., t]])
        running = torch.where(ended[..., t], torch.zeros_like(running), running)
    return torch.cat(totals).mean()

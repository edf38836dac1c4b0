"""RLlib's sample collectors: :class:`SampleCollector` (the interface) and :class:`SimpleListCollector`.

A sampler hands every step's data to a collector, asks it for the next inference input
dict, and asks it for postprocessed batches at fragment and episode ends. What is stored
and shown is decided by the policy's ``view_requirements``:

* per (episode, agent), each step's values are appended to one list per *collected*
  column: a column that no view reads (``view.data_col or key``) is not stored at all;
* observations are stored once: one list of ``T + 1`` observations (the reset observation,
  then each step's next observation) serves ``obs`` (shift 0) and ``new_obs`` (shift 1);
* the inference input dict for the next step holds the views marked
  ``used_for_compute_actions``, built from past and current data only (a view with a
  positive shift, such as the seed's ``next_actions``, is never fed to inference);
* a fragment's batch holds every view (:func:`episode_view` over the episode's columns),
  reading the end of an earlier fragment of the same episode through ``before``, so that
  ``prev_actions`` at a fragment's first step is the real previous action. Steps before
  the episode start, and the future past a fragment's end (e.g. ``next_actions`` at its
  last step), are zeros from the view's space (views on ``state_out_*``: the policy's
  initial state before the episode start, as RLlib). After postprocessing (and the
  ``on_postprocess_trajectory`` callback), the columns whose view has
  ``used_for_training=False`` are dropped.

Multi-agent: the keys are (episode, agent); ``agent_index`` is the agent's order of first
sight in its episode (:meth:`Episode.agent_index`). At a fragment or episode end, every
agent's fragment is built first, then each is postprocessed with the others' as
``other_agent_batches`` (``{agent_id: (policy_id, policy, batch)}``, before postprocessing).
Batches are grouped per policy into a :class:`MultiAgentBatch` (a plain SampleBatch when
``"default_policy"`` is the only policy). A truncated build happens once
``rollout_fragment_length`` env steps or agent steps (``count_steps_by``; an agent step is
one recorded transition) are collected. Recurrent state (``state_in_*`` views with
``batch_repeat_value``, ``seq_lens``, the initial state before an episode start) and shifted
views on ``infos`` follow :mod:`cadence.interop.rllib.recurrent`. Nested values (``Dict`` or
``Tuple`` observations and actions, dict extra fetches) are stored as they come, one per step,
and every view is built leaf by leaf into a dict (tuple) of arrays.

Examples:
    >>> import gymnasium as gym, numpy as np
    >>> from cadence.interop.rllib.policy import RandomPolicy
    >>> policy = RandomPolicy(gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(2), {})
    >>> collector = SimpleListCollector({"default_policy": policy}, rollout_fragment_length=2)
    >>> episode = Episode(episode_id=7, env_id=0)
    >>> collector.add_init_obs(episode, 0, 0, "default_policy", 0, np.zeros(2, np.float32))
    >>> for step in range(2):
    ...     collector.add_action_reward_next_obs(7, 0, 0, "default_policy", False, {
    ...         "actions": np.int64(1), "rewards": 1.0, "terminateds": False, "truncateds": False,
    ...         "infos": {}, "new_obs": np.full(2, step + 1.0, np.float32)})
    ...     collector.episode_step(episode)
    >>> [batch] = collector.try_build_truncated_episode_multi_agent_batch()
    >>> batch["new_obs"][:, 0].tolist(), batch["obs"][:, 0].tolist(), batch["eps_id"].tolist()
    ([1.0, 2.0], [0.0, 1.0], [7, 7])
    >>> len(collector.buffers(7)["obs"])  # what stays: the lookback and the current obs
    2
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from cadence.interop._contracts import require_methods
from cadence.interop.rllib._batch_columns import is_structure, map_column, map_columns, stack_steps
from cadence.interop.rllib._dummy_batch import space_zeros
from cadence.interop.rllib.callbacks import DefaultCallbacks
from cadence.interop.rllib.multi_agent_batch import MultiAgentBatch
from cadence.interop.rllib.recurrent import infos_view, initial_states, repeat_value, sequence_lengths, state_prefix
from cadence.interop.rllib.sample_batch import SampleBatch, concat_samples
from cadence.interop.rllib.view_requirement import ViewRequirement, episode_view, view_changes

__all__ = ["Episode", "SampleCollector", "SimpleListCollector"]

SB = SampleBatch
# Written by the sampler, not by the env or the policy: computed from counters, not stored.
_SAMPLER_COLUMNS = frozenset({SB.T, SB.EPS_ID, SB.ENV_ID, SB.AGENT_INDEX, SB.UNROLL_ID})
# The seed: "the rewards and dones columns are never discarded".
_ALWAYS_TRAINED = frozenset({SB.REWARDS, SB.TERMINATEDS, SB.TRUNCATEDS})
_DTYPES = {SB.REWARDS: np.float32, SB.TERMINATEDS: np.bool_, SB.TRUNCATEDS: np.bool_}
_REQUIRED = (
    "add_init_obs", "add_action_reward_next_obs", "episode_step", "total_env_steps",
    "get_inference_input_dict", "postprocess_episode", "try_build_truncated_episode_multi_agent_batch",
)


class Episode:
    """One ongoing episode in one env, as callbacks see it (RLlib's ``Episode``, reduced).

    Args:
        episode_id: The episode's id (the ``eps_id`` column).
        env_id: The index of its env in the sampler.
        policy_mapping_fn: ``fn(agent_id, episode, worker, **kwargs) -> policy_id``, asked once
            per agent of the episode (``None``: every agent gets ``"default_policy"``).
        worker: Passed to ``policy_mapping_fn``.

    Attributes:
        length: Env steps so far; ``total_reward``: their summed reward (all agents).
        agent_rewards: ``(agent_id, policy_id)`` -> that agent's summed reward.
        user_data: Free for callbacks.
        custom_metrics: Free for callbacks.
        hist_data: Free for callbacks.
        last_observation: The last observation recorded.

    Examples:
        >>> episode = Episode(episode_id=3, env_id=1)
        >>> episode.episode_id, episode.length, episode.user_data
        (3, 0, {})
        >>> episode = Episode(4, 0, policy_mapping_fn=lambda agent_id, episode, worker, **kw: f"p{agent_id}")
        >>> episode.policy_for(1), episode.agent_index("x"), episode.agent_index(1)
        ('p1', 0, 1)
    """

    def __init__(self, episode_id: int, env_id: int, policy_mapping_fn: Any = None, worker: Any = None) -> None:
        self.episode_id = int(episode_id)
        self.env_id = int(env_id)
        self.length = 0
        self.total_reward = 0.0
        self.agent_rewards: dict[tuple[Any, str], float] = {}
        self.user_data: dict[str, Any] = {}
        self.custom_metrics: dict[str, float] = {}
        self.hist_data: dict[str, list[float]] = {}
        self.last_observation: Any = None
        self.policy_mapping_fn = policy_mapping_fn
        self.worker = worker
        self._agent_to_index: dict[Any, int] = {}
        self._agent_to_policy: dict[Any, str] = {}

    def agent_index(self, agent_id: Any) -> int:
        """The agent's index in this episode (the ``agent_index`` column): order of first sight.

        Examples:
            >>> episode = Episode(1, 0)
            >>> episode.agent_index("b"), episode.agent_index("a"), episode.agent_index("b")
            (0, 1, 0)
        """
        if agent_id not in self._agent_to_index:
            self._agent_to_index[agent_id] = len(self._agent_to_index)
        return self._agent_to_index[agent_id]

    def policy_for(self, agent_id: Any) -> str:
        """The policy id of ``agent_id`` (``policy_mapping_fn``, asked once per agent and episode).

        Examples:
            >>> Episode(1, 0).policy_for("any")
            'default_policy'
        """
        if agent_id not in self._agent_to_policy:
            if self.policy_mapping_fn is None:
                self._agent_to_policy[agent_id] = "default_policy"
            else:
                self._agent_to_policy[agent_id] = self.policy_mapping_fn(agent_id, self, worker=self.worker)
        return self._agent_to_policy[agent_id]

    def __repr__(self) -> str:
        return f"Episode(episode_id={self.episode_id}, env_id={self.env_id}, length={self.length})"


class SampleCollector:
    """The interface between a sampler and the data it collects (RLlib's method names).

    A subclass must define these methods (refused at class definition otherwise;
    ``class Base(SampleCollector, abstract=True)`` declares a base class), with
    :class:`SimpleListCollector`'s signatures:

    * ``add_init_obs(episode, agent_id, env_id, policy_id, t, init_obs)``: starts
      (episode, agent) with its reset observation at timestep ``t``; queues it for inference;
    * ``add_action_reward_next_obs(episode_id, agent_id, env_id, policy_id, agent_done,
      values)``: records one step (``actions``, ``rewards``, dones, ``infos``, ``new_obs``,
      policy outputs);
    * ``episode_step(episode)``: counts one env step of ``episode``;
    * ``total_env_steps()``: the env steps collected since the last build;
    * ``get_inference_input_dict(policy_id)``: the input dict for the agents queued for
      ``policy_id`` (their keys in ``forward_pass_agent_keys``);
    * ``postprocess_episode(episode, is_done=False, check_dones=False, build=False)``:
      builds and postprocesses the episode's data so far; returns the batches if ``build``;
    * ``try_build_truncated_episode_multi_agent_batch()``: once ``rollout_fragment_length``
      steps are collected, all fragments, built.

    Args:
        policy_map: Policy id -> policy (its ``view_requirements`` rule the collection).
        clip_rewards: ``True``: store the rewards' sign; a float ``c``: clip to ``[-c, c]``;
            ``None``/``False``: as they come.
        callbacks: A :class:`DefaultCallbacks` (``on_postprocess_trajectory`` is called here).
        multiple_episodes_in_batch: Whether a batch may hold several episodes.
        rollout_fragment_length: Env steps (all envs together) after which
            :meth:`try_build_truncated_episode_multi_agent_batch` builds.
        count_steps_by: ``"env_steps"`` or ``"agent_steps"`` (equal in single-agent).
        worker: The rollout worker, passed on to the callbacks.

    Examples:
        >>> class Nothing(SampleCollector):
        ...     pass
        Traceback (most recent call last):
        ...
        TypeError: Nothing must define add_init_obs(), add_action_reward_next_obs(), episode_step(), total_env_steps(), get_inference_input_dict(), postprocess_episode(), try_build_truncated_episode_multi_agent_batch() (SampleCollector's contract); declare `class Nothing(SampleCollector, abstract=True)` for a base class
    """

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if abstract:
            return
        require_methods(cls, SampleCollector, _REQUIRED)

    def __init__(
        self, policy_map: Mapping[str, Any], clip_rewards: bool | float | None = None,
        callbacks: DefaultCallbacks | None = None, multiple_episodes_in_batch: bool = True,
        rollout_fragment_length: int = 200, count_steps_by: str = "env_steps", worker: Any = None,
    ) -> None:
        if count_steps_by not in ("env_steps", "agent_steps"):
            raise ValueError(f"count_steps_by: expected 'env_steps' or 'agent_steps', got {count_steps_by!r}")
        self.policy_map = policy_map
        self.clip_rewards = clip_rewards
        self.callbacks = callbacks if callbacks is not None else DefaultCallbacks()
        self.multiple_episodes_in_batch = multiple_episodes_in_batch
        self.rollout_fragment_length = int(rollout_fragment_length)
        self.count_steps_by = count_steps_by
        self.worker = worker


def _zeros(view_col: str, view: ViewRequirement, like: Any) -> Any:
    """One step's value outside the episode: zeros from the view's space (or like the data)."""
    space = view.space
    if view.space_given and space.shape is not None:
        return np.zeros(space.shape, dtype=space.dtype)
    if like is not None:
        return map_column(lambda leaf: np.zeros_like(np.asarray(leaf)), like)
    if view.space_given and isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return space_zeros(view_col, space, ())
    return np.zeros(space.shape or (), dtype=space.dtype)


@dataclasses.dataclass(frozen=True)
class _BuildPlan:
    """What :meth:`_AgentCollector.build` needs of a set of views, read off them once.

    ``steps``: per view ``(view_col, view, data column, whether it is each step's own value
    (shift 0, every step), its deepest look back, the shape its space fixes or None)``.
    """

    steps: list[tuple[str, ViewRequirement, str, bool, int, tuple[int, ...] | None]]
    max_seq_len: int


def _build_plan(views: Mapping[str, ViewRequirement]) -> _BuildPlan:
    steps = []
    for view_col, view in views.items():
        space = view.space
        space_shape = tuple(space.shape) if view.space_given and space.shape is not None else None
        identity = view.batch_repeat_value == 1 and not view.multiple_shifts and int(view.shift_arr[0]) == 0
        steps.append((view_col, view, view.data_col or view_col, identity, -int(view.shift_arr.min()), space_shape))
    return _BuildPlan(steps, repeat_value(views))


class _AgentCollector:
    """The lists of one (episode, agent). ``obs`` has one more entry than the step columns."""

    def __init__(self, episode: Episode, agent_id: Any, env_id: int, policy_id: str, t: int,
                 unroll_id: int, columns: set[str], init_obs: Any,
                 initial: Mapping[str, np.ndarray] | None = None) -> None:
        self.episode, self.agent_id, self.env_id, self.policy_id = episode, agent_id, env_id, policy_id
        self.unroll_id = unroll_id
        self.columns = columns
        self.buffers: dict[str, list[Any]] = {}
        if SB.OBS in columns:
            self.buffers[SB.OBS] = [init_obs]
        self.steps = 0  # steps in the lists (after trimming)
        self.start = 0  # the first step not yet in a built fragment
        self.t0 = int(t)  # the episode timestep of list position 0
        self.initial = dict(initial or {})  # state_out_i -> the initial state (read before the start)
        self.dropped = 0  # steps trimmed off the lists' front

    def add(self, values: Mapping[str, Any]) -> None:
        buffers, columns = self.buffers, self.columns
        for key, value in values.items():
            if key == SB.NEXT_OBS:
                key = SB.OBS  # the one observation store: obs[t + 1] is new_obs[t]
            if key in columns:
                buffer = buffers.get(key)
                if buffer is None:
                    buffer = buffers[key] = []
                buffer.append(value)
        self.steps += 1

    def sampler_column(self, key: str, length: int) -> np.ndarray:
        if key == SB.T:
            return self.t0 + np.arange(length, dtype=np.int64)
        value = {SB.EPS_ID: self.episode.episode_id, SB.ENV_ID: self.env_id,
                 SB.AGENT_INDEX: self.episode.agent_index(self.agent_id), SB.UNROLL_ID: self.unroll_id}[key]
        return np.full(length, value, dtype=np.int64)

    def _source(self, view_col: str, view: ViewRequirement) -> tuple[str, list[Any] | None]:
        data_col = view.data_col or view_col
        if data_col in _SAMPLER_COLUMNS:
            return data_col, None
        if data_col not in self.buffers:
            if self.steps == 0 and data_col != SB.OBS and data_col in self.columns:
                return data_col, []  # a step column before the first step
            raise KeyError(
                f"view {view_col!r} reads column {data_col!r}, which was not collected for "
                f"episode {self.episode.episode_id}; collected: {sorted(self.buffers)} (a view added "
                "after the episode started, or a column the env/policy does not produce)"
            )
        return data_col, self.buffers[data_col]

    def inference_value(self, view_col: str, view: ViewRequirement) -> Any:
        """The view at the current step (the one about to act): past data only."""
        t = self.steps
        data_col, buffer = self._source(view_col, view)
        if buffer is None:
            return episode_view(view, self.sampler_column(data_col, t + 1), timesteps=[t], view_col=view_col)[0]
        if data_col == SB.INFOS:  # dicts, {} outside the steps
            return infos_view(view_col, view, buffer, t, 1)[0]
        shifts = view.shift_arr
        # Only the few entries the window reads are converted (no O(T) copy per step).
        lo, hi = max(0, t + int(shifts.min())), min(len(buffer), t + int(shifts.max()) + 1)
        prefix = self._prefix(data_col, -(t + int(shifts.min())))
        if prefix is not None:  # recurrent state before the episode start: the initial state
            window = np.asarray(buffer[lo:hi], dtype=prefix.dtype).reshape((-1,) + prefix.shape[1:])
            window = np.concatenate([prefix, window])
            return episode_view(view, window, timesteps=[t - lo + len(prefix)], view_col=view_col)[0]
        if hi <= lo:
            fill = _zeros(view_col, view, buffer[0] if buffer else None)
            return map_column(lambda leaf: np.stack([leaf] * len(shifts)), fill) if view.multiple_shifts else fill
        window = stack_steps(buffer[lo:hi], dtype=_DTYPES.get(data_col))
        return map_column(lambda leaf: episode_view(view, leaf, timesteps=[t - lo], view_col=view_col)[0], window)

    def _prefix(self, data_col: str, depth: int) -> np.ndarray | None:
        """``depth`` initial states for a state column read before the episode start, else None."""
        if depth <= 0 or self.dropped or data_col not in self.initial:
            return None
        return state_prefix(self.initial[data_col], depth)

    def build(self, views: Mapping[str, ViewRequirement], plan: _BuildPlan | None = None) -> SampleBatch:
        """The fragment ``[start, steps)`` with every view; ``before`` is the earlier data kept.

        With ``state_in_*`` views of ``batch_repeat_value=R > 1``, the fragment gets
        ``seq_lens`` (sequences of ``R`` steps from its start, the last one shorter).
        ``plan`` is :func:`_build_plan` of ``views`` (made here if not given).
        """
        plan = _build_plan(views) if plan is None else plan
        start, n = self.start, self.steps - self.start
        arrays: dict[str, np.ndarray] = {}
        columns: dict[str, Any] = {}
        for view_col, view, source, identity, deepest, space_shape in plan.steps:
            buffer = None if source in _SAMPLER_COLUMNS else self.buffers.get(source)
            if buffer is None and source not in _SAMPLER_COLUMNS:
                if self.steps:
                    continue  # a column postprocessing writes (advantages, ...): RLlib skips its view here too
                _, buffer = self._source(view_col, view)  # [] before the first step, or the error naming it
            if source == SB.INFOS:  # dicts: shifted reads outside the kept steps are {}
                columns[view_col] = infos_view(view_col, view, buffer, start, n)
                continue
            data = arrays.get(source)
            if data is None:
                data = arrays[source] = (self.sampler_column(source, self.steps) if buffer is None
                                         else stack_steps(buffer, dtype=_DTYPES.get(source)))
            if identity and type(data) is np.ndarray and (space_shape is None or data.shape[1:] == space_shape):
                columns[view_col] = data[start:start + n].copy()  # obs, actions, t, ...: the rows as they are
                continue
            before = map_column(lambda leaf: leaf[:start], data) if start else None
            prefix = self._prefix(source, deepest) if source in self.initial else None
            if prefix is not None:  # state columns: arrays, never nested
                before = prefix.astype(data.dtype) if before is None else np.concatenate([prefix.astype(data.dtype), before])
            columns[view_col] = map_columns(
                lambda leaf, leaf_before: episode_view(view, leaf[start:], num_steps=n, before=leaf_before, view_col=view_col),
                data, before,
            )
        if plan.max_seq_len == 1:  # every view has n rows by construction: no row checks
            return SampleBatch(columns, _trusted_count=n)
        return SampleBatch(columns, seq_lens=sequence_lengths(n, plan.max_seq_len), _max_seq_len=plan.max_seq_len)

    def advance(self, keep: int) -> None:
        """Marks everything built and drops what no view can look back to any more."""
        self.start = self.steps
        drop = max(0, self.start - keep)
        if drop:
            for buffer in self.buffers.values():
                del buffer[:drop]
            self.start -= drop
            self.steps -= drop
            self.t0 += drop
            self.dropped += drop


class SimpleListCollector(SampleCollector):
    """RLlib's default collector: per (episode, agent), one Python list per collected column.

    See the module docstring for what is stored, what inference sees and what a batch
    holds; the arguments are :class:`SampleCollector`'s.

    Attributes:
        forward_pass_agent_keys: Policy id -> the ``(episode_id, agent_id, env_id)`` of the
            rows of the last :meth:`get_inference_input_dict`, in order.

    Examples:
        >>> import gymnasium as gym, numpy as np
        >>> from cadence.interop.rllib.policy import RandomPolicy
        >>> policy = RandomPolicy(gym.spaces.Discrete(3), gym.spaces.Discrete(2), {})
        >>> collector = SimpleListCollector({"default_policy": policy})
        >>> collector.add_init_obs(Episode(1, 0), 0, 0, "default_policy", 0, np.int64(2))
        >>> sorted(collector.get_inference_input_dict("default_policy"))
        ['agent_index', 'eps_id', 'obs', 'prev_actions', 'prev_rewards', 'rewards', 'seq_lens', 't', 'terminateds', 'truncateds', 'unroll_id']
    """

    def __init__(
        self, policy_map: Mapping[str, Any], clip_rewards: bool | float | None = None,
        callbacks: DefaultCallbacks | None = None, multiple_episodes_in_batch: bool = True,
        rollout_fragment_length: int = 200, count_steps_by: str = "env_steps", worker: Any = None,
    ) -> None:
        super().__init__(policy_map, clip_rewards, callbacks, multiple_episodes_in_batch,
                         rollout_fragment_length, count_steps_by, worker)
        self._agents: dict[tuple[int, Any], _AgentCollector] = {}
        self._episodes: dict[int, Episode] = {}
        self._queued: dict[str, list[tuple[int, Any]]] = {}
        self.forward_pass_agent_keys: dict[str, list[tuple[int, Any, int]]] = {}
        self._inference_cache: dict[str, tuple[tuple[Any, ...], list[tuple[str, ViewRequirement, str, int | None]]]] = {}
        self._plan_cache: dict[str, tuple[tuple[Any, ...], _BuildPlan]] = {}
        self._pending: list[tuple[str, SampleBatch]] = []
        self._env_steps = 0
        self._agent_steps = 0
        self._next_unroll_id = 0

    def _views(self, policy_id: str) -> Mapping[str, ViewRequirement]:
        if policy_id not in self.policy_map:
            raise KeyError(f"policy id {policy_id!r} is not in the policy map {sorted(self.policy_map)}")
        return self.policy_map[policy_id].view_requirements

    def _unroll_id(self) -> int:
        self._next_unroll_id += 1
        return self._next_unroll_id - 1

    def buffers(self, episode_id: int, agent_id: Any = 0) -> dict[str, list[Any]]:
        """The lists held for (episode, agent): one per collected column, ``obs`` once.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> collector = SimpleListCollector({"p": RandomPolicy(gym.spaces.Discrete(3), gym.spaces.Discrete(2), {})})
            >>> collector.add_init_obs(Episode(5, 0), 0, 0, "p", 0, np.int64(0))
            >>> {key: len(value) for key, value in collector.buffers(5).items()}
            {'obs': 1}
        """
        return self._agents[(episode_id, agent_id)].buffers

    def add_init_obs(
        self, episode: Episode, agent_id: Any, env_id: int, policy_id: str, t: int, init_obs: Any,
    ) -> None:
        """Starts (episode, agent) with its reset observation at timestep ``t``; queues it for inference.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> collector = SimpleListCollector({"p": RandomPolicy(gym.spaces.Discrete(3), gym.spaces.Discrete(2), {})})
            >>> collector.add_init_obs(Episode(5, 0), 0, 0, "p", 0, np.int64(0))
            >>> collector.get_inference_input_dict("p")["obs"].tolist()
            [0]
        """
        views = self._views(policy_id)
        # Only what some view reads is stored (pruned columns are not collected at all).
        columns = {view.data_col or key for key, view in views.items()}
        self._episodes[episode.episode_id] = episode
        episode.last_observation = init_obs
        self._agents[(episode.episode_id, agent_id)] = _AgentCollector(
            episode, agent_id, env_id, policy_id, t, self._unroll_id(), columns, init_obs,
            initial_states(self.policy_map[policy_id]),
        )
        self._queued.setdefault(policy_id, []).append((episode.episode_id, agent_id))

    def add_action_reward_next_obs(
        self, episode_id: int, agent_id: Any, env_id: int, policy_id: str, agent_done: bool,
        values: Mapping[str, Any],
    ) -> None:
        """Records one step (``actions``, ``rewards``, dones, ``infos``, ``new_obs``, policy
        outputs); queues the agent unless done.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> collector = SimpleListCollector({"p": RandomPolicy(gym.spaces.Discrete(3), gym.spaces.Discrete(2), {})})
            >>> collector.add_init_obs(Episode(5, 0), 0, 0, "p", 0, np.int64(0))
            >>> collector.add_action_reward_next_obs(5, 0, 0, "p", False, {
            ...     "new_obs": np.int64(2), "actions": np.int64(1), "rewards": 3.0, "terminateds": False, "truncateds": False})
            >>> len(collector.buffers(5)["obs"]), collector.get_inference_input_dict("p")["prev_rewards"].tolist()
            (2, [3.0])
        """
        key = (episode_id, agent_id)
        if key not in self._agents:
            raise KeyError(f"(episode {episode_id}, agent {agent_id!r}) has no init obs; call add_init_obs() first")
        if SB.NEXT_OBS not in values:
            raise KeyError(f"values must hold {SB.NEXT_OBS!r} (the observation after the step); got {sorted(values)}")
        if SB.REWARDS in values and self.clip_rewards:
            values = dict(values)  # the caller's dict stays as it is
            reward = float(values[SB.REWARDS])
            values[SB.REWARDS] = (np.sign(reward) if self.clip_rewards is True
                                  else float(np.clip(reward, -self.clip_rewards, self.clip_rewards)))
        agent = self._agents[key]
        agent.add(values)
        self._agent_steps += 1
        agent.episode.last_observation = values[SB.NEXT_OBS]
        queue = self._queued.setdefault(policy_id, [])
        if not agent_done and key not in queue:  # queued once, even if no inference ran in between
            queue.append(key)

    def episode_step(self, episode: Episode) -> None:
        """Counts one env step of ``episode``.

        Examples:
            >>> episode = Episode(1, 0)
            >>> collector = SimpleListCollector({})
            >>> collector.episode_step(episode); episode.length, collector.total_env_steps()
            (1, 1)
        """
        episode.length += 1
        self._env_steps += 1

    def total_env_steps(self) -> int:
        """Env steps collected since the last build.

        Examples:
            >>> SimpleListCollector({}).total_env_steps()
            0
        """
        return self._env_steps

    def total_agent_steps(self) -> int:
        """Agent steps (recorded transitions, all agents) collected since the last build.

        Examples:
            >>> SimpleListCollector({}).total_agent_steps()
            0
        """
        return self._agent_steps

    def get_inference_input_dict(self, policy_id: str) -> SampleBatch:
        """The input dict for the agents queued for ``policy_id`` (see
        ``forward_pass_agent_keys``); empties the queue.

        Views with a positive shift (the future) and views not marked
        ``used_for_compute_actions`` are left out.

        Examples:
            >>> import gymnasium as gym, numpy as np
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> collector = SimpleListCollector({"p": RandomPolicy(gym.spaces.Discrete(3), gym.spaces.Discrete(2), {})})
            >>> collector.get_inference_input_dict("p").count
            0
        """
        views = self._views(policy_id)
        keys = self._queued.pop(policy_id, [])
        agents = [self._agents[key] for key in keys]
        self.forward_pass_agent_keys[policy_id] = [(a.episode.episode_id, a.agent_id, a.env_id) for a in agents]
        columns: dict[str, Any] = {}
        for view_col, view, data_col, shift in (self._inference_views(policy_id, views) if agents else ()):
            if shift is None:  # windows, sampler columns, infos: the general reader
                values = [agent.inference_value(view_col, view) for agent in agents]
            else:  # one past step (obs, prev_actions, ...): that list entry as it is
                values = []
                for agent in agents:
                    buffer, index = agent.buffers.get(data_col), agent.steps + shift
                    if buffer is not None and 0 <= index < len(buffer):
                        values.append(buffer[index])
                    elif index < 0 and data_col not in agent.initial:  # before the episode start: zeros
                        values.append(_zeros(view_col, view, buffer[0] if buffer else None))
                    else:  # recurrent state's initial value, or the error naming a missing column
                        values.append(agent.inference_value(view_col, view))
            if data_col == SB.INFOS:  # dicts, but data, not structure
                columns[view_col] = np.stack(values)
            elif is_structure(values[0]):
                columns[view_col] = stack_steps(values, dtype=_DTYPES.get(data_col))
            elif len(values) == 1:  # one row: a copy with a batch axis (np.stack costs several times more)
                columns[view_col] = np.array(values[0], dtype=_DTYPES.get(data_col))[None]
            else:
                columns[view_col] = np.asarray(values, dtype=_DTYPES.get(data_col))
        if not agents:
            return SampleBatch(columns)
        # one row per agent in every column, by construction: no checks at every step
        columns[SB.SEQ_LENS] = np.ones(len(agents), np.int32)
        return SampleBatch(columns, _max_seq_len=1, _trusted_count=len(agents))

    def _inference_views(
        self, policy_id: str, views: Mapping[str, ViewRequirement]
    ) -> list[tuple[str, ViewRequirement, str, int | None]]:
        """``(view_col, view, data_col, shift)`` of each inference view; ``shift`` None unless one past step."""
        # Chosen once per set of views, not at every step; a view added, replaced (the seed
        # adds next_actions after construction) or changed (view_changes) changes the choice.
        key = (tuple(views.items()), view_changes())
        cached = self._inference_cache.get(policy_id)
        if cached is None or cached[0] != key:
            chosen = []
            for view_col, view in key[0]:
                if not view.used_for_compute_actions or int(view.shift_arr.max()) > 0:
                    continue
                data_col = view.data_col or view_col
                one_step = not view.multiple_shifts and data_col not in _SAMPLER_COLUMNS and data_col != SB.INFOS
                chosen.append((view_col, view, data_col, int(view.shift_arr[0]) if one_step else None))
            cached = self._inference_cache[policy_id] = (key, chosen)
        return cached[1]

    def _plan(self, policy_id: str, views: Mapping[str, ViewRequirement]) -> _BuildPlan:
        # As the inference views: made again when a view is added, replaced or changed.
        key = (tuple(views.items()), view_changes())
        cached = self._plan_cache.get(policy_id)
        if cached is None or cached[0] != key:
            cached = self._plan_cache[policy_id] = (key, _build_plan(views))
        return cached[1]

    def _keep(self, views: Mapping[str, ViewRequirement]) -> int:
        # The deepest look back of any view: a later fragment (or inference) may read that far.
        return max([0] + [-int(view.shift_arr.min()) for view in views.values()])

    def postprocess_episode(
        self, episode: Episode, is_done: bool = False, check_dones: bool = False, build: bool = False,
    ) -> SampleBatch | MultiAgentBatch | None:
        """Builds and postprocesses the episode's data so far; returns the batches if ``build``.

        Builds each agent's fragment, runs ``postprocess_trajectory`` (one episode only), the
        ``on_postprocess_trajectory`` callback, then drops the non-training columns. A cut
        (not done) episode gets a new ``unroll_id`` for its next fragment.

        Raises:
            ValueError: ``check_dones`` and the episode's last step is neither terminated nor
                truncated; ``postprocess_trajectory`` changed the number of rows.
            TypeError: ``postprocess_trajectory`` did not return a SampleBatch.

        Examples:
            >>> SimpleListCollector({}).postprocess_episode(Episode(1, 0), build=True) is None
            True
        """
        agent_keys = [key for key in self._agents if key[0] == episode.episode_id]
        # Every agent's fragment is built first: each one's postprocessing sees the others'.
        originals: dict[Any, tuple[str, Any, SampleBatch]] = {}
        for key in agent_keys:
            agent = self._agents[key]
            if agent.steps > agent.start:
                policy = self.policy_map[agent.policy_id]
                views = policy.view_requirements
                originals[agent.agent_id] = (agent.policy_id, policy, agent.build(views, self._plan(agent.policy_id, views)))
        for agent_id, (policy_id, policy, batch) in originals.items():
            if check_dones and is_done:
                last = [bool(batch[col][-1]) for col in (SB.TERMINATEDS, SB.TRUNCATEDS) if col in batch]
                if last and not any(last):
                    raise ValueError(
                        f"episode {episode.episode_id} (agent {agent_id!r}) ended but its last step "
                        "has terminateds=False and truncateds=False"
                    )
            rows = batch.count
            others = {other: value for other, value in originals.items() if other != agent_id}
            post = policy.postprocess_trajectory(batch, others, episode)
            if not isinstance(post, SampleBatch):
                raise TypeError(f"postprocess_trajectory must return a SampleBatch, got {type(post).__name__}")
            self.callbacks.on_postprocess_trajectory(
                worker=self.worker, episode=episode, agent_id=agent_id, policy_id=policy_id,
                policies=self.policy_map, postprocessed_batch=post, original_batches=originals,
            )
            if post.count != rows:
                raise ValueError(
                    f"postprocess_trajectory (policy {policy_id!r}, agent {agent_id!r}) returned {post.count} rows "
                    f"for a fragment of {rows}; expected {rows}"
                )
            views = policy.view_requirements
            missing = [
                (col, view.data_col or col) for col, view in views.items()
                if view.used_for_training and col not in post and col not in _SAMPLER_COLUMNS
            ]
            if missing:
                col, data_col = missing[0]
                raise KeyError(
                    f"view {col!r} reads column {data_col!r}, which neither the env, the policy nor "
                    f"postprocess_trajectory produced (policy {policy_id!r}); the batch has {sorted(post.keys())}"
                )
            for col in list(post.keys()):
                view = views.get(col)
                if view is not None and not view.used_for_training and col not in _ALWAYS_TRAINED:
                    del post[col]
            self._pending.append((policy_id, post))
        for key in agent_keys:
            if is_done:
                del self._agents[key]
            else:
                agent = self._agents[key]
                agent.advance(self._keep(self.policy_map[agent.policy_id].view_requirements))
                agent.unroll_id = self._unroll_id()
        if is_done:
            self._episodes.pop(episode.episode_id, None)
        if build:
            return self._flush(episode.length)
        return None

    def _flush(self, env_steps: int) -> SampleBatch | MultiAgentBatch | None:
        """The pending batches, per policy (a SampleBatch if only ``"default_policy"``)."""
        batches, self._pending = self._pending, []
        self._env_steps = self._agent_steps = 0
        if not batches:
            return None
        per_policy: dict[str, list[SampleBatch]] = {}
        for policy_id, batch in batches:
            per_policy.setdefault(policy_id, []).append(batch)
        return MultiAgentBatch.wrap_as_needed(
            {pid: items[0] if len(items) == 1 else concat_samples(items) for pid, items in per_policy.items()},
            env_steps,
        )

    def try_build_truncated_episode_multi_agent_batch(self) -> list[SampleBatch | MultiAgentBatch]:
        """Once ``rollout_fragment_length`` steps are collected: all fragments, built.

        Examples:
            >>> SimpleListCollector({}, rollout_fragment_length=5).try_build_truncated_episode_multi_agent_batch()
            []
        """
        count = self._env_steps if self.count_steps_by == "env_steps" else self._agent_steps
        if count < self.rollout_fragment_length:
            return []
        for episode in list(self._episodes.values()):
            self.postprocess_episode(episode, is_done=False)
        batch = self._flush(self._env_steps)
        return [] if batch is None else [batch]

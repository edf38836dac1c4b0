"""RLlib's :class:`SyncSampler`: steps a worker's envs and returns postprocessed batches.

One ``get_data()`` call steps every env in lock-step, calling the policy once per step
for all envs (one batched input dict from the collector), and returns one SampleBatch:

* ``"truncate_episodes"``: exactly ``rollout_fragment_length`` env steps per env, crossing
  episode boundaries; every episode end and every fragment end is postprocessed on its
  own (``postprocess_trajectory`` never sees two episodes); an episode cut by the fragment
  end keeps its ``eps_id`` and continues in the next call with a new ``unroll_id``.
* ``"complete_episodes"``: steps until at least one episode ends and returns the episodes
  that ended, each whole from its first step (``t == 0``); the fragment length is ignored.
  Episodes still running continue in the next call.

Episode ends: the env's ``terminated``/``truncated``, or the ``horizon`` (then
``truncateds=True`` is written and the env reset); with ``soft_horizon`` the episode ends
at the horizon with no done written and no reset: a new episode (new ``eps_id``, ``t``
from 0) goes on from the current observation. With ``no_done_at_end`` no done is ever
written, and envs are still reset. A horizon above a gymnasium ``TimeLimit``'s
``max_episode_steps`` raises that limit (the seed).

Envs are gymnasium envs; an unbatched Cadence ``EnvBase`` is wrapped by
:func:`~cadence.interop.rllib.env_adapter.as_gymnasium_env` (one ``"observation"`` entry;
its own time limit cannot be raised by a horizon).
Episode ids come from a ``numpy.random.Generator`` seeded with ``seed``, which also seeds
each env's first reset. :class:`AsyncSampler` runs the same loop in a background thread and hands batches
over through a bounded queue.

Examples:
    >>> import gymnasium as gym
    >>> from cadence.interop.rllib.policy import RandomPolicy
    >>> env = gym.make("CartPole-v1")
    >>> policy = RandomPolicy(env.observation_space, env.action_space, {})
    >>> policy._initialize_loss_from_dummy_batch()
    >>> sampler = SyncSampler(envs=[env], policy_map={"default_policy": policy}, rollout_fragment_length=10, seed=0)
    >>> batch = sampler.get_data()
    >>> batch.count, batch["t"][0], sorted(batch)[:3]
    (10, np.int64(0), ['actions', 'agent_index', 'eps_id'])
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from cadence.interop.rllib.callbacks import DefaultCallbacks
from cadence.interop.rllib.env_adapter import as_gymnasium_env
from cadence.interop.rllib.collectors import Episode, SampleCollector, SimpleListCollector, _to_numpy
from cadence.interop.rllib.sample_batch import DEFAULT_POLICY_ID, SampleBatch, concat_samples

__all__ = ["AsyncSampler", "BATCH_MODES", "SyncSampler", "raise_time_limit"]

BATCH_MODES = ("truncate_episodes", "complete_episodes")
SB = SampleBatch


def raise_time_limit(env: gym.Env, horizon: int) -> bool:
    """Raises every ``TimeLimit`` in ``env``'s wrapper chain to at least ``horizon`` steps.

    Args:
        env: A gymnasium env, possibly wrapped.
        horizon: The episode horizon wanted.

    Returns:
        Whether a limit was raised.

    Examples:
        >>> env = gym.make("CartPole-v1")
        >>> raise_time_limit(env, 600), env.spec.max_episode_steps
        (True, 600)
    """
    raised, layer = False, env
    while layer is not None:
        if isinstance(layer, gym.wrappers.TimeLimit) and layer._max_episode_steps < horizon:
            # The wrapper reads this attribute at every step; the spec reports it.
            layer._max_episode_steps = int(horizon)
            raised = True
        layer = getattr(layer, "env", None)
    if raised and getattr(env.unwrapped, "spec", None) is not None:
        env.unwrapped.spec.max_episode_steps = int(horizon)
    return raised


class SyncSampler:
    """Steps envs with the policy and collects postprocessed batches (see the module).

    Args:
        envs: The gymnasium (or unbatched Cadence) envs, ``num_envs_per_worker`` of them,
            stepped in lock-step.
        policy_map: Policy id -> policy; single-agent: one entry, used for every env.
        worker: The rollout worker (passed to the callbacks).
        callbacks: A :class:`DefaultCallbacks` instance.
        rollout_fragment_length: Env steps per env per :meth:`get_data` (truncate mode).
        batch_mode: ``"truncate_episodes"`` or ``"complete_episodes"``.
        horizon: Cut episodes after this many steps (``None``: never).
        soft_horizon: At the horizon, no done and no reset (needs ``horizon``).
        no_done_at_end: Never write a done.
        seed: Seeds the generator of episode ids and the envs' first resets.
        clip_rewards: As :class:`SimpleListCollector`.
        sample_collector_class: The :class:`SampleCollector` subclass to use.
        explore: Passed to ``compute_actions_from_input_dict``.

    Raises:
        ValueError: No envs, an unknown batch mode, a fragment length below 1,
            ``soft_horizon`` without ``horizon``, a horizon below 1.
        TypeError: An env that is neither a gymnasium env nor a Cadence ``EnvBase``.

    Examples:
        >>> import gymnasium as gym
        >>> from cadence.interop.rllib.policy import RandomPolicy
        >>> envs = [gym.make("CartPole-v1") for _ in range(2)]
        >>> policy = RandomPolicy(envs[0].observation_space, envs[0].action_space, {})
        >>> sampler = SyncSampler(envs=envs, policy_map={"default_policy": policy},
        ...                       batch_mode="complete_episodes", seed=1)
        >>> batch = sampler.get_data()
        >>> all(episode["t"][0] == 0 for episode in batch.split_by_episode())
        True
    """

    def __init__(
        self, *, envs: Sequence[gym.Env], policy_map: Mapping[str, Any], worker: Any = None,
        callbacks: DefaultCallbacks | None = None, rollout_fragment_length: int = 200,
        batch_mode: str = "truncate_episodes", horizon: int | None = None, soft_horizon: bool = False,
        no_done_at_end: bool = False, seed: int | None = None, clip_rewards: bool | float | None = None,
        sample_collector_class: type[SampleCollector] = SimpleListCollector, explore: bool = True,
    ) -> None:
        if not envs:
            raise ValueError("SyncSampler: envs is empty; expected at least one gymnasium env")
        wrapped = []
        for i, env in enumerate(envs):
            try:
                wrapped.append(as_gymnasium_env(env))
            except TypeError as error:
                raise TypeError(f"SyncSampler: envs[{i}]: {error}") from None
        if batch_mode not in BATCH_MODES:
            raise ValueError(f"batch_mode: expected one of {BATCH_MODES}, got {batch_mode!r}")
        if not isinstance(rollout_fragment_length, int) or rollout_fragment_length < 1:
            raise ValueError(f"rollout_fragment_length: expected an int >= 1, got {rollout_fragment_length!r}")
        if horizon is not None and (not isinstance(horizon, int) or horizon < 1):
            raise ValueError(f"horizon: expected an int >= 1 or None, got {horizon!r}")
        if soft_horizon and horizon is None:
            raise ValueError("soft_horizon=True needs a horizon; got horizon=None")
        if DEFAULT_POLICY_ID not in policy_map or len(policy_map) != 1:
            raise ValueError(
                f"policy_map: single-agent sampling expects exactly {{{DEFAULT_POLICY_ID!r}: policy}}, "
                f"got {sorted(policy_map)} (multi-agent is not supported yet)"
            )
        self.envs = wrapped
        self.policy_map = policy_map
        self.worker = worker
        self.callbacks = callbacks if callbacks is not None else DefaultCallbacks()
        self.rollout_fragment_length = rollout_fragment_length
        self.batch_mode = batch_mode
        self.horizon, self.soft_horizon, self.no_done_at_end = horizon, bool(soft_horizon), bool(no_done_at_end)
        self.explore = explore
        self._rng = np.random.default_rng(seed)
        if horizon is not None:
            for env in self.envs:
                raise_time_limit(env, horizon)
        truncate = batch_mode == "truncate_episodes"
        # The collector counts all envs' steps together: L steps per env is L * num_envs.
        self.collector = sample_collector_class(
            policy_map, clip_rewards, self.callbacks, multiple_episodes_in_batch=truncate,
            rollout_fragment_length=rollout_fragment_length * len(self.envs) if truncate else 2**62,
            worker=worker,
        )
        self._episodes: list[Episode | None] = [None] * len(self.envs)
        self._first_reset = True

    def _new_episode_id(self) -> int:
        return int(self._rng.integers(0, 2**31 - 1))

    def _start_episode(self, env_id: int, obs: Any) -> None:
        episode = Episode(self._new_episode_id(), env_id)
        self._episodes[env_id] = episode
        self.collector.add_init_obs(episode, 0, env_id, DEFAULT_POLICY_ID, 0, obs)
        self.callbacks.on_episode_start(
            worker=self.worker, base_env=self.envs, policies=self.policy_map, episode=episode, env_index=env_id
        )

    def _reset(self, env_id: int) -> Any:
        env = self.envs[env_id]
        if self._first_reset:  # seeded once; later resets continue the env's own generator
            obs, _ = env.reset(seed=int(self._rng.integers(0, 2**31 - 1)))
        else:
            obs, _ = env.reset()
        return obs

    def _step(self) -> list[SampleBatch]:
        """One env step in every env; returns the batches built (complete mode: finished episodes)."""
        policy = self.policy_map[DEFAULT_POLICY_ID]
        input_dict = self.collector.get_inference_input_dict(DEFAULT_POLICY_ID)
        keys = self.collector.forward_pass_agent_keys[DEFAULT_POLICY_ID]
        episodes = [self._episodes[env_id] for _, _, env_id in keys]
        actions, state_outs, extra = policy.compute_actions_from_input_dict(
            input_dict, explore=self.explore, timestep=policy.global_timestep, episodes=episodes
        )
        actions = _to_numpy(actions)
        state_outs = [_to_numpy(state) for state in state_outs]
        extra = _to_numpy(dict(extra))
        nested = [key for key, value in extra.items() if isinstance(value, Mapping)]
        if isinstance(actions, Mapping) or nested:
            raise NotImplementedError(
                "SyncSampler: nested (dict) actions or extra fetches are not supported yet; got "
                f"{'dict actions' if isinstance(actions, Mapping) else f'dict extra fetches {nested}'}"
            )
        if actions.ndim == 0 or len(actions) != len(keys):
            raise ValueError(
                f"compute_actions_from_input_dict returned actions of shape {actions.shape} for {len(keys)} envs; "
                "expected one per row of the input dict (shape [B, ...])"
            )
        built: list[SampleBatch] = []
        for row, (episode_id, agent_id, env_id) in enumerate(keys):
            episode = self._episodes[env_id]
            action = actions[row]
            obs, reward, terminated, truncated, info = self.envs[env_id].step(action)
            env_done = bool(terminated or truncated)
            hit_horizon = self.horizon is not None and episode.length + 1 >= self.horizon and not env_done
            soft_cut = hit_horizon and self.soft_horizon
            over = env_done or hit_horizon
            values: dict[str, Any] = {
                SB.ACTIONS: action, SB.REWARDS: reward, SB.NEXT_OBS: obs, SB.INFOS: info,
                # no_done_at_end: never a done; soft horizon: no done at the horizon.
                SB.TERMINATEDS: bool(terminated) and not self.no_done_at_end,
                SB.TRUNCATEDS: (bool(truncated) or (hit_horizon and not soft_cut)) and not self.no_done_at_end,
            }
            values.update({f"state_out_{i}": state[row] for i, state in enumerate(state_outs)})
            values.update({key: value[row] for key, value in extra.items()})
            episode.total_reward += float(reward)
            self.collector.add_action_reward_next_obs(episode_id, agent_id, env_id, DEFAULT_POLICY_ID, over, values)
            self.collector.episode_step(episode)
            self.callbacks.on_episode_step(
                worker=self.worker, base_env=self.envs, policies=self.policy_map, episode=episode, env_index=env_id
            )
            if not over:
                continue
            batch = self.collector.postprocess_episode(
                episode, is_done=True, check_dones=not (self.no_done_at_end or soft_cut),
                build=self.batch_mode == "complete_episodes",
            )
            if batch is not None:
                built.append(batch)
            self.callbacks.on_episode_end(
                worker=self.worker, base_env=self.envs, policies=self.policy_map, episode=episode, env_index=env_id
            )
            # Soft horizon: the env goes on from where it is, in a new logical episode.
            self._start_episode(env_id, obs if soft_cut else self._reset(env_id))
        if self.batch_mode == "truncate_episodes":
            built.extend(self.collector.try_build_truncated_episode_multi_agent_batch())
        return built

    def _keep_going(self) -> bool:
        return True

    def get_data(self) -> SampleBatch:
        """Samples one rollout (see the module): a fragment per env, or whole episodes.

        Returns:
            The postprocessed SampleBatch (fragments / episodes concatenated).

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> envs = [gym.make("CartPole-v1") for _ in range(2)]
            >>> policy = RandomPolicy(envs[0].observation_space, envs[0].action_space, {})
            >>> sampler = SyncSampler(envs=envs, policy_map={"default_policy": policy}, rollout_fragment_length=4)
            >>> sampler.get_data().count  # 4 steps in each of the 2 envs
            8
        """
        for env_id, episode in enumerate(self._episodes):
            if episode is None:
                self._start_episode(env_id, self._reset(env_id))
        self._first_reset = False
        batches: list[SampleBatch] = []
        while not batches:
            if not self._keep_going():  # an AsyncSampler being stopped: leave mid-rollout
                return SampleBatch()
            batches = self._step()
        return batches[0] if len(batches) == 1 else concat_samples(batches)


class AsyncSampler(SyncSampler):
    """A :class:`SyncSampler` whose loop runs in a background thread (RLlib's ``sample_async``).

    The thread starts at the first :meth:`get_data` and keeps up to ``queue_size`` batches
    ready; :meth:`get_data` takes the next one. As in RLlib, the policy is shared with the
    caller: weights set while the thread samples apply from the next inference call on, so
    a batch may mix two versions of the policy. Callbacks run in the thread.

    Args:
        queue_size: Batches sampled ahead, >= 1.
        **kwargs: :class:`SyncSampler`'s arguments.

    Raises:
        ValueError: ``queue_size`` below 1 (and :class:`SyncSampler`'s checks).

    Examples:
        >>> import gymnasium as gym
        >>> from cadence.interop.rllib.policy import RandomPolicy
        >>> env = gym.make("CartPole-v1")
        >>> policy = RandomPolicy(env.observation_space, env.action_space, {})
        >>> sampler = AsyncSampler(envs=[env], policy_map={"default_policy": policy}, rollout_fragment_length=8)
        >>> sampler.get_data().count, sampler.get_data().count
        (8, 8)
        >>> sampler.stop()
    """

    def __init__(self, *, queue_size: int = 1, **kwargs: Any) -> None:
        if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
            raise ValueError(f"AsyncSampler: queue_size must be an int >= 1, got {queue_size!r}")
        super().__init__(**kwargs)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _keep_going(self) -> bool:
        return not self._stopping.is_set()

    def _put(self, item: Any) -> None:
        # Polls so that stop() is noticed while the queue is full.
        while not self._stopping.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._put(SyncSampler.get_data(self))
        except BaseException as error:  # handed to the caller, who re-raises it
            self._put(error)

    def get_data(self, timeout: float | None = None) -> SampleBatch:
        """The next batch from the background thread (started on the first call).

        Args:
            timeout: Seconds to wait (``None``: as long as it takes).

        Raises:
            RuntimeError: The thread failed (the cause is chained), the sampler was stopped,
                or nothing came within ``timeout``.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> env = gym.make("CartPole-v1")
            >>> sampler = AsyncSampler(envs=[env], rollout_fragment_length=4,
            ...                        policy_map={"default_policy": RandomPolicy(env.observation_space, env.action_space, {})})
            >>> sampler.get_data(timeout=60).count
            4
            >>> sampler.stop()
        """
        if self._stopping.is_set():
            raise RuntimeError("AsyncSampler: get_data() after stop()")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cadence-async-sampler", daemon=True)
            self._thread.start()
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"AsyncSampler: no batch within {timeout} s") from None
        if isinstance(item, BaseException):
            self._stopping.set()
            raise RuntimeError(f"AsyncSampler: the sampling thread failed: {type(item).__name__}: {item}") from item
        return item

    def stop(self, timeout: float = 10.0) -> None:
        """Stops the thread (after its current env step) and waits up to ``timeout`` seconds.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> env = gym.make("CartPole-v1")
            >>> AsyncSampler(envs=[env], policy_map={"default_policy": RandomPolicy(env.observation_space, env.action_space, {})}).stop()
        """
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

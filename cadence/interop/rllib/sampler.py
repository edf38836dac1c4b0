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

Multi-agent (envs that are :class:`~cadence.interop.rllib.multi_agent_env.MultiAgentEnv`):
each env is wrapped in a :class:`~cadence.interop.rllib.multi_agent_env.MultiAgentEnvChecker`
(a break of the contract is an error at the step it happens). Each agent's policy is
``policy_mapping_fn(agent_id, episode, worker=...)`` (asked once per agent and episode);
each step calls every policy once, for all the agents (of all envs) mapped to it that are
in the last obs and not done. An agent's transition (its action, then the reward, done
flags, infos and obs it gets the next time it is in an obs) is recorded when that obs
comes, so agents may act in turns; an agent first seen mid-episode starts there
(``t`` 0); a done agent is not asked again while the others go on. At the episode's end
the env must give the last obs of every live agent (an error otherwise, as in RLlib);
with ``no_done_at_end``, or at a ``horizon`` cut, an agent that acted but is not in the
last obs loses that last action (there is no outcome to record). The
fragment length counts env steps or agent steps (``count_steps_by``; a build happens at
the first env step that reaches it, so agents acting together can pass it), and
``get_data`` returns a :class:`MultiAgentBatch` whose ``env_steps()`` are the env steps
it covers (a plain SampleBatch if ``"default_policy"`` is the only policy).

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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from cadence.interop.rllib.callbacks import DefaultCallbacks
from cadence.interop.rllib.env_adapter import as_gymnasium_env
from cadence.interop.rllib._batch_columns import leaves, map_column, to_numpy
from cadence.interop.rllib.collectors import Episode, SampleCollector, SimpleListCollector
from cadence.interop.rllib.multi_agent_batch import MultiAgentBatch
from cadence.interop.rllib.multi_agent_env import ALL_KEY, MultiAgentEnv, MultiAgentEnvChecker
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
        policy_mapping_fn: Multi-agent: ``fn(agent_id, episode, worker=...) -> policy_id``
            (``None``: every agent to ``"default_policy"``).
        count_steps_by: ``"env_steps"`` or ``"agent_steps"``: the unit of
            ``rollout_fragment_length``.

    Raises:
        ValueError: No envs, an unknown batch mode, a fragment length below 1,
            ``soft_horizon`` without ``horizon``, a horizon below 1.
        TypeError: An env that is neither a gymnasium env nor a Cadence ``EnvBase``;
            MultiAgentEnvs mixed with single-agent envs.

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
        policy_mapping_fn: Callable[..., str] | None = None, count_steps_by: str = "env_steps",
    ) -> None:
        if not envs:
            raise ValueError("SyncSampler: envs is empty; expected at least one gymnasium env")
        multi = [isinstance(env, (MultiAgentEnv, MultiAgentEnvChecker)) for env in envs]
        if any(multi) and not all(multi):
            raise TypeError(
                f"SyncSampler: envs mix MultiAgentEnvs (indices {[i for i, m in enumerate(multi) if m]}) and "
                "single-agent envs; expected one kind"
            )
        self.multi_agent = all(multi)
        wrapped = []
        for i, env in enumerate(envs):
            if self.multi_agent:  # checked at every step: a break of the contract is named where it happens
                wrapped.append(env if isinstance(env, MultiAgentEnvChecker)
                               else MultiAgentEnvChecker(env, require_last_obs=not no_done_at_end))
                continue
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
        if self.multi_agent and not policy_map:
            raise ValueError("policy_map: expected at least one policy for a MultiAgentEnv, got none")
        if not self.multi_agent and (DEFAULT_POLICY_ID not in policy_map or len(policy_map) != 1):
            raise ValueError(
                f"policy_map: single-agent sampling expects exactly {{{DEFAULT_POLICY_ID!r}: policy}}, "
                f"got {sorted(policy_map)} (multi-agent sampling with several policies needs a MultiAgentEnv)"
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
            count_steps_by=count_steps_by, worker=worker,
        )
        self.policy_mapping_fn = policy_mapping_fn
        self._episodes: list[Episode | None] = [None] * len(self.envs)
        # Multi-agent: per env, the agents that acted and wait for their next obs -> the step's values.
        self._acted: list[dict[Any, dict[str, Any]]] = [{} for _ in self.envs]
        self._first_reset = True

    def _new_episode_id(self) -> int:
        return int(self._rng.integers(0, 2**31 - 1))

    def _policy_id(self, episode: Episode, agent_id: Any) -> str:
        policy_id = episode.policy_for(agent_id)
        if policy_id not in self.policy_map:
            raise KeyError(
                f"policy_mapping_fn mapped agent {agent_id!r} to policy {policy_id!r}, which is not in the "
                f"policies {sorted(self.policy_map)}"
            )
        return policy_id

    def _start_episode(self, env_id: int, obs: Any) -> None:
        episode = Episode(self._new_episode_id(), env_id, self.policy_mapping_fn, self.worker)
        self._episodes[env_id] = episode
        if self.multi_agent:
            self._acted[env_id] = {}
            asked = self.envs[env_id].asked  # the agents in obs that are not done, in the obs' order
            for agent_id in [agent_id for agent_id in obs if agent_id in asked]:
                self.collector.add_init_obs(
                    episode, agent_id, env_id, self._policy_id(episode, agent_id), 0, obs[agent_id])
        else:
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

    def _compute(self, policy_id: str) -> tuple[list[tuple[int, Any, int]], Any, list[Any], dict[str, Any]]:
        """One policy call for all agents queued for ``policy_id``: (keys, actions, state outs, extras)."""
        policy = self.policy_map[policy_id]
        input_dict = self.collector.get_inference_input_dict(policy_id)
        keys = self.collector.forward_pass_agent_keys[policy_id]
        if not keys:
            return keys, None, [], {}
        episodes = [self._episodes[env_id] for _, _, env_id in keys]
        actions, state_outs, extra = policy.compute_actions_from_input_dict(
            input_dict, explore=self.explore, timestep=policy.global_timestep, episodes=episodes
        )
        actions = to_numpy(actions)
        state_outs = [to_numpy(state) for state in state_outs]
        extra = to_numpy(dict(extra))
        checked = [(SB.ACTIONS, actions)] if isinstance(actions, np.ndarray) else leaves(SB.ACTIONS, actions)
        for path, leaf in checked:  # Dict/Tuple actions: every leaf has a row per agent
            if leaf.ndim == 0 or len(leaf) != len(keys):
                raise ValueError(
                    f"compute_actions_from_input_dict returned {path} of shape {leaf.shape} for {len(keys)} "
                    "agents; expected one per row of the input dict (shape [B, ...])"
                )
        return keys, actions, state_outs, extra

    def _step(self) -> list[SampleBatch | MultiAgentBatch]:
        """One env step in every env; returns the batches built (complete mode: finished episodes)."""
        if self.multi_agent:
            return self._step_multi_agent()
        keys, actions, state_outs, extra = self._compute(DEFAULT_POLICY_ID)
        built: list[SampleBatch | MultiAgentBatch] = []
        on_episode_step = _overridden(self.callbacks, "on_episode_step")  # None: the default does nothing
        for row, (episode_id, agent_id, env_id) in enumerate(keys):
            episode = self._episodes[env_id]
            action = _row(actions, row)
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
            if state_outs:
                values.update({f"state_out_{i}": state[row] for i, state in enumerate(state_outs)})
            if extra:
                values.update({key: _row(value, row) for key, value in extra.items()})
            episode.total_reward += float(reward)
            self.collector.add_action_reward_next_obs(episode_id, agent_id, env_id, DEFAULT_POLICY_ID, over, values)
            self.collector.episode_step(episode)
            if on_episode_step is not None:
                on_episode_step(
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

    def _step_multi_agent(self) -> list[SampleBatch | MultiAgentBatch]:
        """The multi-agent step: one policy call per policy, then each env steps with its action dict."""
        action_dicts: list[dict[Any, Any]] = [{} for _ in self.envs]
        for policy_id in self.policy_map:
            keys, actions, state_outs, extra = self._compute(policy_id)
            for row, (_, agent_id, env_id) in enumerate(keys):
                action = _row(actions, row)
                values: dict[str, Any] = {SB.ACTIONS: action}
                values.update({f"state_out_{i}": state[row] for i, state in enumerate(state_outs)})
                values.update({key: _row(value, row) for key, value in extra.items()})
                action_dicts[env_id][agent_id] = action
                self._acted[env_id][agent_id] = values
        built: list[SampleBatch | MultiAgentBatch] = []
        on_episode_step = _overridden(self.callbacks, "on_episode_step")  # None: the default does nothing
        for env_id, env in enumerate(self.envs):
            episode = self._episodes[env_id]
            obs, rewards, terminateds, truncateds, infos = env.step(action_dicts[env_id])
            all_done = bool(terminateds[ALL_KEY]) or bool(truncateds[ALL_KEY])
            hit_horizon = self.horizon is not None and episode.length + 1 >= self.horizon and not all_done
            soft_cut = hit_horizon and self.soft_horizon
            over = all_done or hit_horizon
            acted = self._acted[env_id]
            for agent_id, agent_obs in obs.items():
                policy_id = self._policy_id(episode, agent_id)
                reward = float(rewards.get(agent_id, 0.0))
                episode.total_reward += reward
                reward_key = (agent_id, policy_id)
                episode.agent_rewards[reward_key] = episode.agent_rewards.get(reward_key, 0.0) + reward
                terminated = bool(terminateds.get(agent_id, False)) or bool(terminateds[ALL_KEY])
                truncated = bool(truncateds.get(agent_id, False)) or bool(truncateds[ALL_KEY])
                truncated = truncated or (hit_horizon and not soft_cut)
                agent_done = terminated or truncated or over
                values = acted.pop(agent_id, None)
                if values is None:  # an agent that joins: its first obs (nothing to record if already done)
                    if not agent_done:
                        self.collector.add_init_obs(episode, agent_id, env_id, policy_id, 0, agent_obs)
                    continue
                values.update({
                    SB.REWARDS: reward, SB.NEXT_OBS: agent_obs, SB.INFOS: infos.get(agent_id, {}),
                    SB.TERMINATEDS: terminated and not self.no_done_at_end,
                    SB.TRUNCATEDS: truncated and not self.no_done_at_end,
                })
                self.collector.add_action_reward_next_obs(
                    episode.episode_id, agent_id, env_id, policy_id, agent_done, values)
            self.collector.episode_step(episode)
            if on_episode_step is not None:
                on_episode_step(
                    worker=self.worker, base_env=self.envs, policies=self.policy_map, episode=episode, env_index=env_id
                )
            if not over:
                continue
            # Agents that acted but got no obs by a horizon cut (or with no_done_at_end): no outcome to record.
            batch = self.collector.postprocess_episode(
                episode, is_done=True, build=self.batch_mode == "complete_episodes")
            if batch is not None:
                built.append(batch)
            self.callbacks.on_episode_end(
                worker=self.worker, base_env=self.envs, policies=self.policy_map, episode=episode, env_index=env_id
            )
            if soft_cut:  # the env goes on: the agents asked next start a new logical episode
                self._start_episode(env_id, obs)
            else:
                self._start_episode(env_id, self._reset(env_id))
        if self.batch_mode == "truncate_episodes":
            built.extend(self.collector.try_build_truncated_episode_multi_agent_batch())
        return built

    def _keep_going(self) -> bool:
        return True

    def get_data(self) -> SampleBatch | MultiAgentBatch:
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
        batches: list[SampleBatch | MultiAgentBatch] = []
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

    def get_data(self, timeout: float | None = None) -> SampleBatch | MultiAgentBatch:
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


def _row(value: Any, row: int) -> Any:
    """Row ``row`` of a batched policy output, leaf by leaf for Dict/Tuple actions."""
    return value[row] if isinstance(value, np.ndarray) else map_column(lambda leaf: leaf[row], value)


def _overridden(callbacks: DefaultCallbacks, name: str) -> Callable[..., None] | None:
    """``callbacks.<name>``, or None where it is DefaultCallbacks' own (which does nothing)."""
    method = getattr(callbacks, name)
    if getattr(method, "__func__", None) is getattr(DefaultCallbacks, name):
        return None
    return method

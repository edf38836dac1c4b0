"""RLlib's ``RolloutWorker`` (old API stack): envs + policies + sampler.

``RolloutWorker(env_creator=..., policy_spec=..., policy_config=...)`` makes
``num_envs_per_worker`` envs with ``env_creator(env_context)``, builds the policy from the
first env's spaces, runs its view pruning (``_initialize_loss_from_dummy_batch``) if its
constructor did not, and samples with a :class:`SyncSampler`. The sampling keys of
``policy_config`` have the seed's meaning:

============================  ==========================================================
``batch_mode``                ``"truncate_episodes"`` (default) or ``"complete_episodes"``
``rollout_fragment_length``   env steps per env per ``sample()`` (truncate mode), int >= 1
``num_envs_per_worker``       envs stepped together, int >= 1
``horizon``                   cut episodes after this many steps (``None``: never)
``soft_horizon``              at the horizon: no done, no reset (needs ``horizon``)
``no_done_at_end``            never write a done
``seed``                      seeds episode ids and env resets (plus ``1000 * worker_index``)
``callbacks``                 a :class:`DefaultCallbacks` subclass
``clip_rewards``              ``True`` (sign), a float bound, or ``None``
``explore``                   passed to the policy's ``compute_actions_from_input_dict``
``sample_async``              sample in a background thread (:class:`AsyncSampler`)
``multiagent``                ``{"policies", "policy_mapping_fn", "count_steps_by"}`` (below)
============================  ==========================================================

``multiagent`` (with an ``env_creator`` returning a
:class:`~cadence.interop.rllib.multi_agent_env.MultiAgentEnv`): ``policies`` maps policy ids
to ``(policy_cls or None, obs_space or None, act_space or None, config)`` (or an object
with ``policy_class``, ``observation_space``, ``action_space``, ``config``, as RLlib's
``PolicySpec``; or ``None``); ``None`` takes ``policy_spec``'s class and the spaces of an
agent that ``policy_mapping_fn(agent_id, None, worker=self)`` maps to the policy (from a
``Dict`` space keyed by agent id, or the shared space); a set of ids is all defaults.
``policy_mapping_fn(agent_id, episode, worker, **kwargs) -> policy_id`` (default: every
agent to ``"default_policy"``); ``count_steps_by``: ``"env_steps"`` (default) or
``"agent_steps"``, the unit of ``rollout_fragment_length``. ``sample()`` then returns a
:class:`MultiAgentBatch` (a SampleBatch if ``"default_policy"`` is the only policy).

Other RLlib trainer keys (``lr``, ``gamma``, ``model``, ``train_batch_size``, ...) and the
keys of the policy class's ``DEFAULT_CONFIG`` (if it has one) pass through to the policy;
any other key is an error. ``env_creator`` may return a gymnasium env or an unbatched
Cadence ``EnvBase`` (wrapped by :func:`~cadence.interop.rllib.env_adapter.as_gymnasium_env`),
or a ``MultiAgentEnv``.

Examples:
    >>> import gymnasium as gym
    >>> from cadence.interop.rllib.policy import RandomPolicy
    >>> worker = RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy,
    ...                        policy_config={"rollout_fragment_length": 5, "num_envs_per_worker": 2, "seed": 0})
    >>> batch = worker.sample()
    >>> batch.count, sorted(set(batch["env_id"].tolist())) if "env_id" in batch else "no env_id view"
    (10, 'no env_id view')

    Multi-agent: two agents that act together, one policy each:

    >>> from cadence.interop.rllib.multi_agent_env import MultiAgentEnv
    >>> class Pair(MultiAgentEnv):
    ...     def __init__(self, ctx):
    ...         super().__init__()
    ...         self._agent_ids = {"x", "y"}
    ...         self.observation_space, self.action_space = gym.spaces.Discrete(5), gym.spaces.Discrete(2)
    ...     def reset(self, *, seed=None, options=None):
    ...         return {"x": 0, "y": 0}, {}
    ...     def step(self, action_dict):
    ...         return {"x": 1, "y": 1}, {"x": 1.0, "y": 0.0}, {"__all__": False}, {"__all__": False}, {}
    >>> worker = RolloutWorker(env_creator=Pair, policy_spec=RandomPolicy, policy_config={
    ...     "rollout_fragment_length": 3, "multiagent": {
    ...         "policies": {"px": None, "py": None},
    ...         "policy_mapping_fn": lambda agent_id, episode, worker, **kw: "p" + agent_id,
    ...         "count_steps_by": "env_steps"}})
    >>> batch = worker.sample()
    >>> type(batch).__name__, batch.env_steps(), batch.agent_steps(), batch["px"]["rewards"].tolist()
    ('MultiAgentBatch', 3, 6, [1.0, 1.0, 1.0])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from cadence.interop.rllib.callbacks import DefaultCallbacks
from cadence.interop.rllib.env_adapter import as_gymnasium_env
from cadence.interop.rllib.collectors import SampleCollector, SimpleListCollector
from cadence.interop.rllib.multi_agent_batch import MultiAgentBatch
from cadence.interop.rllib.multi_agent_env import MultiAgentEnv, agent_space
from cadence.interop.rllib.policy import Policy
from cadence.interop.rllib.sample_batch import DEFAULT_POLICY_ID, SampleBatch
from cadence.interop.rllib.sampler import BATCH_MODES, AsyncSampler, SyncSampler

__all__ = ["EnvContext", "RolloutWorker", "WORKER_DEFAULTS"]

#: The sampling keys this worker reads, with their defaults.
WORKER_DEFAULTS: dict[str, Any] = {
    "batch_mode": "truncate_episodes",
    "rollout_fragment_length": 200,
    "num_envs_per_worker": 1,
    "horizon": None,
    "soft_horizon": False,
    "no_done_at_end": False,
    "seed": None,
    "callbacks": DefaultCallbacks,
    "clip_rewards": None,
    "explore": True,
    "sample_collector": SimpleListCollector,
    "env_config": {},
    "sample_async": False,
    "multiagent": {},
}
# RLlib trainer keys that the policy (not the worker) reads: accepted and passed through.
_PASS_THROUGH = frozenset({
    "lr", "gamma", "lambda", "model", "train_batch_size", "sgd_minibatch_size", "num_sgd_iter", "framework",
    "num_workers", "num_gpus", "grad_clip", "entropy_coeff", "vf_loss_coeff", "kl_coeff", "kl_target",
    "clip_param", "vf_clip_param", "use_gae", "use_critic", "optimizer", "exploration_config", "normalize_actions",
    "clip_actions", "env", "log_level", "evaluation_interval", "create_env_on_driver", "preprocessor_pref",
    "observation_filter", "compress_observations", "min_sample_timesteps_per_iteration", "lr_schedule",
    "entropy_coeff_schedule", "shuffle_sequences", "_disable_preprocessor_api", "count_steps_by",
    # read by the WorkerSet (cadence.interop.rllib.worker_set), not by one worker
    "num_env_runners", "num_cpus_per_worker", "num_cpus_per_env_runner", "restart_failed_env_runners",
    "ignore_env_runner_failures", "max_num_env_runner_restarts", "delay_between_env_runner_restarts_s",
    "env_runner_health_probe_timeout_s",
})


class EnvContext(dict):
    """RLlib's env context: the ``env_config`` dict plus the worker's index and the env's.

    Examples:
        >>> ctx = EnvContext({"size": 3}, worker_index=1, vector_index=0)
        >>> ctx["size"], ctx.worker_index, ctx.vector_index
        (3, 1, 0)
    """

    def __init__(self, env_config: Mapping[str, Any], worker_index: int = 0, vector_index: int = 0,
                 num_workers: int = 0) -> None:
        super().__init__(env_config)
        self.worker_index, self.vector_index, self.num_workers = worker_index, vector_index, num_workers


def _check_config(config: Mapping[str, Any], policy_cls: type) -> dict[str, Any]:
    """The worker's keys (defaults filled in); all problems raised together in one error."""
    known = set(WORKER_DEFAULTS) | _PASS_THROUGH | set(getattr(policy_cls, "DEFAULT_CONFIG", None) or {})
    problems = [f"unknown key {key!r}" for key in config if key not in known]
    cfg = {key: config.get(key, default) for key, default in WORKER_DEFAULTS.items()}
    if cfg["batch_mode"] not in BATCH_MODES:
        problems.append(f"batch_mode: expected one of {BATCH_MODES}, got {cfg['batch_mode']!r}")
    for key in ("rollout_fragment_length", "num_envs_per_worker"):
        value = cfg[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            problems.append(f"{key}: expected an int >= 1, got {value!r}")
    horizon = cfg["horizon"]
    if horizon is not None and (isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1):
        problems.append(f"horizon: expected an int >= 1 or None, got {horizon!r}")
    for key in ("soft_horizon", "no_done_at_end", "sample_async"):
        if not isinstance(cfg[key], bool):
            problems.append(f"{key}: expected a bool, got {cfg[key]!r}")
    if cfg["soft_horizon"] is True and horizon is None:
        problems.append("soft_horizon=True needs a horizon; got horizon=None")
    seed = cfg["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        problems.append(f"seed: expected an int or None, got {seed!r}")
    callbacks = cfg["callbacks"]
    if not (isinstance(callbacks, type) and issubclass(callbacks, DefaultCallbacks)):
        problems.append(f"callbacks: expected a DefaultCallbacks subclass (the class), got {callbacks!r}")
    collector = cfg["sample_collector"]
    if not (isinstance(collector, type) and issubclass(collector, SampleCollector)):
        problems.append(f"sample_collector: expected a SampleCollector subclass, got {collector!r}")
    problems.extend(_check_multiagent(cfg["multiagent"]))
    if problems:
        raise ValueError("RolloutWorker: bad policy_config: " + "; ".join(problems))
    return cfg


_MULTIAGENT_KEYS = ("policies", "policy_mapping_fn", "count_steps_by", "policies_to_train")


def _check_multiagent(multiagent: Any) -> list[str]:
    """The problems of the ``multiagent`` dict (empty if none)."""
    if not isinstance(multiagent, Mapping):
        return [f"multiagent: expected a dict, got {type(multiagent).__name__}"]
    problems = [f"multiagent: unknown key {key!r} (expected one of {list(_MULTIAGENT_KEYS)})"
                for key in multiagent if key not in _MULTIAGENT_KEYS]
    count = multiagent.get("count_steps_by", "env_steps")
    if count not in ("env_steps", "agent_steps"):
        problems.append(f"multiagent.count_steps_by: expected 'env_steps' or 'agent_steps', got {count!r}")
    mapping_fn = multiagent.get("policy_mapping_fn")
    if mapping_fn is not None and not callable(mapping_fn):
        problems.append(f"multiagent.policy_mapping_fn: expected a function, got {type(mapping_fn).__name__}")
    policies = multiagent.get("policies", {})
    if not isinstance(policies, (Mapping, set, frozenset, list, tuple)):
        problems.append(f"multiagent.policies: expected a dict of policy specs or a set of ids, got "
                        f"{type(policies).__name__}")
    to_train = multiagent.get("policies_to_train")
    if not (to_train is None or callable(to_train) or isinstance(to_train, (set, frozenset, list, tuple))):
        problems.append(f"multiagent.policies_to_train: expected None, a collection of policy ids or a function "
                        f"(policy_id, batch) -> bool, got {type(to_train).__name__}")
    return problems


def _policies_to_train_fn(to_train: Any, policy_ids: Sequence[str]) -> Callable[..., bool]:
    """RLlib's ``is_policy_to_train(policy_id, batch=None)`` from ``multiagent.policies_to_train``."""
    if to_train is None:
        return lambda policy_id, batch=None: True
    if callable(to_train):
        return to_train
    unknown = sorted(set(to_train) - set(policy_ids))
    if unknown:
        raise ValueError(f"RolloutWorker: multiagent.policies_to_train names {unknown}, which are not among the "
                         f"policies {sorted(policy_ids)}")
    chosen = frozenset(to_train)
    return lambda policy_id, batch=None: policy_id in chosen


def _parse_policy_spec(policy_id: str, spec: Any) -> tuple[Any, Any, Any, dict[str, Any]]:
    """``(cls, obs_space, act_space, config)`` of one ``multiagent.policies`` entry."""
    if spec is None:
        return None, None, None, {}
    if isinstance(spec, (tuple, list)) and len(spec) == 4:
        cls, obs_space, act_space, config = spec
    elif hasattr(spec, "policy_class") and hasattr(spec, "config"):  # RLlib's PolicySpec
        cls, obs_space, act_space, config = (spec.policy_class, getattr(spec, "observation_space", None),
                                             getattr(spec, "action_space", None), spec.config)
    else:
        raise TypeError(
            f"multiagent.policies[{policy_id!r}]: expected (policy_cls or None, obs_space, act_space, config), a "
            f"PolicySpec or None, got {spec!r:.100}"
        )
    if cls is not None and not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise TypeError(f"multiagent.policies[{policy_id!r}]: the policy class must be a Policy subclass or None, "
                        f"got {cls!r}")
    return cls, obs_space, act_space, dict(config or {})


class RolloutWorker:
    """Collects experience from envs with a policy; RLlib's keyword names (see the module).

    Args:
        env_creator: ``env_creator(env_context)`` -> a gymnasium env or an unbatched Cadence env.
        policy_spec: A :class:`Policy` subclass, or ``(cls, observation_space,
            action_space, config)`` with ``None`` for what the env gives.
        policy_config: The config (sampling keys above, the rest for the policy).
        env_config: Overrides ``policy_config["env_config"]`` for the env context.
        worker_index, num_workers: This worker's index (0: local) and the worker count.
        recreated_worker: Whether this worker replaces a failed one (a
            :class:`~cadence.interop.rllib.worker_set.WorkerSet` restart); nothing else differs.

    Attributes:
        policy_map: ``{"default_policy": policy}``, or one policy per ``multiagent.policies`` id.
        policy_mapping_fn: ``multiagent.policy_mapping_fn`` (``None``: all to ``"default_policy"``).
        is_policy_to_train: ``fn(policy_id, batch=None) -> bool`` from
            ``multiagent.policies_to_train`` (``None``: every policy; a collection of ids;
            or RLlib's function); :meth:`learn_on_batch` trains only those.
        env: The first env; ``envs``: all of them. ``sampler``: the :class:`SyncSampler`
            (an :class:`AsyncSampler` with ``sample_async``).
        callbacks: The :class:`DefaultCallbacks` instance.

    Raises:
        ValueError: Unknown config keys or impossible combinations (one error naming all).
        TypeError: A ``policy_spec`` that is not a Policy subclass; an env that is neither
            a gymnasium env, a Cadence ``EnvBase`` nor a ``MultiAgentEnv``; a bad entry of
            ``multiagent.policies`` (names the policy id).

    Examples:
        >>> import gymnasium as gym
        >>> from cadence.interop.rllib.policy import RandomPolicy
        >>> RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy,
        ...               policy_config={"soft_horizon": True, "rollout_fragment_length": 0, "lrr": 1})
        Traceback (most recent call last):
        ...
        ValueError: RolloutWorker: bad policy_config: unknown key 'lrr'; rollout_fragment_length: expected an int >= 1, got 0; soft_horizon=True needs a horizon; got horizon=None
    """

    def __init__(
        self, *, env_creator: Callable[[EnvContext], Any], policy_spec: Any = None,
        policy_config: Mapping[str, Any] | None = None, env_config: Mapping[str, Any] | None = None,
        worker_index: int = 0, num_workers: int = 0, recreated_worker: bool = False,
    ) -> None:
        config = dict(policy_config or {})
        multiagent = config.get("multiagent") or {}
        has_policies = isinstance(multiagent, Mapping) and bool(multiagent.get("policies"))
        policy_cls, obs_space, act_space, extra_config = self._policy_spec(policy_spec, optional=has_policies)
        config.update(extra_config)
        cfg = _check_config(config, policy_cls)
        self.policy_config = config
        self.worker_index, self.num_workers = worker_index, num_workers
        self.recreated_worker = recreated_worker
        env_config = dict(cfg["env_config"] if env_config is None else env_config)
        self.envs = [
            env_creator(EnvContext(env_config, worker_index, vector_index, num_workers))
            for vector_index in range(cfg["num_envs_per_worker"])
        ]
        multi = [isinstance(env, MultiAgentEnv) for env in self.envs]
        for i, env in enumerate(self.envs):
            if multi[i]:
                continue
            try:
                self.envs[i] = as_gymnasium_env(env)
            except TypeError:
                raise TypeError(
                    f"RolloutWorker: env_creator returned a {type(env).__name__} for env {i}; expected a "
                    "gymnasium.Env, an unbatched Cadence EnvBase or a MultiAgentEnv"
                ) from None
        self.env = self.envs[0]
        if has_policies and not multi[0]:
            raise ValueError(
                f"RolloutWorker: multiagent.policies {sorted(multiagent['policies'])} needs an env_creator that "
                f"returns a MultiAgentEnv; got a {type(self.envs[0]).__name__}"
            )
        # RLlib's per-worker seed offset: workers of one trainer draw different episodes.
        seed = None if cfg["seed"] is None else cfg["seed"] + 1000 * worker_index
        self.policy_mapping_fn: Callable[..., str] | None = multiagent.get("policy_mapping_fn")
        if multi[0]:
            specs = multiagent.get("policies") or {DEFAULT_POLICY_ID: None}
            if not isinstance(specs, Mapping):
                specs = {policy_id: None for policy_id in specs}
            self.policy_map: dict[str, Policy] = {
                policy_id: self._build_policy(policy_id, spec, policy_cls, obs_space, act_space, config)
                for policy_id, spec in specs.items()
            }
        else:
            self.policy_map = {
                DEFAULT_POLICY_ID: self._ready(policy_cls(obs_space or self.env.observation_space,
                                                          act_space or self.env.action_space, config))
            }
        self.is_policy_to_train = _policies_to_train_fn(multiagent.get("policies_to_train"), list(self.policy_map))
        self.callbacks: DefaultCallbacks = cfg["callbacks"]()
        sampler_cls = AsyncSampler if cfg["sample_async"] else SyncSampler
        self.sampler: SyncSampler = sampler_cls(
            envs=self.envs, policy_map=self.policy_map, worker=self, callbacks=self.callbacks,
            rollout_fragment_length=cfg["rollout_fragment_length"], batch_mode=cfg["batch_mode"],
            horizon=cfg["horizon"], soft_horizon=cfg["soft_horizon"], no_done_at_end=cfg["no_done_at_end"],
            seed=seed, clip_rewards=cfg["clip_rewards"], sample_collector_class=cfg["sample_collector"],
            explore=cfg["explore"], policy_mapping_fn=self.policy_mapping_fn,
            count_steps_by=multiagent.get("count_steps_by", "env_steps"),
        )

    @staticmethod
    def _ready(policy: Policy) -> Policy:
        if not policy.loss_initialized:
            policy._initialize_loss_from_dummy_batch()
        return policy

    def _agent_spaces(self, policy_id: str) -> tuple[gym.Space | None, gym.Space | None]:
        """The spaces of the first agent mapped to ``policy_id`` (the env's own if shared)."""
        env = self.env
        agent_ids = env.get_agent_ids()
        obs_space, act_space = getattr(env, "observation_space", None), getattr(env, "action_space", None)
        for agent_id in sorted(agent_ids, key=repr):
            mapped = (DEFAULT_POLICY_ID if self.policy_mapping_fn is None
                      else self.policy_mapping_fn(agent_id, None, worker=self))
            if mapped == policy_id:
                return agent_space(obs_space, agent_id, agent_ids), agent_space(act_space, agent_id, agent_ids)
        per_agent = [isinstance(space, gym.spaces.Dict) and bool(agent_ids) and set(space.spaces) <= agent_ids
                     for space in (obs_space, act_space)]
        return (None if per_agent[0] else obs_space, None if per_agent[1] else act_space)

    def _build_policy(self, policy_id: str, spec: Any, default_cls: type | None, obs_space: Any, act_space: Any,
                      config: Mapping[str, Any]) -> Policy:
        cls, own_obs, own_act, own_config = _parse_policy_spec(policy_id, spec)
        cls = cls or default_cls
        if cls is None:
            raise TypeError(f"multiagent.policies[{policy_id!r}]: no policy class given and no policy_spec to "
                            "default to; expected a Policy subclass")
        env_obs, env_act = (None, None) if own_obs is not None and own_act is not None else self._agent_spaces(policy_id)
        observation_space, action_space = own_obs or obs_space or env_obs, own_act or act_space or env_act
        if observation_space is None or action_space is None:
            raise ValueError(
                f"multiagent.policies[{policy_id!r}]: no {'observation' if observation_space is None else 'action'} "
                f"space given, and no agent of {sorted(map(repr, self.env.get_agent_ids()))} is mapped to it by "
                "policy_mapping_fn to take it from; expected (cls, obs_space, act_space, config)"
            )
        return self._ready(cls(observation_space, action_space, {**config, **own_config}))

    @staticmethod
    def _policy_spec(spec: Any, optional: bool = False) -> tuple[Any, gym.Space | None, gym.Space | None,
                                                                  dict[str, Any]]:
        if isinstance(spec, (tuple, list)) and len(spec) == 4:
            cls, obs_space, act_space, config = spec
        else:
            cls, obs_space, act_space, config = spec, None, None, None
        if cls is None and optional:
            return None, obs_space, act_space, dict(config or {})
        if not (isinstance(cls, type) and issubclass(cls, Policy)):
            raise TypeError(
                f"RolloutWorker: policy_spec must be a Policy subclass or (cls, obs_space, act_space, config); "
                f"got {spec!r}"
            )
        return cls, obs_space, act_space, dict(config or {})

    def sample(self) -> SampleBatch | MultiAgentBatch:
        """One rollout (see :class:`SyncSampler`), after ``on_sample_end``.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> worker = RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy,
            ...                        policy_config={"batch_mode": "complete_episodes", "seed": 3})
            >>> batch = worker.sample()
            >>> int(batch["t"][0]), bool(batch["terminateds"][-1] or batch["truncateds"][-1])
            (0, True)
        """
        batch = self.sampler.get_data()
        self.callbacks.on_sample_end(worker=self, samples=batch)
        return batch

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy | None:
        """The policy under ``policy_id`` (``None`` if there is none, as RLlib).

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> worker = RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy)
            >>> type(worker.get_policy()).__name__, worker.get_policy("other")
            ('RandomPolicy', None)
        """
        return self.policy_map.get(policy_id)

    def get_weights(self) -> dict[str, Any]:
        """``{policy_id: policy.get_weights()}``.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy).get_weights()
            {'default_policy': {}}
        """
        return {policy_id: policy.get_weights() for policy_id, policy in self.policy_map.items()}

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Sets each policy's weights from ``{policy_id: weights}``.

        Raises:
            KeyError: A policy id this worker does not have (names it).

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> worker = RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy)
            >>> worker.set_weights({"default_policy": {}})
        """
        for policy_id, policy_weights in weights.items():
            if policy_id not in self.policy_map:
                raise KeyError(f"set_weights: no policy {policy_id!r}; this worker has {sorted(self.policy_map)}")
            self.policy_map[policy_id].set_weights(policy_weights)

    def get_policies_to_train(self, batch: SampleBatch | MultiAgentBatch | None = None) -> set[str]:
        """The ids of the policies that :meth:`learn_on_batch` trains (``multiagent.policies_to_train``).

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy).get_policies_to_train()
            {'default_policy'}
        """
        return {policy_id for policy_id in self.policy_map if self.is_policy_to_train(policy_id, batch)}

    def learn_on_batch(self, samples: SampleBatch | MultiAgentBatch) -> dict[str, Any]:
        """Trains the policies to train on their part of ``samples``; returns ``{policy_id: learner info}``.

        A policy left out by ``multiagent.policies_to_train`` is not trained and has no entry.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> worker = RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy)
            >>> worker.learn_on_batch(worker.sample())  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            NotImplementedError: RandomPolicy.learn_on_batch(): the default makes one gradient step on loss() ...
        """
        batches = samples.policy_batches if isinstance(samples, MultiAgentBatch) else {DEFAULT_POLICY_ID: samples}
        return {policy_id: self.policy_map[policy_id].learn_on_batch(batch)
                for policy_id, batch in batches.items() if self.is_policy_to_train(policy_id, samples)}

    def apply(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``func(self, *args, **kwargs)``: what a WorkerSet runs on each of its workers.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> worker = RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy)
            >>> worker.apply(lambda w, n: w.worker_index + n, 5)
            5
        """
        return func(self, *args, **kwargs)

    def ping(self) -> str:
        """``"pong"``: RLlib's health probe (a WorkerSet probes for the process id instead, which
        tells a restarted process from the old one).

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy).ping()
            'pong'
        """
        return "pong"

    def stop(self) -> None:
        """Stops an async sampler's thread and closes the envs.

        Examples:
            >>> import gymnasium as gym
            >>> from cadence.interop.rllib.policy import RandomPolicy
            >>> RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy).stop()
        """
        if isinstance(self.sampler, AsyncSampler):
            self.sampler.stop()
        for env in self.envs:
            env.close()

"""RLlib's ``MultiAgentEnv`` contract and a checker that names every break of it.

A :class:`MultiAgentEnv` speaks in dicts keyed by agent id:

* ``reset(*, seed=None, options=None) -> (obs, infos)``: the agents that act first;
* ``step(action_dict) -> (obs, rewards, terminateds, truncateds, infos)``: ``action_dict``
  holds one action for each agent of the last ``obs`` (and only those); ``obs`` holds the
  agents that act next plus those that just finished (their last observation);
  ``rewards``/``infos`` only for agents in ``obs``; ``terminateds``/``truncateds`` for agents
  in ``obs`` plus the key ``"__all__"`` (the whole episode is over).

Agents may act in turns (only some agents in ``obs``), join mid-episode (first seen in an
``obs``) and finish before the others (``terminateds[agent] = True``: not asked again).

:class:`MultiAgentEnvChecker` wraps an env and checks each ``reset``/``step`` as it happens
(the samplers always use it): a break is a ``TypeError`` (not a dict) or ``ValueError``
(a wrong key) naming the step, the agent id or key, what was expected and what came.

Examples:
    >>> import gymnasium as gym
    >>> class Two(MultiAgentEnv):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self._agent_ids = {"a", "b"}
    ...         self.observation_space = gym.spaces.Discrete(3)
    ...         self.action_space = gym.spaces.Discrete(2)
    ...     def reset(self, *, seed=None, options=None):
    ...         return {"a": 0, "b": 0}, {}
    ...     def step(self, action_dict):
    ...         return {"a": 1}, {"a": 1.0, "b": 0.5}, {"__all__": False}, {"__all__": False}, {}
    >>> env = MultiAgentEnvChecker(Two())
    >>> env.reset()
    ({'a': 0, 'b': 0}, {})
    >>> env.step({"a": 1, "b": 0})
    Traceback (most recent call last):
    ...
    ValueError: MultiAgentEnv step 1: rewards has agent 'b', which is not in the obs (expected rewards only for the agents in obs ['a']); got rewards keys ['a', 'b']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym

__all__ = ["ALL_KEY", "MultiAgentEnv", "MultiAgentEnvChecker", "agent_space"]

#: The key of ``terminateds``/``truncateds`` that ends the whole episode.
ALL_KEY = "__all__"
# RLlib lets infos carry data for no agent under this key.
_COMMON_INFOS = "__common__"


class MultiAgentEnv(gym.Env):
    """RLlib's base class of multi-agent envs (see the module for the contract).

    Subclasses set ``self._agent_ids`` (a set of the possible agent ids), the spaces
    ``observation_space``/``action_space`` (one space shared by all agents, or a
    ``gymnasium.spaces.Dict`` keyed by agent id) and define ``reset`` and ``step``.

    Attributes:
        _agent_ids: The possible agent ids.

    Examples:
        >>> env = MultiAgentEnv()
        >>> env._agent_ids = {1, 0}
        >>> sorted(env.get_agent_ids())
        [0, 1]
        >>> env.step({})
        Traceback (most recent call last):
        ...
        NotImplementedError: MultiAgentEnv.step() must be defined by a subclass
    """

    def __init__(self) -> None:
        super().__init__()
        if not hasattr(self, "_agent_ids"):
            self._agent_ids: set[Any] = set()

    def get_agent_ids(self) -> set[Any]:
        """The possible agent ids (``_agent_ids``).

        Examples:
            >>> MultiAgentEnv().get_agent_ids()
            set()
        """
        return set(self._agent_ids)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[dict[Any, Any], dict[Any, Any]]:
        """Starts an episode: ``(obs, infos)`` for the agents that act first.

        Examples:
            >>> MultiAgentEnv().reset()
            Traceback (most recent call last):
            ...
            NotImplementedError: MultiAgentEnv.reset() must be defined by a subclass
        """
        raise NotImplementedError(f"{type(self).__name__}.reset() must be defined by a subclass")

    def step(self, action_dict: dict[Any, Any]) -> tuple[dict[Any, Any], ...]:
        """One step: ``(obs, rewards, terminateds, truncateds, infos)``, dicts keyed by agent id.

        Examples:
            >>> MultiAgentEnv().step({0: 1})
            Traceback (most recent call last):
            ...
            NotImplementedError: MultiAgentEnv.step() must be defined by a subclass
        """
        raise NotImplementedError(f"{type(self).__name__}.step() must be defined by a subclass")


def agent_space(space: gym.Space | None, agent_id: Any, agent_ids: set[Any] | None = None) -> gym.Space | None:
    """One agent's space: the Dict's entry if ``space`` is keyed by agent id, else ``space``.

    Args:
        space: The env's ``observation_space`` or ``action_space``.
        agent_id: The agent.
        agent_ids: The env's agent ids (a Dict whose keys are all agent ids is per agent).

    Returns:
        The agent's space (``None`` if ``space`` is ``None``).

    Raises:
        KeyError: A per-agent Dict without that agent (names it and the keys there are).

    Examples:
        >>> spaces = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(5)})
        >>> agent_space(spaces, "b", {"a", "b"}), agent_space(gym.spaces.Discrete(3), "a")
        (Discrete(5), Discrete(3))
    """
    if not isinstance(space, gym.spaces.Dict):
        return space
    keys = set(space.spaces)
    per_agent = bool(keys) and keys <= set(agent_ids) if agent_ids else agent_id in keys
    if not per_agent:
        return space
    if agent_id not in keys:
        raise KeyError(f"space keyed by agent id has no entry for agent {agent_id!r}; it has {_keys(space.spaces)}")
    return space[agent_id]


def _keys(mapping: Mapping[Any, Any]) -> list[str]:
    return sorted(repr(key) if not isinstance(key, str) else key for key in mapping)


class MultiAgentEnvChecker(MultiAgentEnv):
    """Wraps a :class:`MultiAgentEnv` and checks each ``reset``/``step`` against the contract.

    Checked: results are dicts (a 2-tuple from ``reset``, a 5-tuple from ``step``);
    ``"__all__"`` in ``terminateds`` and ``truncateds``; ``rewards``/``infos`` only for agents
    in ``obs`` (``infos`` may hold ``"__common__"``); done flags only for agents in ``obs``;
    an ``obs`` with no agent while ``"__all__"`` is not done; no ``obs`` for an agent that
    is done; at the episode's end (``"__all__"``), the last ``obs`` of every agent still live
    (one that acted and is not done: its last action needs an outcome, as RLlib requires);
    the action dict: only agents asked (in the last ``obs`` and not done), each of them
    once, no step after the end.

    Args:
        env: The env to check.
        require_last_obs: Check the live agents' last obs at the end (RLlib waives it with
            ``no_done_at_end``).

    Attributes:
        env: The wrapped env. ``asked``: the agents the next ``step`` must act for.
        steps: Steps since the last reset.

    Raises:
        TypeError: ``env`` is not a MultiAgentEnv-like object (no ``reset``/``step``).

    Examples:
        >>> import gymnasium as gym
        >>> class Turns(MultiAgentEnv):
        ...     def reset(self, *, seed=None, options=None):
        ...         return {"a": 0}, {}
        ...     def step(self, action_dict):
        ...         return {"b": 0}, {"b": 0.0}, {"__all__": False}, {"__all__": False}, {}
        >>> env = MultiAgentEnvChecker(Turns())
        >>> _ = env.reset()
        >>> env.step({"b": 1})
        Traceback (most recent call last):
        ...
        ValueError: MultiAgentEnv step 1: action for agent 'b', which has no observation yet (an agent acts only after it got an obs); expected actions for ['a']
    """

    def __init__(self, env: Any, require_last_obs: bool = True) -> None:
        if not (callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None))):
            raise TypeError(f"MultiAgentEnvChecker: expected a MultiAgentEnv, got {type(env).__name__}")
        self.env = env
        self.require_last_obs = bool(require_last_obs)
        super().__init__()
        self._agent_ids = set(getattr(env, "_agent_ids", set()) or set())
        self.observation_space = getattr(env, "observation_space", None)
        self.action_space = getattr(env, "action_space", None)
        self.asked: set[Any] = set()
        self.steps = 0
        self._seen: set[Any] = set()
        self._done: set[Any] = set()
        self._over = True

    def get_agent_ids(self) -> set[Any]:
        """The wrapped env's agent ids.

        Examples:
            >>> env = MultiAgentEnv(); env._agent_ids = {"x"}
            >>> MultiAgentEnvChecker(env).get_agent_ids()
            {'x'}
        """
        getter = getattr(self.env, "get_agent_ids", None)
        return set(getter()) if callable(getter) else set(self._agent_ids)

    def _fail(self, where: str, message: str, error: type[Exception] = ValueError) -> Exception:
        return error(f"MultiAgentEnv {where}: {message}")

    def _check_dict(self, where: str, name: str, value: Any) -> dict[Any, Any]:
        if not isinstance(value, Mapping):
            came = f"{type(value).__name__} {value!r:.80}"
            raise self._fail(where, f"{name}: expected a dict keyed by agent id, got {came}", TypeError)
        return dict(value)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[dict[Any, Any], dict[Any, Any]]:
        """Resets the env and checks ``(obs, infos)``.

        Raises:
            TypeError: Not a 2-tuple of dicts (names what came).
            ValueError: An empty obs, or infos for an agent not in obs.

        Examples:
            >>> class Bad(MultiAgentEnv):
            ...     def reset(self, *, seed=None, options=None):
            ...         return [0.0], {}
            >>> MultiAgentEnvChecker(Bad()).reset()
            Traceback (most recent call last):
            ...
            TypeError: MultiAgentEnv reset: obs: expected a dict keyed by agent id, got list [0.0]
        """
        result = self.env.reset(seed=seed, options=options)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise self._fail("reset", f"expected a tuple (obs, infos), got {type(result).__name__} {result!r:.80}",
                             TypeError)
        obs = self._check_dict("reset", "obs", result[0])
        infos = self._check_dict("reset", "infos", result[1])
        if not obs:
            raise self._fail("reset", "obs is empty; expected an observation for at least one agent")
        self._check_subset("reset", "infos", infos, obs, allowed={_COMMON_INFOS})
        self.steps, self._seen, self._done, self._over = 0, set(obs), set(), False
        self.asked = set(obs)
        return obs, infos

    def _check_subset(self, where: str, name: str, mapping: Mapping[Any, Any], obs: Mapping[Any, Any],
                      allowed: set[str] = frozenset()) -> None:
        for key in mapping:
            if key not in obs and key not in allowed:
                raise self._fail(
                    where, f"{name} has agent {key!r}, which is not in the obs (expected {name} only for the agents "
                    f"in obs {_keys(obs)}); got {name} keys {_keys(mapping)}")

    def _check_actions(self, where: str, action_dict: Any) -> None:
        if self._over:
            raise self._fail(where, "step() after the episode ended (terminateds/truncateds['__all__']) or before "
                                    "reset(); expected reset()", RuntimeError)
        actions = self._check_dict(where, "action_dict", action_dict)
        for agent_id in actions:
            if agent_id in self.asked:
                continue
            if agent_id not in self._seen:
                why = "which has no observation yet (an agent acts only after it got an obs)"
            elif agent_id in self._done:
                why = "which is done (terminated or truncated earlier)"
            else:
                why = "which was not asked (it is not in the last obs)"
            raise self._fail(where, f"action for agent {agent_id!r}, {why}; expected actions for {_keys(self.asked)}")
        missing = self.asked - set(actions)
        if missing:
            raise self._fail(where, f"no action for agent(s) {_keys(missing)}, which were in the last obs; "
                                    f"expected actions for {_keys(self.asked)}, got {_keys(actions)}")

    def step(self, action_dict: dict[Any, Any]) -> tuple[dict[Any, Any], ...]:
        """Checks ``action_dict``, steps the env, checks the 5 dicts (see the class).

        Raises:
            TypeError: A result that is not a 5-tuple of dicts, or an action dict that is not one.
            ValueError: A key against the contract (names the agent, the key, what was expected).
            RuntimeError: A step after the episode ended, or before the first reset.

        Examples:
            >>> class NoAll(MultiAgentEnv):
            ...     def reset(self, *, seed=None, options=None):
            ...         return {0: 0}, {}
            ...     def step(self, action_dict):
            ...         return {0: 1}, {0: 1.0}, {0: False}, {"__all__": False}, {}
            >>> env = MultiAgentEnvChecker(NoAll())
            >>> _ = env.reset()
            >>> env.step({0: 1})
            Traceback (most recent call last):
            ...
            ValueError: MultiAgentEnv step 1: terminateds has no '__all__' key; expected '__all__' (is the whole episode over?) next to the agents' flags, got keys ['0']
        """
        where = f"step {self.steps + 1}"
        self._check_actions(where, action_dict)
        result = self.env.step(action_dict)
        if not (isinstance(result, tuple) and len(result) == 5):
            raise self._fail(where, "expected a tuple (obs, rewards, terminateds, truncateds, infos), got "
                                    f"{type(result).__name__} {result!r:.80}", TypeError)
        names = ("obs", "rewards", "terminateds", "truncateds", "infos")
        obs, rewards, terminateds, truncateds, infos = (
            self._check_dict(where, name, value) for name, value in zip(names, result))
        for name, flags in (("terminateds", terminateds), ("truncateds", truncateds)):
            if ALL_KEY not in flags:
                raise self._fail(where, f"{name} has no '__all__' key; expected '__all__' (is the whole episode "
                                        f"over?) next to the agents' flags, got keys {_keys(flags)}")
            self._check_subset(where, name, flags, obs, allowed={ALL_KEY})
        self._check_subset(where, "rewards", rewards, obs)
        self._check_subset(where, "infos", infos, obs, allowed={_COMMON_INFOS})
        over = bool(terminateds[ALL_KEY]) or bool(truncateds[ALL_KEY])
        for agent_id in obs:
            if agent_id in self._done:
                raise self._fail(where, f"obs has agent {agent_id!r}, which is done (terminated or truncated "
                                        "earlier); expected no obs for a done agent")
        if not obs and not over:
            raise self._fail(where, "obs is empty but '__all__' is not done; expected an obs for the agents to act "
                                    "next (or '__all__': True)")
        if over and self.require_last_obs:
            live = [agent for agent in self._seen if agent not in self._done and agent not in obs]
            if live:
                raise self._fail(
                    where, f"the episode ended ('__all__') without a last obs for live agent(s) {_keys(live)} "
                    f"(they acted and are not done); expected the last obs of all live agents at the end, got obs "
                    f"keys {_keys(obs)} (no_done_at_end=True waives this)")
        self.steps += 1
        self._seen |= set(obs)
        done_now = {agent for agent in obs if terminateds.get(agent, False) or truncateds.get(agent, False)}
        self._done |= done_now
        self._over = over
        self.asked = set() if over else set(obs) - done_now
        return obs, rewards, terminateds, truncateds, infos

    def close(self) -> None:
        """Closes the wrapped env.

        Examples:
            >>> MultiAgentEnvChecker(MultiAgentEnv()).close()
        """
        close = getattr(self.env, "close", None)
        if callable(close):
            close()

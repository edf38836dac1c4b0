"""RLlib's sampling callbacks (old API stack): :class:`DefaultCallbacks` and ``override``.

A worker calls, for each env: ``on_episode_start`` when an episode begins (after the
reset, before its first action), ``on_episode_step`` after every env step is recorded,
``on_postprocess_trajectory`` after ``Policy.postprocess_trajectory`` of every fragment or
episode (the batch may still be edited there), ``on_episode_end`` after an episode's last
step and its postprocessing, before the env is reset; and once per ``sample()``,
``on_sample_end`` with the batch returned. All arguments are passed by keyword, with
RLlib's names; ``base_env`` is the sampler's list of gymnasium envs (RLlib passes its
``BaseEnv``; a ``MultiAgentEnv`` appears wrapped in its ``MultiAgentEnvChecker``),
``env_index`` the env's position there. In multi-agent, ``on_postprocess_trajectory`` is
called once per agent, with ``original_batches`` holding every agent of the episode.

Examples:
    >>> class CountSteps(DefaultCallbacks):
    ...     def on_episode_step(self, *, worker, base_env, policies=None, episode, env_index=None, **kwargs):
    ...         episode.user_data["steps"] = episode.user_data.get("steps", 0) + 1
    >>> CountSteps().on_sample_end(worker=None, samples=None)  # the defaults do nothing
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["DefaultCallbacks", "override"]

_F = TypeVar("_F", bound=Callable[..., Any])


def override(parent: type) -> Callable[[_F], _F]:
    """RLlib's ``@override(Parent)``: marks a method as overriding ``Parent``'s (checked).

    Args:
        parent: The class whose method is overridden.

    Returns:
        A decorator returning the method unchanged.

    Raises:
        NameError: ``parent`` has no method of that name (a typo would never be called).

    Examples:
        >>> class Mine(DefaultCallbacks):
        ...     @override(DefaultCallbacks)
        ...     def on_sample_end(self, *, worker, samples, **kwargs):
        ...         pass
        >>> @override(DefaultCallbacks)
        ... def on_sampel_end(self, **kwargs):
        ...     pass
        Traceback (most recent call last):
        ...
        NameError: on_sampel_end does not override anything in DefaultCallbacks
    """

    def check(method: _F) -> _F:
        if not hasattr(parent, method.__name__):
            raise NameError(f"{method.__name__} does not override anything in {parent.__name__}")
        return method

    return check


class DefaultCallbacks:
    """Hooks into sampling; every method does nothing here. Subclass and override some.

    Configured by ``policy_config["callbacks"]`` (the class; the worker makes one instance).

    Examples:
        >>> import numpy as np
        >>> class Seen(DefaultCallbacks):
        ...     def on_sample_end(self, *, worker, samples, **kwargs):
        ...         self.count = len(samples)
        >>> callbacks = Seen()
        >>> callbacks.on_sample_end(worker=None, samples=np.zeros(3))
        >>> callbacks.count
        3
    """

    def on_episode_start(
        self, *, worker: Any, base_env: Any, policies: dict[str, Any], episode: Any,
        env_index: int | None = None, **kwargs: Any,
    ) -> None:
        """An episode began: its reset observation is recorded, no action taken yet.

        Examples:
            >>> DefaultCallbacks().on_episode_start(worker=None, base_env=None, policies={}, episode=None)
        """

    def on_episode_step(
        self, *, worker: Any, base_env: Any, policies: dict[str, Any] | None = None, episode: Any,
        env_index: int | None = None, **kwargs: Any,
    ) -> None:
        """One env step of ``episode`` was recorded (``episode.length`` counts it).

        Examples:
            >>> DefaultCallbacks().on_episode_step(worker=None, base_env=None, episode=None)
        """

    def on_episode_end(
        self, *, worker: Any, base_env: Any, policies: dict[str, Any], episode: Any,
        env_index: int | None = None, **kwargs: Any,
    ) -> None:
        """``episode`` ended (done, or cut at the horizon) and was postprocessed.

        Examples:
            >>> DefaultCallbacks().on_episode_end(worker=None, base_env=None, policies={}, episode=None)
        """

    def on_postprocess_trajectory(
        self, *, worker: Any, episode: Any, agent_id: Any, policy_id: str, policies: dict[str, Any],
        postprocessed_batch: Any, original_batches: dict[Any, Any], **kwargs: Any,
    ) -> None:
        """A fragment was postprocessed; ``postprocessed_batch`` may be edited in place.

        ``original_batches`` maps agent ids to ``(policy_id, policy, batch before postprocessing)``.

        Examples:
            >>> DefaultCallbacks().on_postprocess_trajectory(
            ...     worker=None, episode=None, agent_id=0, policy_id="default_policy", policies={},
            ...     postprocessed_batch=None, original_batches={})
        """

    def on_sample_end(self, *, worker: Any, samples: Any, **kwargs: Any) -> None:
        """``worker.sample()`` is about to return ``samples``.

        Examples:
            >>> DefaultCallbacks().on_sample_end(worker=None, samples=None)
        """

    def on_workers_recreated(
        self, *, algorithm: Any, worker_set: Any, worker_ids: list[int], is_evaluation_workers: bool, **kwargs: Any,
    ) -> None:
        """A :class:`~cadence.interop.rllib.worker_set.WorkerSet` restored the remote workers
        ``worker_ids`` after a failure (they already have the latest weights). ``algorithm``
        is ``None`` outside an algorithm; ``is_evaluation_workers`` is ``False``.

        Examples:
            >>> DefaultCallbacks().on_workers_recreated(algorithm=None, worker_set=None, worker_ids=[1],
            ...                                         is_evaluation_workers=False)
        """

"""RLlib's ``MultiAgentBatch``: one :class:`SampleBatch` per policy, counted in env steps.

As in RLlib, ``count`` (and ``len()``) is the number of *environment* steps the batch covers;
:meth:`MultiAgentBatch.agent_steps` sums the rows of the policy batches (one row per agent
step). The class is importable from :mod:`cadence.interop.rllib.sample_batch` too, as from
RLlib's module.

Examples:
    >>> import numpy as np
    >>> from cadence.interop.rllib.sample_batch import MultiAgentBatch, SampleBatch
    >>> ma = MultiAgentBatch({"p0": SampleBatch({"obs": np.zeros(3)}), "p1": SampleBatch({"obs": np.zeros(2)})}, 3)
    >>> ma.env_steps(), ma.agent_steps()
    (3, 5)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Union

import numpy as np

if TYPE_CHECKING:
    from cadence.interop.rllib.sample_batch import SampleBatch

__all__ = ["DEFAULT_POLICY_ID", "MultiAgentBatch"]

#: The policy id of a single-agent setup (RLlib's name).
DEFAULT_POLICY_ID = "default_policy"


def _sample_batch_class() -> type[SampleBatch]:
    # imported late: sample_batch imports this module at its top
    from cadence.interop.rllib.sample_batch import SampleBatch

    return SampleBatch


class MultiAgentBatch:
    """A batch of experience from several policies, keyed by policy id.

    Args:
        policy_batches: policy id -> that policy's :class:`SampleBatch`.
        env_steps: the number of environment steps the batch covers (at most the total
            number of agent steps: several agents may step in one env step).

    Attributes:
        policy_batches: the dict given.
        count: the number of env steps (RLlib's name; prefer :meth:`env_steps`).

    Raises:
        TypeError: a value is not a SampleBatch (names the policy id), or ``env_steps`` is not
            an int.
        ValueError: ``env_steps`` is negative.

    Examples:
        >>> import numpy as np
        >>> from cadence.interop.rllib.sample_batch import SampleBatch
        >>> ma = MultiAgentBatch({"pol": SampleBatch({"rewards": np.ones(4)})}, env_steps=2)
        >>> len(ma), ma.count, ma["pol"].count
        (2, 2, 4)
    """

    def __init__(self, policy_batches: Mapping[Any, SampleBatch], env_steps: int) -> None:
        sample_batch = _sample_batch_class()
        for policy_id, batch in policy_batches.items():
            if not isinstance(batch, sample_batch):
                raise TypeError(
                    f"policy_batches[{policy_id!r}]: expected a SampleBatch, got {type(batch).__name__}"
                )
        if isinstance(env_steps, bool) or not isinstance(env_steps, (int, np.integer)):
            raise TypeError(f"env_steps: expected an int, got {type(env_steps).__name__}")
        if env_steps < 0:
            raise ValueError(f"env_steps: expected a count >= 0, got {env_steps}")
        self.policy_batches: dict[Any, SampleBatch] = dict(policy_batches)
        self.count: int = int(env_steps)

    def env_steps(self) -> int:
        """The number of environment steps in this batch.

        Returns:
            ``count``.

        Examples:
            >>> MultiAgentBatch({}, 5).env_steps()
            5
        """
        return self.count

    def agent_steps(self) -> int:
        """The number of agent steps: the rows of all policy batches together.

        Returns:
            The sum of the policy batches' ``count``.

        Examples:
            >>> import numpy as np
            >>> from cadence.interop.rllib.sample_batch import SampleBatch
            >>> MultiAgentBatch({"a": SampleBatch(t=np.arange(2)), "b": SampleBatch(t=np.arange(2))}, 2).agent_steps()
            4
        """
        return sum(batch.count for batch in self.policy_batches.values())

    def __len__(self) -> int:
        """The number of environment steps (as :meth:`env_steps`)."""
        return self.count

    def __getitem__(self, policy_id: Any) -> SampleBatch:
        """The SampleBatch of one policy.

        Raises:
            KeyError: no batch for that policy (names it and the policies there are).
        """
        try:
            return self.policy_batches[policy_id]
        except KeyError:
            raise KeyError(
                f"MultiAgentBatch has no batch for policy {policy_id!r}; it has {list(self.policy_batches)}"
            ) from None

    @staticmethod
    def wrap_as_needed(
        policy_batches: Mapping[Any, SampleBatch], env_steps: int
    ) -> Union[SampleBatch, MultiAgentBatch]:
        """A SampleBatch if the only policy is ``"default_policy"``, else a MultiAgentBatch.

        Args:
            policy_batches: policy id -> SampleBatch.
            env_steps: the number of env steps (used for a MultiAgentBatch).

        Returns:
            The default policy's batch itself, or a new MultiAgentBatch.

        Examples:
            >>> import numpy as np
            >>> from cadence.interop.rllib.sample_batch import SampleBatch
            >>> batch = SampleBatch(obs=np.zeros(2))
            >>> MultiAgentBatch.wrap_as_needed({"default_policy": batch}, 2) is batch
            True
            >>> MultiAgentBatch.wrap_as_needed({"other": batch}, 2)
            MultiAgentBatch({'other': SampleBatch(2: ['obs'])}, env_steps=2)
        """
        if len(policy_batches) == 1 and DEFAULT_POLICY_ID in policy_batches:
            return policy_batches[DEFAULT_POLICY_ID]
        return MultiAgentBatch(policy_batches, env_steps)

    def copy(self) -> MultiAgentBatch:
        """A deep copy: every policy batch is copied (its arrays too).

        Returns:
            The new MultiAgentBatch.

        Examples:
            >>> import numpy as np
            >>> from cadence.interop.rllib.sample_batch import SampleBatch
            >>> ma = MultiAgentBatch({"p": SampleBatch(obs=np.zeros(2))}, 2)
            >>> clone = ma.copy()
            >>> clone["p"]["obs"][0] = 1.0
            >>> float(ma["p"]["obs"][0])
            0.0
        """
        return MultiAgentBatch({pid: batch.copy() for pid, batch in self.policy_batches.items()}, self.count)

    def as_multi_agent(self) -> MultiAgentBatch:
        """This batch itself (it is a MultiAgentBatch already).

        Returns:
            ``self``.

        Examples:
            >>> ma = MultiAgentBatch({}, 0)
            >>> ma.as_multi_agent() is ma
            True
        """
        return self

    def size_bytes(self) -> int:
        """The bytes held by all policy batches' columns.

        Returns:
            The sum of the policy batches' :meth:`SampleBatch.size_bytes`.

        Examples:
            >>> import numpy as np
            >>> from cadence.interop.rllib.sample_batch import SampleBatch
            >>> MultiAgentBatch({"p": SampleBatch(obs=np.zeros(2, np.float32))}, 2).size_bytes()
            8
        """
        return sum(batch.size_bytes() for batch in self.policy_batches.values())

    def __repr__(self) -> str:
        return f"MultiAgentBatch({self.policy_batches!r}, env_steps={self.count})"

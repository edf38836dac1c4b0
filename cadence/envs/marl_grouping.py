"""How the agents of a multi-agent env are grouped (the seed's ``MarlGroupMapType`` and
``check_marl_grouping``).

A multi-agent env lays out the data of each group of agents under the group's name, the
agents of a group stacked on a dim after the batch dims (``("agents", "action")`` of shape
``[*batch, n_agents, ...]``): agents that share a network go in one group, agents that
differ (other shapes, other networks) in groups of their own. A group map says which:
``{"group name": [agent names]}``; every multi-agent wrapper takes one as ``group_map=``,
or one of the ready-made strategies of :class:`MarlGroupMapType`.

Examples:
    >>> agents = ["agent_0", "agent_1", "agent_2"]
    >>> MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(agents)
    {'agents': ['agent_0', 'agent_1', 'agent_2']}
    >>> check_marl_grouping({"red": ["agent_0"], "blue": ["agent_1", "agent_2"]}, agents)
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

__all__ = ["MarlGroupMapType", "check_marl_grouping"]


class MarlGroupMapType(enum.Enum):
    """The ready-made ways to group the agents of a multi-agent env.

    - ``ALL_IN_ONE_GROUP``: one group, ``"agents"``, holding every agent (their data stacked:
      one network can process them all at once).
    - ``ONE_GROUP_PER_AGENT``: each agent in a group of its own, named after it (agents that
      differ, or that each have their own network).

    Examples:
        >>> MarlGroupMapType.ONE_GROUP_PER_AGENT.get_group_map(["walker_0", "walker_1"])
        {'walker_0': ['walker_0'], 'walker_1': ['walker_1']}
    """

    ALL_IN_ONE_GROUP = 1
    ONE_GROUP_PER_AGENT = 2

    def get_group_map(self, agent_names: Sequence[str]) -> dict[str, list[str]]:
        """The group map this strategy gives for ``agent_names`` (checked).

        Args:
            agent_names: every agent of the env, in the env's order.

        Returns:
            ``{"group name": [agent names]}``.

        Raises:
            ValueError, TypeError: as :func:`check_marl_grouping` for the names.

        Examples:
            >>> MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(["a", "b"])
            {'agents': ['a', 'b']}
        """
        names = list(agent_names)
        if self is MarlGroupMapType.ALL_IN_ONE_GROUP:
            group_map = {"agents": names}
        else:
            group_map = {name: [name] for name in names}
        check_marl_grouping(group_map, names)
        return group_map


def check_marl_grouping(group_map: Mapping[str, Sequence[str]], agent_names: Sequence[str]) -> None:
    """Checks that ``group_map`` puts every agent of ``agent_names`` in exactly one group.

    Args:
        group_map: ``{"group name": [agent names]}``; a group name becomes a key of the env's
            data, so it is a non-empty string.
        agent_names: every agent of the env.

    Raises:
        TypeError: a group name that is not a string, or a group that is not a sequence of
            agent names (a lone string is refused: ``{"agents": "agent_0"}``).
        ValueError: no agents, an agent name given twice, an empty group, an agent that is
            not in the env, in two groups, or in none; the message names it.

    Examples:
        >>> check_marl_grouping({"agents": ["a", "b"]}, ["a", "b"])
        >>> check_marl_grouping({"agents": ["a"]}, ["a", "b"])
        Traceback (most recent call last):
            ...
        ValueError: check_marl_grouping: agent 'b' is in no group; the group map {'agents': ['a']} must place every agent of ['a', 'b'] in exactly one group
    """
    names = list(agent_names)
    if not names:
        raise ValueError("check_marl_grouping: the env has no agents (agent_names is empty)")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(f"check_marl_grouping: agent name {name!r} is given twice in agent_names {names}")
        seen.add(name)
    placed: dict[str, str] = {}  # agent -> its group
    for group, members in group_map.items():
        if not isinstance(group, str) or not group:
            raise TypeError(f"check_marl_grouping: a group name must be a non-empty str, got {group!r}")
        if isinstance(members, str) or not isinstance(members, Sequence):
            raise TypeError(
                f"check_marl_grouping: group {group!r} must be a list of agent names, got {type(members).__name__}: "
                f"{members!r}"
            )
        if not members:
            raise ValueError(f"check_marl_grouping: group {group!r} is empty (a group holds at least one agent)")
        for agent in members:
            if agent not in seen:
                raise ValueError(f"check_marl_grouping: group {group!r} holds {agent!r}, which is not an agent of "
                                 f"the env {names}")
            if agent in placed:
                raise ValueError(f"check_marl_grouping: agent {agent!r} is in two groups, {placed[agent]!r} and "
                                 f"{group!r}")
            placed[agent] = group
    for name in names:
        if name not in placed:
            raise ValueError(
                f"check_marl_grouping: agent {name!r} is in no group; the group map {dict(group_map)} must place "
                f"every agent of {names} in exactly one group"
            )

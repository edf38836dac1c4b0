"""MarlGroupMapType and check_marl_grouping: the ready-made group maps and what a group map must be."""

from __future__ import annotations

import pytest

from cadence.envs import MarlGroupMapType, check_marl_grouping
from cadence.envs.utils import MarlGroupMapType as FromUtils, check_marl_grouping as check_from_utils

AGENTS = ["agent_0", "agent_1", "agent_2", "agent_3"]


def test_the_ready_made_group_maps_as_in_the_reference() -> None:
    assert MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(AGENTS) == {"agents": AGENTS}
    assert MarlGroupMapType.ONE_GROUP_PER_AGENT.get_group_map(AGENTS) == {name: [name] for name in AGENTS}
    assert FromUtils is MarlGroupMapType and check_from_utils is check_marl_grouping  # the reference's import path
    # the reference's example: a ready-made map passes the check
    check_marl_grouping(MarlGroupMapType.ALL_IN_ONE_GROUP.get_group_map(AGENTS[:3]), AGENTS[:3])


def test_a_custom_grouping_of_heterogeneous_agents_passes() -> None:
    check_marl_grouping({"adversaries": ["agent_0"], "good": ["agent_1", "agent_2", "agent_3"]}, AGENTS)


@pytest.mark.parametrize(
    ("group_map", "agents", "error", "match"),
    [
        ({"agents": ["agent_0"]}, [], ValueError, "the env has no agents"),
        ({"agents": ["a"]}, ["a", "a"], ValueError, "agent name 'a' is given twice"),
        ({"agents": []}, ["a"], ValueError, "group 'agents' is empty"),
        ({"agents": ["a", "z"]}, ["a"], ValueError, r"group 'agents' holds 'z', which is not an agent of the env \['a'\]"),
        ({"x": ["a"], "y": ["a", "b"]}, ["a", "b"], ValueError, "agent 'a' is in two groups, 'x' and 'y'"),
        ({"x": ["a"]}, ["a", "b"], ValueError, "agent 'b' is in no group"),
        ({"agents": "a"}, ["a"], TypeError, "group 'agents' must be a list of agent names, got str"),
        ({"": ["a"]}, ["a"], TypeError, "a group name must be a non-empty str, got ''"),
        ({3: ["a"]}, ["a"], TypeError, "a group name must be a non-empty str, got 3"),
    ],
)
def test_bad_group_maps_are_named(group_map, agents, error, match) -> None:
    with pytest.raises(error, match=match):
        check_marl_grouping(group_map, agents)


def test_get_group_map_refuses_duplicate_agents() -> None:
    with pytest.raises(ValueError, match="given twice"):
        MarlGroupMapType.ONE_GROUP_PER_AGENT.get_group_map(["a", "a"])

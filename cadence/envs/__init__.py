"""Environments: the ``EnvBase`` template, helpers, built-in envs and library wrappers.

Examples:
    >>> from cadence.envs import PendulumEnv, check_env_specs
    >>> check_env_specs(PendulumEnv())
"""

from cadence.envs.batched import BatchedEnvBase, EnvCreator, SerialEnv
from cadence.envs.common import EnvBase, EnvMetaData
from cadence.envs.custom import ChessEnv, LLMHashingEnv, PendulumEnv, TicTacToeEnv
from cadence.envs.gym_like import GymLikeEnv, default_info_dict_reader
from cadence.envs.libs import get_available_libraries
from cadence.envs.libs.brax import BraxEnv, BraxWrapper  # brax and jax themselves are imported lazily
from cadence.envs.libs.dm_control import DMControlEnv, DMControlWrapper  # dm_control itself is imported lazily
from cadence.envs.libs.envpool import MultiThreadedEnv, MultiThreadedEnvWrapper  # envpool itself is imported lazily
from cadence.envs.libs.gym import GymEnv, GymWrapper, gym_backend, set_gym_backend
from cadence.envs.libs.jumanji import JumanjiEnv, JumanjiWrapper  # jumanji and jax themselves are imported lazily
from cadence.envs.libs.meltingpot import MeltingpotEnv, MeltingpotWrapper  # meltingpot itself is imported lazily
from cadence.envs.libs.mo_gym import MOGymEnv, MOGymWrapper  # mo_gymnasium itself is imported lazily
from cadence.envs.libs.openml import OpenMLEnv  # openml itself is imported lazily
from cadence.envs.libs.openspiel import OpenSpielEnv, OpenSpielWrapper  # pyspiel itself is imported lazily
from cadence.envs.libs.pettingzoo import PettingZooEnv, PettingZooWrapper  # pettingzoo itself is imported lazily
from cadence.envs.libs.vmas import VmasEnv, VmasWrapper  # vmas itself is imported lazily
from cadence.envs.marl_grouping import MarlGroupMapType, check_marl_grouping
from cadence.envs.parallel import ParallelEnv
from cadence.envs.transforms import *  # noqa: F403 - the transforms are importable from cadence.envs too
from cadence.envs.transforms import __all__ as _transforms_all
from cadence.envs.model_based import DreamerDecoder, DreamerEnv, ModelBasedEnvBase  # after the transforms: it uses them
from cadence.envs.utils import (
    ExplorationType,
    RandomPolicy,
    check_env_specs,
    exploration_type,
    make_composite_from_td,
    set_exploration_type,
    step_mdp,
    terminated_or_truncated,
)

__all__ = [
    "BatchedEnvBase",
    "BraxEnv",
    "BraxWrapper",
    "ChessEnv",
    "DMControlEnv",
    "DMControlWrapper",
    "DreamerDecoder",
    "DreamerEnv",
    "EnvBase",
    "EnvCreator",
    "EnvMetaData",
    "ExplorationType",
    "GymEnv",
    "GymLikeEnv",
    "GymWrapper",
    "JumanjiEnv",
    "JumanjiWrapper",
    "LLMHashingEnv",
    "MeltingpotEnv",
    "MeltingpotWrapper",
    "MOGymEnv",
    "MOGymWrapper",
    "MarlGroupMapType",
    "ModelBasedEnvBase",
    "MultiThreadedEnv",
    "MultiThreadedEnvWrapper",
    "OpenMLEnv",
    "OpenSpielEnv",
    "OpenSpielWrapper",
    "ParallelEnv",
    "PendulumEnv",
    "PettingZooEnv",
    "PettingZooWrapper",
    "RandomPolicy",
    "SerialEnv",
    "TicTacToeEnv",
    "VmasEnv",
    "VmasWrapper",
    "check_env_specs",
    "check_marl_grouping",
    "default_info_dict_reader",
    "exploration_type",
    "get_available_libraries",
    "gym_backend",
    "make_composite_from_td",
    "set_exploration_type",
    "set_gym_backend",
    "step_mdp",
    "terminated_or_truncated",
]
__all__ += _transforms_all

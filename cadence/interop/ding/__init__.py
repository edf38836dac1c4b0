"""DI-engine's environment contract (the seed ``di-engine-env-migration.txt``), in Cadence.

An env written for DI-engine (a :class:`BaseEnv` subclass returning
:class:`BaseEnvTimestep`) runs here as it is: in DI-engine's env managers
(:class:`BaseEnvManager`, :class:`SyncSubprocessEnvManager`, :class:`AsyncSubprocessEnvManager`,
the last two on Cadence's worker pool) and, through :class:`DingEnvAdapter`, as a Cadence env
(``ParallelEnv``, transforms, collectors, replay buffers). :func:`as_ding_env` goes the other
way. :class:`DingEnvWrapper` turns a gymnasium env into a DI-engine one, :func:`check_all`
checks an env against the contract, :mod:`cadence.interop.ding.rules` names any data rule an
env breaks, and :mod:`cadence.interop.ding.wrappers` holds DI-engine's gymnasium wrappers.

Examples:
    >>> import numpy as np
    >>> from cadence.interop.ding import BaseEnvTimestep, DingEnvWrapper, to_ndarray
    >>> timestep = BaseEnvTimestep(np.zeros(3, np.float32), to_ndarray([1.0], np.float32), False, {})
    >>> timestep.reward.shape, timestep.done
    ((1,), False)
    >>> env = DingEnvWrapper(cfg={"env_id": "CartPole-v1"})
    >>> env.reset().shape
    (4,)
"""

from cadence.interop.ding.adapters import DingEnvAdapter, as_ding_env
from cadence.interop.ding.base_env import BaseEnv
from cadence.interop.ding.checker import check_all, demonstrate_correct_procedure
from cadence.interop.ding.data import BaseEnvTimestep, deep_merge_dicts, to_ndarray
from cadence.interop.ding.ding_env_wrapper import DingEnvWrapper
from cadence.interop.ding.manager_common import EnvManagerError, EnvState
from cadence.interop.ding.managers import BaseEnvManager
from cadence.interop.ding.rules import DataRuleError
from cadence.interop.ding.subprocess_managers import AsyncSubprocessEnvManager, SyncSubprocessEnvManager

__all__ = [
    "AsyncSubprocessEnvManager",
    "BaseEnv",
    "BaseEnvManager",
    "BaseEnvTimestep",
    "DataRuleError",
    "DingEnvAdapter",
    "DingEnvWrapper",
    "EnvManagerError",
    "EnvState",
    "SyncSubprocessEnvManager",
    "as_ding_env",
    "check_all",
    "deep_merge_dicts",
    "demonstrate_correct_procedure",
    "to_ndarray",
]

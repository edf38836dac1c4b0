"""DI-engine's environment contract (the seed ``di-engine-env-migration.txt``), in Cadence.

So far: the data pieces an env written to the contract imports (``BaseEnvTimestep``,
``to_ndarray``, ``deep_merge_dicts``).

Examples:
    >>> import numpy as np
    >>> from cadence.interop.ding import BaseEnvTimestep, to_ndarray
    >>> timestep = BaseEnvTimestep(np.zeros(3, np.float32), to_ndarray([1.0], np.float32), False, {})
    >>> timestep.reward.shape, timestep.done
    ((1,), False)
"""

from cadence.interop.ding.data import BaseEnvTimestep, deep_merge_dicts, to_ndarray

__all__ = ["BaseEnvTimestep", "deep_merge_dicts", "to_ndarray"]

"""Model-based envs: a learned world model stepped as an env (``ModelBasedEnvBase``) and
Dreamer's imagination env and decoder transform (``DreamerEnv``, ``DreamerDecoder``).

Examples:
    >>> from cadence.envs.model_based import ModelBasedEnvBase
    >>> from cadence.envs.model_based.dreamer import DreamerDecoder, DreamerEnv
    >>> issubclass(DreamerEnv, ModelBasedEnvBase)
    True
"""

from cadence.envs.model_based.common import ModelBasedEnvBase
from cadence.envs.model_based.dreamer import DreamerDecoder, DreamerEnv

__all__ = ["ModelBasedEnvBase", "DreamerEnv", "DreamerDecoder"]

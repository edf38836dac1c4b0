"""RLlib's algorithms (old API stack) on Cadence: so far PPO (``ppo.PPOTorchPolicy``, ``ppo.DEFAULT_CONFIG``).

Examples:
    >>> from cadence.interop.rllib.algorithms import ppo
    >>> ppo.DEFAULT_CONFIG["clip_param"], ppo.PPOTorchPolicy.DEFAULT_CONFIG is ppo.DEFAULT_CONFIG
    (0.3, True)
"""

from cadence.interop.rllib.algorithms import ppo
from cadence.interop.rllib.algorithms.ppo import DEFAULT_CONFIG, PPOTorchPolicy, Postprocessing

__all__ = ["DEFAULT_CONFIG", "PPOTorchPolicy", "Postprocessing", "ppo"]

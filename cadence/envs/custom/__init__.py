"""Built-in environments written natively against the Cadence API."""

from cadence.envs.custom.pendulum import PendulumEnv

__all__ = ["PendulumEnv"]

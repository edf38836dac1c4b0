"""Cadence: reinforcement learning on PyTorch with precise specs and fast rollouts."""

__version__ = "0.1.0"

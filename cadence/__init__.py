"""Cadence: reinforcement learning on PyTorch with precise specs and fast rollouts.

Helpers for training scripts (``timeit``, ``get_available_device``, ``compile_with_warmup``,
``logger``) live in :mod:`cadence.utils`.
"""

__version__ = "0.1.0"

#: Whether worker processes (``ParallelEnv``, the multi-process collectors) ignore all
#: warnings, so that N workers do not print N copies of each. Read when a pool starts.
filter_warnings_subprocess: bool = True

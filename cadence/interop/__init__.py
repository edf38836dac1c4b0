"""Interoperability with other RL libraries' contracts (``cadence.interop.ding``: DI-engine's).

Examples:
    >>> from cadence.interop.ding import BaseEnvTimestep
    >>> BaseEnvTimestep._fields
    ('obs', 'reward', 'done', 'info')
"""

"""Pieces of a training run: the evaluator (``Recorder``).

Examples:
    >>> from cadence.trainers import Recorder
    >>> Recorder.__name__
    'Recorder'
"""

from cadence.trainers.recorder import Recorder, episode_return

__all__ = ["Recorder", "episode_return"]

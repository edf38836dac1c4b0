"""Training: the evaluator of the seed tutorial (``Recorder``) and the pieces of
``cadence train``: its config (``TrainConfig``) and its runs (``TrainingRun``).

Examples:
    >>> from cadence.trainers import Recorder, TrainConfig, TrainingRun
    >>> TrainConfig().algorithm, TrainConfig().env
    ('ddpg', 'Pendulum-v1')
"""

from cadence.trainers.config import TrainConfig
from cadence.trainers.recorder import Recorder, episode_return
from cadence.trainers.training import TrainingRun, load_policy

__all__ = ["Recorder", "TrainConfig", "TrainingRun", "episode_return", "load_policy"]

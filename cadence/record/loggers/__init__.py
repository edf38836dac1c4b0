"""Loggers: one experiment's scalars, videos, hyper-parameters and histograms.

:class:`CSVLogger` writes plain files and needs nothing more than Cadence (mp4 and GIF
videos need ``pip install "cadence[video]"``); :class:`TensorboardLogger` needs
``cadence[tensorboard]`` and :class:`WandbLogger` needs ``cadence[wandb]``. The optional
packages are imported when a logger is made, not when this package is.

Examples:
    >>> import tempfile
    >>> from cadence.record.loggers import CSVLogger, generate_exp_name
    >>> logger = CSVLogger(generate_exp_name("DDPG", "demo"), log_dir=tempfile.mkdtemp())
    >>> logger.log_scalar("reward", 1.0)
"""

from cadence.record.loggers.common import Logger
from cadence.record.loggers.csv import CSVLogger
from cadence.record.loggers.tensorboard import TensorboardLogger
from cadence.record.loggers.utils import generate_exp_name, get_logger
from cadence.record.loggers.wandb import WandbLogger

__all__ = ["Logger", "CSVLogger", "TensorboardLogger", "WandbLogger", "generate_exp_name", "get_logger"]

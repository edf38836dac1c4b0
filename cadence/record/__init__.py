"""Recording what happens during training: loggers, and recorder transforms
(``cadence.record.recorder``: ``VideoRecorder``, ``TensorDictRecorder``, ``PixelRenderTransform``).

Examples:
    >>> import tempfile
    >>> from cadence.record import CSVLogger
    >>> CSVLogger("exp", log_dir=tempfile.mkdtemp()).log_scalar("reward", 0.0)
"""

from cadence.record.loggers import (
    CSVLogger,
    Logger,
    TensorboardLogger,
    WandbLogger,
    generate_exp_name,
    get_logger,
)
from cadence.record.recorder import PixelRenderTransform, TensorDictRecorder, VideoRecorder

__all__ = [
    "Logger",
    "CSVLogger",
    "TensorboardLogger",
    "WandbLogger",
    "generate_exp_name",
    "get_logger",
    "PixelRenderTransform",
    "TensorDictRecorder",
    "VideoRecorder",
]

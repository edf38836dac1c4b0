"""A logger that writes TensorBoard event files through ``torch.utils.tensorboard``.

Needs ``pip install "cadence[tensorboard]"`` (the ``tensorboard`` package); videos also
need ``pip install "cadence[video]"`` (Pillow).

Videos: ``SummaryWriter.add_video`` needs ``moviepy`` and, without it, prints a line and
logs nothing. :class:`TensorboardLogger` does not use it: it encodes the frames as an
animated GIF itself (Pillow) and writes the same kind of summary that ``add_video``
writes (an image summary holding a GIF), which TensorBoard shows in its Images tab. A batch
of videos is tiled into one, as ``add_video`` does.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import torch

from cadence.record.loggers._video import encode_gif, video_to_frames
from cadence.record.loggers.common import Logger, flatten_dict, hparams_to_dict, import_optional, to_scalar

__all__ = ["TensorboardLogger"]


def _hparam_value(value: Any) -> int | float | str | bool:
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


class TensorboardLogger(Logger):
    """Logs to TensorBoard event files under ``<log_dir>/<exp_name>/``.

    ``experiment`` is the ``torch.utils.tensorboard.SummaryWriter``. Event files are
    buffered by the writer (written every ``flush_secs``, 120 s by default); call
    :meth:`flush` or :meth:`close` (or use the logger as a context manager) to write them
    out now.

    Args:
        exp_name: the experiment's name (its directory under ``log_dir``).
        log_dir: the parent directory.
        **kwargs: passed to ``SummaryWriter`` (``flush_secs``, ``max_queue``, ...).

    Raises:
        ImportError: if ``tensorboard`` is not installed (``pip install "cadence[tensorboard]"``).

    Examples:
        >>> import os, tempfile
        >>> root = tempfile.mkdtemp()
        >>> with TensorboardLogger("exp", log_dir=root) as logger:
        ...     logger.log_scalar("reward", 1.0, step=0)
        ...     logger.log_hparams({"lr": 0.1, "optim": {"name": "adam"}})
        >>> from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        >>> events = EventAccumulator(os.path.join(root, "exp")).Reload()
        >>> [(e.step, e.value) for e in events.Scalars("reward")]
        [(0, 1.0)]
    """

    def __init__(self, exp_name: str, log_dir: str | os.PathLike[str] = "tb_logs", **kwargs: Any) -> None:
        self._writer_kwargs = kwargs
        super().__init__(exp_name, log_dir)

    def _create_experiment(self) -> Any:
        tensorboard = import_optional(
            "torch.utils.tensorboard", feature="TensorboardLogger", extra="tensorboard", package="tensorboard"
        )
        assert self.log_dir is not None
        return tensorboard.SummaryWriter(log_dir=os.path.join(self.log_dir, self.exp_name), **self._writer_kwargs)

    def log_scalar(self, name: str, value: Any, step: int | None = None) -> None:
        """Adds a scalar summary (see :meth:`Logger.log_scalar`).

        Examples:
            >>> import tempfile
            >>> logger = TensorboardLogger("exp", log_dir=tempfile.mkdtemp())
            >>> logger.log_scalar("loss", 0.5); logger.log_scalar("loss", 0.25)
            >>> logger.close()
        """
        number = to_scalar(name, value)
        self.experiment.add_scalar(name, number, global_step=self._step(name, step))

    def log_video(self, name: str, video: Any, step: int | None = None, **kwargs: Any) -> None:
        """Adds a video (GIF image summary; see the module docstring).

        Args:
            name: the video's tag.
            video: see :meth:`Logger.log_video`.
            step: the step, or ``None`` for one after the last step of ``name``.
            **kwargs: ``fps`` (default 30) and ``walltime`` (seconds since the epoch).

        Raises:
            TypeError: for another keyword argument.
            ImportError: if Pillow is missing (``pip install "cadence[video]"``).

        Examples:
            >>> import tempfile, torch
            >>> with TensorboardLogger("exp", log_dir=tempfile.mkdtemp()) as logger:
            ...     logger.log_video("rollout", torch.randint(0, 255, (1, 6, 3, 8, 8), dtype=torch.uint8), fps=10)
        """
        unexpected = sorted(set(kwargs) - {"fps", "walltime"})
        if unexpected:
            raise TypeError(
                f"TensorboardLogger.log_video: unexpected keyword arguments {unexpected} (accepted: 'fps', 'walltime')"
            )
        summary_pb2 = import_optional(
            "tensorboard.compat.proto.summary_pb2",
            feature="TensorboardLogger",
            extra="tensorboard",
            package="tensorboard",
        )
        frames = video_to_frames(video, name)
        data = encode_gif(frames, kwargs.get("fps", 30))
        _, height, width, channels = frames.shape
        image = summary_pb2.Summary.Image(
            height=height, width=width, colorspace=channels, encoded_image_string=data
        )
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=name, image=image)])
        walltime = kwargs.get("walltime")
        self.experiment._get_file_writer().add_summary(
            summary, self._step(name, step), time.time() if walltime is None else walltime
        )

    def log_hparams(self, cfg: Any) -> None:
        """Writes the hyper-parameters for TensorBoard's HParams tab, in this run.

        Nested keys are joined with ``"/"``; values other than numbers, booleans and
        strings (lists, ``None``, ...) are written as their ``str``.

        Examples:
            >>> import tempfile
            >>> with TensorboardLogger("exp", log_dir=tempfile.mkdtemp()) as logger:
            ...     logger.log_hparams({"lr": 3e-4, "layers": [64, 64], "clip": None})
        """
        summary = import_optional(
            "torch.utils.tensorboard.summary", feature="TensorboardLogger", extra="tensorboard", package="tensorboard"
        )
        flat = {key: _hparam_value(value) for key, value in flatten_dict(hparams_to_dict(cfg), sep="/").items()}
        writer = self.experiment._get_file_writer()
        for proto in summary.hparams(flat, {}):
            writer.add_summary(proto)

    def log_histogram(self, name: str, data: Any, step: int | None = None, **kwargs: Any) -> None:
        """Adds a histogram of the values in ``data``.

        Args:
            name: the histogram's tag.
            data: a tensor or array of numbers.
            step: the step, or ``None`` for one after the last step of ``name``.
            **kwargs: passed to ``SummaryWriter.add_histogram`` (``bins``, ``max_bins``, ...).

        Examples:
            >>> import tempfile, torch
            >>> with TensorboardLogger("exp", log_dir=tempfile.mkdtemp()) as logger:
            ...     logger.log_histogram("weights", torch.randn(100), step=0)
        """
        if isinstance(data, torch.Tensor):
            data = data.detach().cpu().float().numpy()
        elif not isinstance(data, np.ndarray):
            data = np.asarray(data, dtype=np.float64)
        self.experiment.add_histogram(name, data, global_step=self._step(name, step), **kwargs)

    def flush(self) -> None:
        """Writes the buffered events to disk."""
        self.experiment.flush()

    def close(self) -> None:
        """Flushes and closes the writer (it reopens its file if used again)."""
        self.experiment.close()

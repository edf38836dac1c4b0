"""A logger that writes to a Weights & Biases run, offline by default.

Needs ``pip install "cadence[wandb]"``; videos also need ``pip install "cadence[video]"``.
An offline run (the default) makes no network connection; its files go under
``<save_dir>/wandb/offline-run-*`` and ``wandb sync`` uploads them later. Offline, the
logger also sets ``WANDB_ERROR_REPORTING=false`` in the process environment (unless it is
already set): wandb's background service would otherwise reach for its error-reporting
server (a DNS look-up at least), and it reads that switch only from the environment.

Steps: wandb's own step must only grow, and a value logged at a smaller step is dropped.
So every value is logged together with its step under the key ``"trainer/step"``, and
wandb's internal step is left to count calls; plot against ``trainer/step``.

Videos: ``wandb.Video`` needs ``moviepy`` to encode raw frames, so :class:`WandbLogger`
encodes them itself (mp4 by default, or GIF, as :class:`~cadence.record.loggers.csv.CSVLogger`
does) into a temporary file and hands wandb the file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import numpy as np
import torch

from cadence.record.loggers._video import video_to_frames, write_gif, write_mp4
from cadence.record.loggers.common import Logger, hparams_to_dict, import_optional, to_scalar

__all__ = ["WandbLogger"]

STEP_KEY = "trainer/step"


class WandbLogger(Logger):
    """Logs to a wandb run (``experiment``), offline unless ``offline=False``.

    Args:
        exp_name: the run's name.
        offline: run in offline mode (no network; see the module docstring). ``False`` leaves the mode to wandb
            (``WANDB_MODE`` or online).
        save_dir: where wandb writes the run (made if missing); ``None`` means wandb's
            default (the working directory).
        id: the run's id, to resume a run.
        project: the wandb project.
        video_fps: frames per second of logged videos (``log_video(..., fps=)`` overrides).
        **kwargs: passed to ``wandb.init`` (``entity``, ``config``, ``tags``, ``reinit``, ...).

    Raises:
        ImportError: if ``wandb`` is not installed (``pip install "cadence[wandb]"``).

    Examples:
        >>> import glob, os, tempfile
        >>> os.environ.setdefault("WANDB_SILENT", "true")  # doctest: +ELLIPSIS
        '...'
        >>> root = tempfile.mkdtemp()
        >>> with WandbLogger("exp", save_dir=root, project="demo") as logger:
        ...     logger.log_scalar("reward", 1.0, step=0)
        ...     logger.log_hparams({"lr": 0.1})
        >>> len(glob.glob(os.path.join(root, "wandb", "offline-run-*")))
        1
    """

    def __init__(
        self,
        exp_name: str,
        offline: bool = True,
        save_dir: str | os.PathLike[str] | None = None,
        id: str | None = None,
        project: str | None = None,
        *,
        video_fps: float = 30,
        **kwargs: Any,
    ) -> None:
        self.offline = bool(offline)
        self.save_dir = None if save_dir is None else os.fspath(save_dir)
        self.id = id
        self.project = project
        self.video_fps = video_fps
        self._init_kwargs = kwargs
        self._video_dir: str | None = None
        self._closed = False
        super().__init__(exp_name, self.save_dir)

    def _create_experiment(self) -> Any:
        wandb = import_optional("wandb", feature="WandbLogger", extra="wandb")
        if self.save_dir is not None:
            os.makedirs(self.save_dir, exist_ok=True)
        kwargs = dict(self._init_kwargs)
        if self.offline:
            kwargs["mode"] = "offline"
            # wandb's service otherwise looks up its error-reporting server, even offline
            os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
        return wandb.init(project=self.project, name=self.exp_name, dir=self.save_dir, id=self.id, **kwargs)

    def log_scalar(self, name: str, value: Any, step: int | None = None) -> None:
        """Logs ``{name: value, "trainer/step": step}`` (see :meth:`Logger.log_scalar`).

        A tensor, array or list of several numbers is logged as a list of them, as the
        reference does (wandb keeps lists; a script that logs, say, the returns of all the
        episodes that ended in a batch runs unchanged). The file-based loggers take one
        number only.

        Examples:
            >>> import tempfile, torch
            >>> with WandbLogger("exp", save_dir=tempfile.mkdtemp()) as logger:
            ...     logger.log_scalar("loss", 0.5)
            ...     logger.log_scalar("episode_returns", torch.tensor([1.0, 2.0]))
        """
        self.experiment.log({name: _number_or_numbers(name, value), STEP_KEY: self._step(name, step)})

    def log_video(self, name: str, video: Any, step: int | None = None, **kwargs: Any) -> None:
        """Logs a ``wandb.Video`` encoded by Cadence (see the module docstring).

        Args:
            name: the video's key.
            video: see :meth:`Logger.log_video`; a batch is tiled into one video.
            step: the step, or ``None`` for one after the last step of ``name``.
            **kwargs: ``fps`` (default ``video_fps``), ``format`` (``"mp4"``, the default,
                or ``"gif"``) and ``caption``.

        Raises:
            TypeError: for another keyword argument.
            ValueError: for another format.
            ImportError: without ``cadence[video]`` installed.

        Examples:
            >>> import tempfile, torch
            >>> with WandbLogger("exp", save_dir=tempfile.mkdtemp()) as logger:
            ...     logger.log_video("rollout", torch.zeros(4, 3, 8, 8, dtype=torch.uint8), format="gif")
        """
        unexpected = sorted(set(kwargs) - {"fps", "format", "caption"})
        if unexpected:
            raise TypeError(
                f"WandbLogger.log_video: unexpected keyword arguments {unexpected} "
                "(accepted: 'fps', 'format', 'caption')"
            )
        video_format = kwargs.get("format", "mp4")
        if video_format not in ("mp4", "gif"):
            raise ValueError(f"WandbLogger.log_video: format: expected 'mp4' or 'gif', got {video_format!r}")
        wandb = import_optional("wandb", feature="WandbLogger", extra="wandb")
        frames = video_to_frames(video, name)
        resolved = self._step(name, step)
        if self._video_dir is None:
            self._video_dir = tempfile.mkdtemp(prefix="cadence-wandb-videos-")
        safe_name = name.replace("/", "_").replace(os.sep, "_")
        path = os.path.join(self._video_dir, f"{safe_name}_{resolved}.{video_format}")
        writer = write_mp4 if video_format == "mp4" else write_gif
        writer(path, frames, kwargs.get("fps", self.video_fps))
        media = wandb.Video(path, caption=kwargs.get("caption"), format=video_format)
        self.experiment.log({name: media, STEP_KEY: resolved})

    def log_hparams(self, cfg: Any) -> None:
        """Updates the run's config (nested mappings stay nested).

        Examples:
            >>> import tempfile
            >>> with WandbLogger("exp", save_dir=tempfile.mkdtemp()) as logger:
            ...     logger.log_hparams({"optim": {"lr": 0.1}})
            ...     logger.experiment.config["optim"]
            {'lr': 0.1}
        """
        self.experiment.config.update(hparams_to_dict(cfg), allow_val_change=True)

    def log_histogram(self, name: str, data: Any, step: int | None = None, **kwargs: Any) -> None:
        """Logs a ``wandb.Histogram`` of the values in ``data``.

        Args:
            name: the histogram's key.
            data: a tensor or array of numbers.
            step: the step, or ``None`` for one after the last step of ``name``.
            **kwargs: ``bins`` (number of bins, default 64).

        Examples:
            >>> import tempfile, torch
            >>> with WandbLogger("exp", save_dir=tempfile.mkdtemp()) as logger:
            ...     logger.log_histogram("weights", torch.randn(100), bins=10)
        """
        unexpected = sorted(set(kwargs) - {"bins"})
        if unexpected:
            raise TypeError(f"WandbLogger.log_histogram: unexpected keyword arguments {unexpected} (accepted: 'bins')")
        wandb = import_optional("wandb", feature="WandbLogger", extra="wandb")
        if isinstance(data, torch.Tensor):
            data = data.detach().cpu().double().numpy()
        values = np.asarray(data, dtype=np.float64).reshape(-1)
        histogram = wandb.Histogram(values, num_bins=int(kwargs.get("bins", 64)))
        self.experiment.log({name: histogram, STEP_KEY: self._step(name, step)})

    def close(self) -> None:
        """Finishes the run and removes the temporary video files. Idempotent."""
        if not self._closed:
            self._closed = True
            self.experiment.finish()
        if self._video_dir is not None:
            shutil.rmtree(self._video_dir, ignore_errors=True)
            self._video_dir = None

    def __repr__(self) -> str:
        return (
            f"WandbLogger(exp_name={self.exp_name!r}, offline={self.offline!r}, "
            f"save_dir={self.save_dir!r}, project={self.project!r})"
        )


def _number_or_numbers(name: str, value: Any) -> int | float | list[Any]:
    """``to_scalar(name, value)``, or for several numbers the (nested) list of them."""
    if isinstance(value, torch.Tensor) and value.numel() > 1:
        value = value.detach().cpu().tolist()
    elif isinstance(value, np.ndarray) and value.size > 1:
        value = value.tolist()
    if isinstance(value, (list, tuple)) and len(value) != 1:
        return [_number_or_numbers(name, item) if isinstance(item, (list, tuple)) else to_scalar(name, item)
                for item in value]
    return to_scalar(name, value)

"""A logger that writes plain files: CSV scalars, a YAML hyper-parameter file, videos.

Layout of one experiment, ``<log_dir>/<exp_name>/``::

    scalars/<name>.csv              one "step,value" line per call, flushed at once
    hparams.yaml                    the hyper-parameters, YAML
    videos/<name>_<step>.<format>   one file per log_video call

A ``/`` in a name makes subdirectories (``"train/reward"`` -> ``scalars/train/reward.csv``).
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import IO, Any

import numpy as np
import torch

from cadence.record.loggers._video import video_to_frames, write_gif, write_mp4
from cadence.record.loggers.common import Logger, hparams_to_dict, import_optional, to_scalar

__all__ = ["CSVLogger", "CSVExperiment", "to_yaml"]

VIDEO_FORMATS = ("pt", "memmap", "mp4", "gif")


def _safe_parts(name: str, what: str) -> list[str]:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what} name: expected a non-empty str, got {type(name).__name__}: {name!r}")
    parts = name.replace("\\", "/").split("/")
    if any(part in ("", ".", "..") for part in parts) or os.path.isabs(name):
        raise ValueError(
            f"{what} name {name!r}: expected a relative name whose '/'-separated parts are "
            "non-empty and not '.' or '..'"
        )
    return parts


def _yaml_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:  # YAML 1.1 floats need a dot
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    return json.dumps(value if isinstance(value, str) else str(value))


def to_yaml(data: dict[str, Any], indent: int = 0) -> str:
    """Writes a nested ``dict`` of plain values as YAML (block mappings, flow lists).

    Strings are double-quoted (JSON escapes, which YAML reads); values that are neither
    numbers, booleans, ``None``, strings, lists nor dicts are written as their ``str``.

    Args:
        data: the mapping (``str`` keys).
        indent: the indentation of the top level, in spaces.

    Returns:
        The YAML text, one ``key: value`` per line.

    Examples:
        >>> print(to_yaml({"lr": 1e-5, "env": {"name": "CartPole-v1", "frames": [1, 2]}}), end="")
        lr: 1.0e-05
        env:
          name: "CartPole-v1"
          frames: [1, 2]
    """
    lines = []
    pad = " " * indent
    for key, value in data.items():
        key_text = _yaml_key(str(key))
        if isinstance(value, dict):
            if value:
                lines.append(f"{pad}{key_text}:\n{to_yaml(value, indent + 2)}")
            else:
                lines.append(f"{pad}{key_text}: {{}}\n")
        elif isinstance(value, list):
            lines.append(f"{pad}{key_text}: [{', '.join(_yaml_flow(item) for item in value)}]\n")
        else:
            lines.append(f"{pad}{key_text}: {_yaml_scalar(value)}\n")
    return "".join(lines)


_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off"}


def _yaml_key(key: str) -> str:
    if _BARE_KEY.fullmatch(key) and key.lower() not in _YAML_WORDS:
        return key
    return json.dumps(key)


def _yaml_flow(value: Any) -> str:
    if isinstance(value, list):
        return f"[{', '.join(_yaml_flow(item) for item in value)}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_yaml_key(str(k))}: {_yaml_flow(v)}" for k, v in value.items()) + "}"
    return _yaml_scalar(value)


class CSVExperiment:
    """The files of one CSV experiment (what ``CSVLogger.experiment`` holds).

    Args:
        log_dir: the experiment's directory (made if missing).
        video_format: ``"pt"``, ``"memmap"``, ``"mp4"`` or ``"gif"``.
        video_fps: frames per second of mp4 and GIF files.

    Attributes:
        log_dir: the experiment's directory.

    Examples:
        >>> import os, tempfile
        >>> experiment = CSVExperiment(os.path.join(tempfile.mkdtemp(), "run"))
        >>> experiment.add_scalar("loss", 0.5, step=3)
        >>> open(os.path.join(experiment.log_dir, "scalars", "loss.csv")).read()
        '3,0.5\\n'
        >>> experiment.close()
    """

    def __init__(self, log_dir: str, video_format: str = "pt", video_fps: float = 30) -> None:
        self.log_dir = log_dir
        self.video_format = video_format
        self.video_fps = video_fps
        self._files: dict[str, IO[str]] = {}
        self._hparams: dict[str, Any] = {}
        os.makedirs(log_dir, exist_ok=True)

    def scalar_path(self, name: str) -> str:
        """The CSV file of scalar ``name``.

        Examples:
            >>> import tempfile
            >>> e = CSVExperiment(os.path.join(tempfile.mkdtemp(), "exp"))
            >>> os.path.relpath(e.scalar_path("train/reward"), e.log_dir).replace(os.sep, "/")
            'scalars/train/reward.csv'
        """
        parts = _safe_parts(name, "scalar")
        return os.path.join(self.log_dir, "scalars", *parts[:-1], parts[-1] + ".csv")

    def video_path(self, name: str, step: int, video_format: str | None = None) -> str:
        """The file of video ``name`` at ``step``.

        Examples:
            >>> import tempfile
            >>> e = CSVExperiment(tempfile.mkdtemp(), video_format="mp4")
            >>> os.path.relpath(e.video_path("eval/rollout", 7), e.log_dir).replace(os.sep, "/")
            'videos/eval/rollout_7.mp4'
        """
        parts = _safe_parts(name, "video")
        extension = video_format or self.video_format
        return os.path.join(self.log_dir, "videos", *parts[:-1], f"{parts[-1]}_{step}.{extension}")

    def last_step(self, name: str) -> int | None:
        """The step on the last line of scalar ``name``'s file, or ``None`` if it has none.

        Examples:
            >>> import tempfile
            >>> e = CSVExperiment(tempfile.mkdtemp())
            >>> e.last_step("loss") is None
            True
            >>> e.add_scalar("loss", 1.0, step=4); e.last_step("loss")
            4
            >>> e.close()
        """
        path = self.scalar_path(name)
        if name in self._files:
            self._files[name].flush()
        if not os.path.exists(path):
            return None
        with open(path) as file:
            lines = [line for line in file.read().splitlines() if line.strip()]
        if not lines:
            return None
        return int(lines[-1].split(",", 1)[0])

    def add_scalar(self, name: str, value: int | float, step: int) -> None:
        """Appends ``step,value`` to the scalar's file and flushes it.

        Examples:
            >>> import tempfile
            >>> e = CSVExperiment(tempfile.mkdtemp())
            >>> e.add_scalar("a/b", 2, step=0)
            >>> open(e.scalar_path("a/b")).read()
            '0,2\\n'
            >>> e.close()
        """
        file = self._files.get(name)
        if file is None:
            path = self.scalar_path(name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            file = self._files[name] = open(path, "a")
        file.write(f"{step},{value!r}\n")
        file.flush()

    def add_hparams(self, hparams: dict[str, Any]) -> None:
        """Merges ``hparams`` into those already logged and rewrites ``hparams.yaml``.

        Examples:
            >>> import tempfile
            >>> e = CSVExperiment(tempfile.mkdtemp())
            >>> e.add_hparams({"lr": 0.1}); e.add_hparams({"seed": 1})
            >>> print(open(os.path.join(e.log_dir, "hparams.yaml")).read(), end="")
            lr: 0.1
            seed: 1
        """
        self._hparams.update(hparams)
        path = os.path.join(self.log_dir, "hparams.yaml")
        temporary = path + ".tmp"
        with open(temporary, "w") as file:
            file.write(to_yaml(self._hparams))
        os.replace(temporary, path)

    def add_video(self, name: str, video: Any, step: int, fps: float | None = None) -> str:
        """Writes one video file in ``video_format`` and returns its path.

        ``"pt"`` saves the tensor as given (``torch.save``, batch and layout untouched);
        ``"memmap"`` saves it as a ``.npy``-format file (``numpy.load(path, mmap_mode="r")``
        maps it back); ``"mp4"`` and ``"gif"`` encode the frames (a batch tiled in a grid).

        Examples:
            >>> import tempfile, torch
            >>> e = CSVExperiment(tempfile.mkdtemp())
            >>> path = e.add_video("clip", torch.zeros(3, 3, 4, 4, dtype=torch.uint8), step=0)
            >>> torch.load(path).shape
            torch.Size([3, 3, 4, 4])
        """
        path = self.video_path(name, step)
        fps = self.video_fps if fps is None else fps
        if self.video_format in ("mp4", "gif"):
            frames = video_to_frames(video, name)  # validate before touching the disk
        elif not isinstance(video, (torch.Tensor, np.ndarray)):
            raise TypeError(f"video {name!r}: expected a torch.Tensor or numpy.ndarray, got {type(video).__name__}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if self.video_format == "pt":
            torch.save(torch.as_tensor(video).detach().cpu().clone(), path)
        elif self.video_format == "memmap":
            array = video.detach().cpu().numpy() if isinstance(video, torch.Tensor) else np.asarray(video)
            mapped = np.lib.format.open_memmap(path, mode="w+", dtype=array.dtype, shape=array.shape)
            mapped[...] = array
            mapped.flush()
            del mapped
        elif self.video_format == "mp4":
            write_mp4(path, frames, fps)
        else:
            write_gif(path, frames, fps)
        return path

    def close(self) -> None:
        """Closes the open scalar files. Idempotent.

        Examples:
            >>> import tempfile
            >>> e = CSVExperiment(tempfile.mkdtemp()); e.add_scalar("x", 1, 0); e.close(); e.close()
        """
        for file in self._files.values():
            file.close()
        self._files.clear()

    def __repr__(self) -> str:
        return f"CSVExperiment(log_dir={self.log_dir!r}, video_format={self.video_format!r})"


class CSVLogger(Logger):
    """Logs to plain files under ``<log_dir>/<exp_name>/``: CSV, YAML and video files.

    Scalars go to ``scalars/<name>.csv``, one ``step,value`` line per call, flushed at
    once so that a crash of the process loses nothing already logged. A logger opened on
    an existing experiment appends, and ``step=None`` continues from the last step found in
    the file. Hyper-parameters go to ``hparams.yaml`` (later calls merge into earlier
    ones). Videos go to ``videos/<name>_<step>.<video_format>``:

    * ``"pt"``: the tensor as given, via ``torch.save`` (load it with ``torch.load``);
    * ``"memmap"``: the array as given, in ``.npy`` format (``numpy.load(path, mmap_mode="r")``);
    * ``"mp4"`` (H.264) and ``"gif"``: encoded frames; a batch ``[B, T, ...]`` becomes one
      file whose frames tile the ``B`` videos in a grid (see ``cadence.record.loggers._video``).
      These need ``pip install "cadence[video]"``; without it, making the logger and
      :meth:`log_video` raise ``ImportError`` saying so.

    Args:
        exp_name: the experiment's name (its directory under ``log_dir``).
        log_dir: the parent directory; ``None`` means ``"csv_logs"``.
        video_format: ``"pt"``, ``"memmap"``, ``"mp4"`` or ``"gif"``.
        video_fps: frames per second of mp4 and GIF files.

    Examples:
        >>> import os, tempfile, torch
        >>> root = tempfile.mkdtemp()
        >>> logger = CSVLogger("exp", log_dir=root)
        >>> logger.log_scalar("reward", 1.0)
        >>> logger.log_scalar("reward", torch.tensor(2.5))
        >>> logger.log_scalar("reward", 3, step=10)
        >>> print(open(os.path.join(root, "exp", "scalars", "reward.csv")).read(), end="")
        0,1.0
        1,2.5
        10,3
        >>> logger.log_hparams({"lr": 3e-4, "env": "Pendulum-v1"})
        >>> logger.log_video("rollout", torch.zeros(1, 4, 3, 8, 8, dtype=torch.uint8), step=10)
        >>> sorted(os.listdir(os.path.join(root, "exp", "videos")))
        ['rollout_10.pt']
        >>> logger.close()
    """

    def __init__(
        self,
        exp_name: str,
        log_dir: str | os.PathLike[str] | None = None,
        video_format: str = "pt",
        video_fps: float = 30,
    ) -> None:
        if video_format not in VIDEO_FORMATS:
            raise ValueError(f"video_format: expected one of {VIDEO_FORMATS}, got {video_format!r}")
        if isinstance(video_fps, bool) or not isinstance(video_fps, (int, float)) or not video_fps > 0:
            raise ValueError(f"video_fps: expected a positive number, got {video_fps!r}")
        self.video_format = video_format
        self.video_fps = video_fps
        self._check_video_extra()
        super().__init__(exp_name, "csv_logs" if log_dir is None else log_dir)

    def _check_video_extra(self) -> None:
        if self.video_format == "mp4":
            import_optional(
                "imageio_ffmpeg", feature="CSVLogger(video_format='mp4')", extra="video", package="imageio-ffmpeg"
            )
        elif self.video_format == "gif":
            import_optional("PIL.Image", feature="CSVLogger(video_format='gif')", extra="video", package="pillow")

    def _create_experiment(self) -> CSVExperiment:
        assert self.log_dir is not None
        return CSVExperiment(os.path.join(self.log_dir, self.exp_name), self.video_format, self.video_fps)

    def log_scalar(self, name: str, value: Any, step: int | None = None) -> None:
        """Appends ``step,value`` to ``scalars/<name>.csv`` (see :meth:`Logger.log_scalar`).

        Examples:
            >>> import tempfile
            >>> logger = CSVLogger("exp", log_dir=tempfile.mkdtemp())
            >>> logger.log_scalar("loss", [1.0])
            Traceback (most recent call last):
            ...
            TypeError: scalar 'loss': expected a number or a one-element tensor/array, got list: [1.0]
        """
        number = to_scalar(name, value)
        if step is None and name not in self._last_steps:
            last = self.experiment.last_step(name)  # resuming an existing experiment
            if last is not None:
                self._last_steps[name] = last
        self.experiment.add_scalar(name, number, self._step(name, step))

    def log_video(self, name: str, video: Any, step: int | None = None, **kwargs: Any) -> None:
        """Writes ``videos/<name>_<step>.<video_format>``.

        Args:
            name: the video's name.
            video: see :meth:`Logger.log_video`.
            step: the step, or ``None`` for one after the last step of ``name``.
            **kwargs: only ``fps``, which overrides ``video_fps`` for this video.

        Raises:
            TypeError: for another keyword argument.
            ImportError: for mp4 or GIF without ``cadence[video]`` installed.

        Examples:
            >>> import tempfile, torch
            >>> logger = CSVLogger("exp", log_dir=tempfile.mkdtemp())
            >>> logger.log_video("clip", torch.zeros(4, 8, 8, 3, dtype=torch.uint8), caption="x")
            Traceback (most recent call last):
            ...
            TypeError: CSVLogger.log_video: unexpected keyword arguments ['caption'] (accepted: 'fps')
        """
        unexpected = sorted(set(kwargs) - {"fps"})
        if unexpected:
            raise TypeError(f"CSVLogger.log_video: unexpected keyword arguments {unexpected} (accepted: 'fps')")
        self._check_video_extra()
        self.experiment.add_video(name, video, self._step(name, step), fps=kwargs.get("fps"))

    def log_hparams(self, cfg: Any) -> None:
        """Writes (merges into) ``hparams.yaml`` (see :meth:`Logger.log_hparams`).

        Examples:
            >>> import os, tempfile
            >>> logger = CSVLogger("exp", log_dir=tempfile.mkdtemp())
            >>> logger.log_hparams({"optim": {"lr": 0.001}, "seed": 0})
            >>> print(open(os.path.join(logger.experiment.log_dir, "hparams.yaml")).read(), end="")
            optim:
              lr: 0.001
            seed: 0
        """
        self.experiment.add_hparams(hparams_to_dict(cfg))

    def flush(self) -> None:
        """Nothing to do: every scalar is flushed when written."""

    def close(self) -> None:
        """Closes the scalar files (they are reopened if logging goes on)."""
        self.experiment.close()

    def __repr__(self) -> str:
        return (
            f"CSVLogger(exp_name={self.exp_name!r}, log_dir={self.log_dir!r}, "
            f"video_format={self.video_format!r}, video_fps={self.video_fps!r})"
        )

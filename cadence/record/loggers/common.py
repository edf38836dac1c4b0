"""The :class:`Logger` base class: what every Cadence logger answers to.

A logger owns one *experiment* (a directory of CSV files, a TensorBoard writer, a wandb
run), made once by :meth:`Logger._create_experiment` and kept in ``Logger.experiment``.
Training code talks to the logger only through ``log_scalar``, ``log_video``,
``log_hparams`` and ``log_histogram``, so that swapping one backend for another is a
one-line change.

This module also holds the small conversions every backend needs: turning a value into a
Python number, a step into an ``int``, a configuration object into a plain ``dict``, and
importing an optional package with an error that says which extra to install.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import numbers
import os
from collections.abc import Mapping, Sequence
from types import ModuleType, TracebackType
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

__all__ = ["Logger", "import_optional", "to_scalar", "hparams_to_dict", "flatten_dict"]


def import_optional(module: str, *, feature: str, extra: str, package: str | None = None) -> ModuleType:
    """Imports an optional dependency, or says which Cadence extra provides it.

    Args:
        module: the import name, e.g. ``"imageio_ffmpeg"``.
        feature: what needs it, for the message, e.g. ``"writing mp4 videos"``.
        extra: the ``cadence`` extra that installs it, e.g. ``"video"``.
        package: the distribution's name for the message, if not ``module``
            (``"pillow"`` for ``"PIL.Image"``).

    Returns:
        The imported module.

    Raises:
        ImportError: if the module cannot be imported; the message carries the
            ``pip install "cadence[<extra>]"`` command.

    Examples:
        >>> import_optional("json", feature="reading json", extra="none").dumps([1])
        '[1]'
        >>> import_optional("no_such_mod", feature="flying", extra="wings")
        Traceback (most recent call last):
        ...
        ImportError: flying needs the 'no_such_mod' package, which could not be imported: pip install "cadence[wings]"
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{feature} needs the {package or module!r} package, which could not be imported: "
            f'pip install "cadence[{extra}]"'
        ) from err


def to_scalar(name: str, value: Any) -> int | float:
    """Turns a logged value into a Python ``int`` or ``float``.

    Accepted: Python and numpy numbers, and tensors or arrays holding exactly one element
    (of any shape, e.g. ``torch.tensor([0.5])``). Booleans become ``0``/``1``.

    Args:
        name: the name the value is logged under (for the error message).
        value: the value.

    Returns:
        An ``int`` for integer and boolean inputs, a ``float`` otherwise.

    Raises:
        TypeError: if ``value`` is not a number, or holds more or fewer than one element.

    Examples:
        >>> import torch
        >>> to_scalar("loss", torch.tensor([0.25]))
        0.25
        >>> to_scalar("frames", 3), to_scalar("done", True)
        (3, 1)
        >>> to_scalar("loss", torch.zeros(2))
        Traceback (most recent call last):
        ...
        TypeError: scalar 'loss': expected a number or a one-element tensor/array, got Tensor of shape (2,)
    """
    if isinstance(value, (torch.Tensor, np.ndarray)):
        if _numel(value) == 1:
            value = value.item()
        else:
            raise TypeError(
                f"scalar {name!r}: expected a number or a one-element tensor/array, "
                f"got {type(value).__name__} of shape {tuple(value.shape)}"
            )
    elif isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(
        f"scalar {name!r}: expected a number or a one-element tensor/array, "
        f"got {type(value).__name__}: {value!r}"
    )


def _numel(value: torch.Tensor | np.ndarray | np.generic) -> int:
    return value.numel() if isinstance(value, torch.Tensor) else int(value.size)


def _to_step(name: str, step: Any) -> int:
    if isinstance(step, (torch.Tensor, np.ndarray, np.generic)):
        if _numel(step) != 1:
            raise TypeError(
                f"{name!r}: expected an integer step, got {type(step).__name__} of shape {tuple(step.shape)}"
            )
        step = step.item()
    if isinstance(step, bool) or not isinstance(step, numbers.Integral):
        raise TypeError(f"{name!r}: expected an integer step (or None), got {type(step).__name__}: {step!r}")
    return int(step)


def hparams_to_dict(cfg: Any) -> dict[str, Any]:
    """Turns a configuration object into a (possibly nested) plain ``dict``.

    Accepted: any mapping (``dict``, an OmegaConf ``DictConfig``, ...), a dataclass
    instance and an ``argparse.Namespace``. Nested mappings and dataclasses are converted
    too; sequences become lists.

    Args:
        cfg: the configuration.

    Returns:
        A ``dict`` with ``str`` keys.

    Raises:
        TypeError: if ``cfg`` is none of the accepted kinds.

    Examples:
        >>> import argparse, dataclasses
        >>> hparams_to_dict(argparse.Namespace(lr=0.1, layers=(64, 64)))
        {'lr': 0.1, 'layers': [64, 64]}
        >>> @dataclasses.dataclass
        ... class Cfg:
        ...     gamma: float = 0.99
        >>> hparams_to_dict({"algo": Cfg()})
        {'algo': {'gamma': 0.99}}
    """
    if isinstance(cfg, argparse.Namespace):
        cfg = vars(cfg)
    elif dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        cfg = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    if not isinstance(cfg, Mapping):
        raise TypeError(
            "hparams: expected a mapping, a dataclass instance or an argparse.Namespace, "
            f"got {type(cfg).__name__}: {cfg!r}"
        )
    return {str(key): _plain(value) for key, value in cfg.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, (Mapping, argparse.Namespace)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return hparams_to_dict(value)
    if isinstance(value, (list, tuple)) or (
        isinstance(value, Sequence) and not isinstance(value, (str, bytes))
    ):
        return [_plain(item) for item in value]
    if isinstance(value, (torch.Tensor, np.ndarray)) and _numel(value) == 1:
        return value.item()
    if isinstance(value, np.generic):
        return value.item()
    return value


def flatten_dict(nested: Mapping[str, Any], sep: str = ".") -> dict[str, Any]:
    """Flattens nested mappings into one level, joining keys with ``sep``.

    Args:
        nested: the mapping.
        sep: what joins a parent key to a child key.

    Returns:
        A flat ``dict``.

    Examples:
        >>> flatten_dict({"optim": {"lr": 0.1, "betas": [0.9, 0.99]}, "seed": 0})
        {'optim.lr': 0.1, 'optim.betas': [0.9, 0.99], 'seed': 0}
    """
    flat: dict[str, Any] = {}
    for key, value in nested.items():
        if isinstance(value, Mapping):
            for sub_key, sub_value in flatten_dict(value, sep).items():
                flat[f"{key}{sep}{sub_key}"] = sub_value
        else:
            flat[str(key)] = value
    return flat


class Logger:
    """Base class of the loggers: one experiment, logged to by name and step.

    Subclasses implement :meth:`_create_experiment` and the ``log_*`` methods they
    support; the base class raises ``NotImplementedError`` (naming the subclass) for the
    others. A logger is also a context manager that calls :meth:`close` on exit.

    Steps: every ``log_*`` method takes ``step=None``, which means "one after the last
    step used for this name" (``0`` the first time). Explicit steps are ``int``-like.

    Args:
        exp_name: the experiment's name (a non-empty ``str``).
        log_dir: where the experiment's files go (backend-specific; may be ``None``).

    Attributes:
        exp_name: the experiment's name.
        log_dir: the directory given (as a ``str``), or ``None``.
        experiment: the backend object made by :meth:`_create_experiment`.

    Examples:
        >>> class PrintLogger(Logger):
        ...     def _create_experiment(self):
        ...         return print
        ...     def log_scalar(self, name, value, step=None):
        ...         self.experiment(name, self._step(name, step), to_scalar(name, value))
        >>> logger = PrintLogger("demo", log_dir=None)
        >>> logger.log_scalar("reward", 1.5)
        reward 0 1.5
        >>> _ = logger.log_metrics({"reward": 2.0, "loss": 0.1, "rate": None}, step=10)
        reward 10 2.0
        loss 10 0.1
        >>> logger.log_scalar("reward", 2.5)
        reward 11 2.5
        >>> logger
        PrintLogger(exp_name='demo', log_dir=None)
    """

    def __init__(self, exp_name: str, log_dir: str | os.PathLike[str] | None) -> None:
        if not isinstance(exp_name, str) or not exp_name:
            raise TypeError(f"exp_name: expected a non-empty str, got {type(exp_name).__name__}: {exp_name!r}")
        if log_dir is not None and not isinstance(log_dir, (str, os.PathLike)):
            raise TypeError(f"log_dir: expected a path (str or os.PathLike) or None, got {type(log_dir).__name__}")
        self.exp_name: str = exp_name
        self.log_dir: str | None = None if log_dir is None else os.fspath(log_dir)
        self._last_steps: dict[str, int] = {}
        self.experiment: Any = self._create_experiment()

    # ------------------------------------------------------------------ to implement

    def _create_experiment(self) -> Any:
        """Makes the backend object kept in ``experiment``; called once by ``__init__``."""
        raise NotImplementedError(f"{type(self).__name__} must implement _create_experiment()")

    def log_scalar(self, name: str, value: Any, step: int | None = None) -> None:
        """Logs one number under ``name`` at ``step``.

        Args:
            name: the series' name; ``/`` groups series (``"train/reward"``).
            value: a number, or a tensor/array holding one element.
            step: the step, or ``None`` for one after the last step of ``name``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not log scalars")

    def log_video(self, name: str, video: Any, step: int | None = None, **kwargs: Any) -> None:
        """Logs a video under ``name`` at ``step``.

        Args:
            name: the video's name.
            video: a ``uint8`` tensor ``[T, C, H, W]`` or ``[B, T, C, H, W]``
                (``C`` in 1 or 3), or channels last ``[T, H, W, C]``/``[B, T, H, W, C]``.
            step: the step, or ``None`` for one after the last step of ``name``.
            **kwargs: backend-specific options (``fps``, ...).
        """
        raise NotImplementedError(f"{type(self).__name__} does not log videos")

    def log_hparams(self, cfg: Any) -> None:
        """Logs the hyper-parameters of the experiment.

        Args:
            cfg: a mapping, a dataclass instance or an ``argparse.Namespace``
                (see :func:`hparams_to_dict`).
        """
        raise NotImplementedError(f"{type(self).__name__} does not log hyper-parameters")

    def log_histogram(self, name: str, data: Any, step: int | None = None, **kwargs: Any) -> None:
        """Logs the distribution of the values in ``data`` under ``name`` at ``step``.

        Args:
            name: the histogram's name.
            data: a tensor or array of numbers (any shape).
            step: the step, or ``None`` for one after the last step of ``name``.
            **kwargs: backend-specific options (``bins``, ...).
        """
        raise NotImplementedError(f"{type(self).__name__} does not log histograms")

    # ------------------------------------------------------------------ shared

    def log_metrics(
        self, metrics: Mapping[str, Any] | TensorDictBase, step: int | None = None, *, keys_sep: str = "/"
    ) -> dict[str, Any]:
        """Logs several scalars at one step (one :meth:`log_scalar` call each).

        A value of ``None`` (a metric not measured yet, such as a progress bar's rate
        before its first interval) is skipped.

        Args:
            metrics: name -> value, or a tensordict (nested keys joined by ``keys_sep``).
            step: the step for all of them, or ``None`` (each name's own next step).
            keys_sep: how a tensordict's nested keys are joined into one name.

        Returns:
            The metrics logged, by name.
        """
        if isinstance(metrics, TensorDictBase):
            metrics = metrics.flatten_keys(keys_sep).to_dict()
        logged = {name: value for name, value in metrics.items() if value is not None}
        for name, value in logged.items():
            self.log_scalar(name, value, step=step)
        return logged

    def flush(self) -> None:
        """Writes out what the backend buffers. The base class has nothing to flush."""

    def close(self) -> None:
        """Flushes and releases the backend (files, writers, runs). Idempotent."""
        self.flush()

    def __enter__(self) -> Logger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(exp_name={self.exp_name!r}, log_dir={self.log_dir!r})"

    def _step(self, name: str, step: Any) -> int:
        """Resolves ``step`` for ``name`` (``None`` -> last step + 1) and remembers it."""
        if step is None:
            last = self._last_steps.get(name)
            resolved = 0 if last is None else last + 1
        else:
            resolved = _to_step(name, step)
        self._last_steps[name] = resolved
        return resolved

"""Helpers to name experiments and to pick a logger by name (as a config file would)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from cadence.record.loggers.common import Logger

__all__ = ["generate_exp_name", "get_logger", "LOGGER_TYPES"]

#: The ``logger_type`` values :func:`get_logger` knows.
LOGGER_TYPES = ("csv", "tensorboard", "wandb")
# each backend's own options, passed as one keyword each (the reference's convention); only the named backend reads its own
BACKEND_OPTIONS = ("wandb_kwargs", "mlflow_kwargs", "trackio_kwargs")


def generate_exp_name(model_name: str, experiment_name: str) -> str:
    """Makes a unique experiment name: ``<model>_<experiment>_<yy_mm_dd-HH_MM_SS>_<8 hex>``.

    The timestamp makes names sort by start time; the random suffix keeps two runs
    started in the same second apart.

    Args:
        model_name: the model or algorithm, e.g. ``"DDPG"``.
        experiment_name: the experiment, e.g. ``"pendulum"``.

    Returns:
        The name.

    Raises:
        TypeError: if either argument is not a ``str``.

    Examples:
        >>> name = generate_exp_name("DDPG", "pendulum")
        >>> name.startswith("DDPG_pendulum_"), len(name.split("_")[-1])
        (True, 8)
        >>> generate_exp_name("DDPG", "pendulum") != generate_exp_name("DDPG", "pendulum")
        True
    """
    for argument, value in (("model_name", model_name), ("experiment_name", experiment_name)):
        if not isinstance(value, str):
            raise TypeError(f"{argument}: expected a str, got {type(value).__name__}: {value!r}")
    timestamp = datetime.now().strftime("%y_%m_%d-%H_%M_%S")
    return f"{model_name}_{experiment_name}_{timestamp}_{uuid.uuid4().hex[:8]}"


def get_logger(logger_type: str | None, logger_name: str, experiment_name: str, **kwargs: Any) -> Logger | None:
    """Makes a logger from its type name.

    ``logger_name`` is the directory the logger writes under: ``log_dir`` of
    :class:`~cadence.record.loggers.csv.CSVLogger` and
    :class:`~cadence.record.loggers.tensorboard.TensorboardLogger`, ``save_dir`` of
    :class:`~cadence.record.loggers.wandb.WandbLogger` (unless ``save_dir`` is given).

    Args:
        logger_type: ``"csv"``, ``"tensorboard"`` (or ``"tb"``) or ``"wandb"``; ``""`` or
            ``None`` for no logger.
        logger_name: the directory (see above).
        experiment_name: the experiment's name (``exp_name``).
        **kwargs: each backend's own options, as the reference takes them:
            ``wandb_kwargs={...}`` goes to wandb only (``mlflow_kwargs`` and
            ``trackio_kwargs`` likewise to theirs), so that one call serves whichever
            backend a config names. Other keywords go to the logger itself
            (``video_format=...`` for CSV, ``project=...`` for wandb, ...).

    Returns:
        The logger, or ``None`` for an empty ``logger_type``.

    Raises:
        ValueError: for an unknown ``logger_type``.

    Examples:
        >>> import tempfile
        >>> logger = get_logger("csv", tempfile.mkdtemp(), "exp", video_format="pt")
        >>> type(logger).__name__, logger.exp_name
        ('CSVLogger', 'exp')
        >>> logger = get_logger("csv", tempfile.mkdtemp(), "exp", wandb_kwargs={"project": "p", "mode": "offline"})
        >>> type(logger).__name__, get_logger("", "logs", "exp")
        ('CSVLogger', None)
        >>> get_logger("mlflow", "logs", "exp")
        Traceback (most recent call last):
        ...
        ValueError: logger_type: expected one of ('csv', 'tensorboard', 'wandb'), got 'mlflow'
    """
    if logger_type in ("", None):
        return None
    backend_options = {name: kwargs.pop(name, None) or {} for name in BACKEND_OPTIONS}
    if logger_type == "csv":
        from cadence.record.loggers.csv import CSVLogger

        return CSVLogger(experiment_name, log_dir=logger_name, **kwargs)
    if logger_type in ("tensorboard", "tb"):
        from cadence.record.loggers.tensorboard import TensorboardLogger

        return TensorboardLogger(experiment_name, log_dir=logger_name, **kwargs)
    if logger_type == "wandb":
        from cadence.record.loggers.wandb import WandbLogger

        kwargs = {**kwargs, **backend_options["wandb_kwargs"]}
        kwargs.setdefault("save_dir", logger_name)
        return WandbLogger(experiment_name, **kwargs)
    raise ValueError(f"logger_type: expected one of {LOGGER_TYPES}, got {logger_type!r}")

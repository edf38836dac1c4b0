"""generate_exp_name and get_logger."""

from __future__ import annotations

import re

import pytest

from cadence.record.loggers import CSVLogger, TensorboardLogger, WandbLogger
from cadence.record.loggers.utils import generate_exp_name, get_logger


def test_generate_exp_name_is_unique_and_readable():
    names = {generate_exp_name("DDPG", "pendulum") for _ in range(20)}
    assert len(names) == 20
    for name in names:
        assert re.fullmatch(r"DDPG_pendulum_\d\d_\d\d_\d\d-\d\d_\d\d_\d\d_[0-9a-f]{8}", name)
    with pytest.raises(TypeError, match="model_name: expected a str, got int"):
        generate_exp_name(1, "x")


def test_get_logger_csv(tmp_path):
    logger = get_logger("csv", str(tmp_path), "exp", video_format="gif")
    assert isinstance(logger, CSVLogger) and logger.video_format == "gif"
    assert logger.experiment.log_dir == str(tmp_path / "exp")


def test_get_logger_tensorboard(tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    for name in ("tensorboard", "tb"):
        logger = get_logger(name, str(tmp_path), "exp")
        assert isinstance(logger, TensorboardLogger) and logger.log_dir == str(tmp_path)
        logger.close()


def test_get_logger_wandb(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_ERROR_REPORTING", "false")
    with get_logger("wandb", str(tmp_path), "exp", project="p") as logger:
        assert isinstance(logger, WandbLogger) and logger.save_dir == str(tmp_path) and logger.project == "p"


def test_get_logger_unknown_type():
    expected = r"logger_type: expected one of \('csv', 'tensorboard', 'wandb'\), got 'neptune'"
    with pytest.raises(ValueError, match=expected):
        get_logger("neptune", "logs", "exp")


def test_get_logger_gives_each_backend_only_its_own_options(tmp_path) -> None:
    # one call serves whichever backend a config names, as the reference's example scripts call it
    options = {"wandb_kwargs": {"mode": "offline", "project": "p"}, "mlflow_kwargs": {"x": 1}}
    csv_logger = get_logger("csv", str(tmp_path / "csv"), "exp", **options)
    csv_logger.log_scalar("r", 1.0)
    assert type(csv_logger).__name__ == "CSVLogger"
    tensorboard_logger = get_logger("tensorboard", str(tmp_path / "tb"), "exp", **options)
    assert type(tensorboard_logger).__name__ == "TensorboardLogger"
    assert get_logger("", "logs", "exp", **options) is None and get_logger(None, "logs", "exp") is None

"""WandbLogger in offline mode: no network, a run directory on disk."""

from __future__ import annotations

import glob
import os
import sys

import pytest
import torch

from cadence.record.loggers import WandbLogger

pytest.importorskip("wandb", reason="the wandb extra is not installed")


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    """Keeps wandb quiet, offline and out of the home directory."""
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_ERROR_REPORTING", "false")
    for variable in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(variable, str(tmp_path / "home" / variable.lower()))
    return tmp_path


def test_offline_run_dir_is_created_and_holds_the_run(wandb_env):
    save_dir = wandb_env / "runs"
    logger = WandbLogger("exp", save_dir=save_dir, project="cadence-tests")
    assert logger.experiment.offline and logger.experiment.name == "exp"
    logger.log_scalar("reward", torch.tensor(1.5), step=10)
    logger.log_scalar("reward", 2.5)
    assert logger.experiment.summary["reward"] == 2.5
    assert logger.experiment.summary["trainer/step"] == 11
    logger.close()
    logger.close()  # idempotent
    (run_dir,) = glob.glob(str(save_dir / "wandb" / "offline-run-*"))
    assert glob.glob(os.path.join(run_dir, "run-*.wandb"))


def test_several_numbers_are_logged_as_a_list_as_the_reference_does(wandb_env):
    # the reference's SAC script logs the returns of all the episodes that ended in a batch
    with WandbLogger("exp", save_dir=wandb_env) as logger:
        logged = logger.log_metrics({"train/reward": torch.tensor([1.0, 2.5]), "loss": torch.tensor([0.5])}, step=3)
        assert list(logger.experiment.summary["train/reward"]) == [1.0, 2.5]
        assert logger.experiment.summary["loss"] == 0.5
        logger.log_scalar("grid", [[1, 2], [3, 4]])
        assert [list(row) for row in logger.experiment.summary["grid"]] == [[1, 2], [3, 4]]
        with pytest.raises(TypeError, match="scalar 'bad'"):
            logger.log_scalar("bad", ["a", "b"])
    assert set(logged) == {"train/reward", "loss"}


def test_hparams_go_to_the_config(wandb_env):
    with WandbLogger("exp", save_dir=wandb_env) as logger:
        logger.log_hparams({"lr": 0.1, "optim": {"name": "adam"}})
        logger.log_hparams({"lr": 0.2})
        assert logger.experiment.config["lr"] == 0.2
        assert logger.experiment.config["optim"] == {"name": "adam"}


@pytest.mark.parametrize("video_format", ["mp4", "gif"])
def test_videos_are_encoded_and_copied_into_the_run(wandb_env, video_format):
    pytest.importorskip("imageio_ffmpeg" if video_format == "mp4" else "PIL.Image", reason="no video extra")
    with WandbLogger("exp", save_dir=wandb_env) as logger:
        logger.log_video("rollout", torch.zeros(1, 4, 3, 8, 8, dtype=torch.uint8), step=0, format=video_format)
        video_dir = logger._video_dir
    assert glob.glob(str(wandb_env / "wandb" / "offline-run-*" / "files" / "media" / "videos" / f"*.{video_format}"))
    assert not os.path.exists(video_dir)  # the temporary copies are gone


def test_histograms_and_bad_arguments(wandb_env):
    with WandbLogger("exp", save_dir=wandb_env) as logger:
        logger.log_histogram("weights", torch.randn(50), bins=8)
        with pytest.raises(ValueError, match="format: expected 'mp4' or 'gif', got 'avi'"):
            logger.log_video("v", torch.zeros(2, 3, 4, 4, dtype=torch.uint8), format="avi")
        with pytest.raises(TypeError, match=r"unexpected keyword arguments \['walltime'\]"):
            logger.log_video("v", torch.zeros(2, 3, 4, 4, dtype=torch.uint8), walltime=0.0)
    assert repr(logger) == f"WandbLogger(exp_name='exp', offline=True, save_dir={str(wandb_env)!r}, project=None)"


def test_missing_wandb_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r'WandbLogger needs .*pip install "cadence\[wandb\]"'):
        WandbLogger("exp", save_dir=tmp_path)

"""TensorboardLogger: event files read back with TensorBoard's EventAccumulator."""

from __future__ import annotations

import io
import sys

import pytest
import torch

from cadence.record.loggers import TensorboardLogger

pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def load(path) -> EventAccumulator:
    return EventAccumulator(str(path), size_guidance={"images": 0, "histograms": 0}).Reload()


def test_scalars_are_in_the_event_file(tmp_path):
    with TensorboardLogger("exp", log_dir=tmp_path) as logger:
        logger.log_scalar("reward", torch.tensor(0.5), step=0)
        logger.log_scalar("reward", 1.5, step=10)
        logger.log_scalar("reward", 2.5)
        logger.log_scalar("train/loss", 0.25)
    events = load(tmp_path / "exp")
    assert [(e.step, e.value) for e in events.Scalars("reward")] == [(0, 0.5), (10, 1.5), (11, 2.5)]
    assert [(e.step, e.value) for e in events.Scalars("train/loss")] == [(0, 0.25)]


def test_flush_writes_without_closing(tmp_path):
    logger = TensorboardLogger("exp", log_dir=tmp_path)
    logger.log_scalar("x", 1.0, step=0)
    logger.flush()
    assert [e.value for e in load(tmp_path / "exp").Scalars("x")] == [1.0]
    logger.close()


def test_default_log_dir_and_repr(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    logger = TensorboardLogger("exp")
    logger.close()
    assert (tmp_path / "tb_logs" / "exp").is_dir()
    assert repr(logger) == "TensorboardLogger(exp_name='exp', log_dir='tb_logs')"


def test_hparams_are_in_the_run(tmp_path):
    with TensorboardLogger("exp", log_dir=tmp_path) as logger:
        logger.log_hparams({"lr": 0.1, "optim": {"name": "adam"}, "layers": [64, 64], "clip": None})
    from tensorboard.plugins.hparams import plugin_data_pb2

    content = load(tmp_path / "exp").PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hparams = start.session_start_info.hparams
    assert hparams["lr"].number_value == 0.1
    assert hparams["optim/name"].string_value == "adam"
    assert hparams["layers"].string_value == "[64, 64]"
    assert hparams["clip"].string_value == "None"


def test_videos_are_gif_image_summaries(tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="the video extra is not installed")
    video = torch.randint(0, 256, (2, 7, 3, 8, 8), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    with TensorboardLogger("exp", log_dir=tmp_path) as logger:
        logger.log_video("rollout", video, step=5, fps=10)
    (event,) = load(tmp_path / "exp").Images("rollout")
    assert event.step == 5 and (event.width, event.height) == (16, 8)
    with Image.open(io.BytesIO(event.encoded_image_string)) as image:
        assert image.format == "GIF" and image.n_frames == 7 and image.info["duration"] == 100


def test_histograms_are_in_the_run(tmp_path):
    with TensorboardLogger("exp", log_dir=tmp_path) as logger:
        logger.log_histogram("weights", torch.arange(100.0), step=2)
        logger.log_histogram("weights", [1.0, 2.0, 3.0])
    events = load(tmp_path / "exp").Histograms("weights")
    assert [e.step for e in events] == [2, 3]
    assert events[0].histogram_value.num == 100 and events[0].histogram_value.max == 99.0


def test_log_video_rejects_unknown_keywords(tmp_path):
    with TensorboardLogger("exp", log_dir=tmp_path) as logger:
        with pytest.raises(TypeError, match=r"unexpected keyword arguments \['format'\]"):
            logger.log_video("v", torch.zeros(2, 3, 4, 4, dtype=torch.uint8), format="mp4")


def test_missing_tensorboard_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    expected = r"TensorboardLogger needs the 'tensorboard' package, .*: pip install \"cadence\[tensorboard\]\""
    with pytest.raises(ImportError, match=expected):
        TensorboardLogger("exp", log_dir=tmp_path)


def test_missing_pillow_for_videos_says_what_to_install(tmp_path, monkeypatch):
    with TensorboardLogger("exp", log_dir=tmp_path) as logger:
        monkeypatch.setitem(sys.modules, "PIL.Image", None)
        with pytest.raises(ImportError, match=r'pip install "cadence\[video\]"'):
            logger.log_video("v", torch.zeros(2, 3, 4, 4, dtype=torch.uint8))

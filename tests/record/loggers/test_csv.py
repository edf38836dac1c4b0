"""CSVLogger: scalar files, hyper-parameters, videos in each format."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from cadence.record.loggers import CSVLogger
from cadence.record.loggers.csv import CSVExperiment, to_yaml


def read_csv(path) -> list[tuple[int, float]]:
    with open(path) as file:
        return [(int(step), float(value)) for step, value in (line.split(",") for line in file.read().splitlines())]


def test_scalars_are_written_with_their_steps(tmp_path):
    logger = CSVLogger("exp", log_dir=tmp_path)
    for step, value in enumerate([0.5, 1.5, 2.5]):
        logger.log_scalar("reward", torch.tensor(value), step=step * 10)
    logger.log_scalar("reward", 3.5)
    logger.log_scalar("train/loss", np.float32(0.125))
    assert read_csv(tmp_path / "exp" / "scalars" / "reward.csv") == [(0, 0.5), (10, 1.5), (20, 2.5), (21, 3.5)]
    assert read_csv(tmp_path / "exp" / "scalars" / "train" / "loss.csv") == [(0, 0.125)]
    logger.close()


def test_floats_keep_full_precision(tmp_path):
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        logger.log_scalar("x", 0.1 + 0.2)
    assert read_csv(tmp_path / "exp" / "scalars" / "x.csv") == [(0, 0.1 + 0.2)]


def test_default_log_dir_is_csv_logs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    logger = CSVLogger("exp")
    assert logger.log_dir == "csv_logs" and os.path.isdir(tmp_path / "csv_logs" / "exp")
    assert repr(logger) == "CSVLogger(exp_name='exp', log_dir='csv_logs', video_format='pt', video_fps=30)"
    assert isinstance(logger.experiment, CSVExperiment)
    assert logger.experiment.log_dir == os.path.join("csv_logs", "exp")


def test_reopening_an_experiment_appends_and_continues_the_steps(tmp_path):
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        logger.log_scalar("x", 1.0, step=4)
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        logger.log_scalar("x", 2.0)
    assert read_csv(tmp_path / "exp" / "scalars" / "x.csv") == [(4, 1.0), (5, 2.0)]


def test_logging_after_close_reopens_the_file(tmp_path):
    logger = CSVLogger("exp", log_dir=tmp_path)
    logger.log_scalar("x", 1.0)
    logger.close()
    logger.log_scalar("x", 2.0)
    logger.close()
    assert read_csv(tmp_path / "exp" / "scalars" / "x.csv") == [(0, 1.0), (1, 2.0)]


def test_scalars_survive_a_crash(tmp_path):
    script = textwrap.dedent(
        f"""
        import os
        from cadence.record.loggers import CSVLogger
        logger = CSVLogger("exp", log_dir={str(tmp_path)!r})
        for step in range(3):
            logger.log_scalar("reward", float(step), step=step)
        os._exit(1)  # no close, no interpreter shutdown
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    assert read_csv(tmp_path / "exp" / "scalars" / "reward.csv") == [(0, 0.0), (1, 1.0), (2, 2.0)]


@pytest.mark.parametrize("name", ["", "../x", "a//b", "/abs", "a/./b"])
def test_names_that_leave_the_experiment_are_rejected(tmp_path, name):
    logger = CSVLogger("exp", log_dir=tmp_path)
    with pytest.raises((ValueError, TypeError), match="scalar name"):
        logger.log_scalar(name, 1.0)


def test_bad_arguments_name_what_was_expected(tmp_path):
    with pytest.raises(ValueError, match=r"video_format: expected one of \('pt', 'memmap', 'mp4', 'gif'\), got 'avi'"):
        CSVLogger("exp", log_dir=tmp_path, video_format="avi")
    with pytest.raises(ValueError, match="video_fps: expected a positive number, got 0"):
        CSVLogger("exp", log_dir=tmp_path, video_fps=0)
    with pytest.raises(TypeError, match="scalar 'x': expected a number"):
        CSVLogger("exp", log_dir=tmp_path).log_scalar("x", "high")


def test_hparams_are_yaml(tmp_path):
    yaml = pytest.importorskip("yaml", reason="pyyaml is needed to parse the file back")
    logger = CSVLogger("exp", log_dir=tmp_path)
    cfg = {
        "lr": 1e-5,
        "big": 1e20,
        "gamma": 0.99,
        "frames": 1_000_000,
        "env": {"name": "Pendulum-v1", "kwargs": {}},
        "layers": [64, 64],
        "nested_list": [[1, 2], {"a": "b"}],
        "flag": True,
        "none": None,
        "text": 'quote " and: colon\nnewline',
        "key with space": 1,
        "10": "ten",
        "yes": "no",
        "a.b": {"on": 1},
        "inf": float("inf"),
        "device": torch.device("cpu"),
    }
    logger.log_hparams(cfg)
    logger.log_hparams({"seed": 3})
    loaded = yaml.safe_load((tmp_path / "exp" / "hparams.yaml").read_text())
    assert loaded == {**cfg, "device": "cpu", "seed": 3}


def test_to_yaml_nan():
    assert to_yaml({"x": float("nan"), "y": float("-inf")}) == "x: .nan\ny: -.inf\n"


def random_video(*shape: int) -> torch.Tensor:
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


def test_pt_videos_load_back_unchanged(tmp_path):
    logger = CSVLogger("exp", log_dir=tmp_path, video_format="pt")
    video = random_video(2, 5, 3, 8, 8)
    logger.log_video("eval/rollout", video, step=100)
    logger.log_video("eval/rollout", video[0])
    assert sorted(os.listdir(tmp_path / "exp" / "videos" / "eval")) == ["rollout_100.pt", "rollout_101.pt"]
    assert torch.equal(torch.load(tmp_path / "exp" / "videos" / "eval" / "rollout_100.pt"), video)
    assert torch.equal(torch.load(tmp_path / "exp" / "videos" / "eval" / "rollout_101.pt"), video[0])


def test_memmap_videos_map_back(tmp_path):
    logger = CSVLogger("exp", log_dir=tmp_path, video_format="memmap")
    video = random_video(4, 8, 8, 3).numpy()
    logger.log_video("clip", video, step=0)
    mapped = np.load(tmp_path / "exp" / "videos" / "clip_0.memmap", mmap_mode="r")
    np.testing.assert_array_equal(mapped, video)


def test_raw_formats_reject_non_tensors(tmp_path):
    with pytest.raises(TypeError, match="video 'clip': expected a torch.Tensor or numpy.ndarray, got list"):
        CSVLogger("exp", log_dir=tmp_path).log_video("clip", [[0]])


def test_mp4_videos_open_with_every_frame(tmp_path):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="the video extra is not installed")
    logger = CSVLogger("exp", log_dir=tmp_path, video_format="mp4", video_fps=15)
    logger.log_video("rollout", random_video(1, 9, 3, 16, 16), step=3)
    logger.log_video("rollout", random_video(9, 16, 16, 3), step=4, fps=5)  # channels last
    path = tmp_path / "exp" / "videos" / "rollout_3.mp4"
    assert imageio_ffmpeg.count_frames_and_secs(str(path))[0] == 9
    meta = next(imageio_ffmpeg.read_frames(str(path)))
    assert meta["fps"] == 15 and meta["size"] == (16, 16)
    assert next(imageio_ffmpeg.read_frames(str(tmp_path / "exp" / "videos" / "rollout_4.mp4")))["fps"] == 5


def test_mp4_reads_back_close_to_the_input(tmp_path):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="the video extra is not installed")
    video = torch.zeros(3, 3, 16, 16, dtype=torch.uint8)
    video[:, 0] = 200  # red
    CSVLogger("exp", log_dir=tmp_path, video_format="mp4").log_video("red", video, step=0)
    reader = imageio_ffmpeg.read_frames(str(tmp_path / "exp" / "videos" / "red_0.mp4"))
    next(reader)
    frame = np.frombuffer(next(reader), np.uint8).reshape(16, 16, 3)
    assert abs(int(frame[..., 0].mean()) - 200) < 10 and frame[..., 1:].mean() < 10


def test_gif_videos_open_with_every_frame_and_batches_tile(tmp_path):
    Image = pytest.importorskip("PIL.Image", reason="the video extra is not installed")
    logger = CSVLogger("exp", log_dir=tmp_path, video_format="gif", video_fps=10)
    logger.log_video("rollout", random_video(4, 6, 3, 8, 10), step=0)  # 4 videos -> 2 x 2 grid
    with Image.open(tmp_path / "exp" / "videos" / "rollout_0.gif") as image:
        assert image.n_frames == 6 and image.size == (20, 16)
        assert image.info["duration"] == 100 and image.info["loop"] == 0


def test_log_video_rejects_unknown_keywords(tmp_path):
    with pytest.raises(TypeError, match=r"unexpected keyword arguments \['caption'\] \(accepted: 'fps'\)"):
        CSVLogger("exp", log_dir=tmp_path).log_video("v", random_video(2, 3, 4, 4), caption="x")


@pytest.mark.parametrize("video_format, module", [("mp4", "imageio_ffmpeg"), ("gif", "PIL.Image")])
def test_missing_video_extra_says_what_to_install(tmp_path, monkeypatch, video_format, module):
    pytest.importorskip(module, reason="the video extra is not installed")
    logger = CSVLogger("exp", log_dir=tmp_path, video_format=video_format)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=r'pip install "cadence\[video\]"'):
        logger.log_video("clip", random_video(2, 3, 4, 4), step=0)
    with pytest.raises(ImportError, match=rf"CSVLogger\(video_format='{video_format}'\) needs"):
        CSVLogger("exp2", log_dir=tmp_path, video_format=video_format)
    assert not (tmp_path / "exp" / "videos").exists()
    CSVLogger("exp3", log_dir=tmp_path, video_format="pt").log_video("clip", random_video(2, 3, 4, 4))

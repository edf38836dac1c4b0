"""Video layouts, tiling and the mp4/GIF encoders."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from cadence.record.loggers._video import encode_gif, tile_batch, video_to_frames, write_gif, write_mp4

imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg", reason="the video extra (imageio-ffmpeg) is not installed")
Image = pytest.importorskip("PIL.Image", reason="the video extra (Pillow) is not installed")


def random_video(*shape: int) -> torch.Tensor:
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(0))


def test_channels_first_and_last_give_the_same_frames():
    video = random_video(5, 3, 6, 8)
    frames = video_to_frames(video)
    assert frames.shape == (5, 6, 8, 3) and frames.dtype == np.uint8
    np.testing.assert_array_equal(frames, video.permute(0, 2, 3, 1).numpy())
    np.testing.assert_array_equal(video_to_frames(video.permute(0, 2, 3, 1).numpy()), frames)


def test_channels_first_wins_when_both_fit():
    assert video_to_frames(torch.zeros(2, 3, 5, 3, dtype=torch.uint8)).shape == (2, 5, 3, 3)


def test_batch_is_tiled_in_a_grid_row_by_row():
    video = random_video(5, 2, 1, 4, 6)  # 5 videos -> 3 columns, 2 rows
    frames = video_to_frames(video)
    assert frames.shape == (2, 8, 18, 1)
    np.testing.assert_array_equal(frames[:, 0:4, 6:12, 0], video[1, :, 0].numpy())
    np.testing.assert_array_equal(frames[:, 4:8, 0:6, 0], video[3, :, 0].numpy())
    assert not frames[:, 4:8, 12:18].any()  # the sixth cell is black
    assert tile_batch(video.permute(0, 1, 3, 4, 2).numpy()[:1]).shape == (2, 4, 6, 1)


def test_dtypes_are_scaled_to_uint8():
    assert video_to_frames(torch.full((1, 1, 2, 2), 0.5)).max() == 128
    assert video_to_frames(torch.ones(1, 1, 2, 2, dtype=torch.bool)).max() == 255
    assert video_to_frames(np.full((1, 1, 2, 2), 300, dtype=np.int64)).max() == 255


@pytest.mark.parametrize("shape", [(3, 4, 4), (1, 2, 3, 4, 4, 4), (2, 5, 6, 7), (0, 3, 4, 4)])
def test_bad_shapes_name_the_layouts(shape):
    with pytest.raises(ValueError, match=r"video 'clip': expected .*got shape"):
        video_to_frames(torch.zeros(shape, dtype=torch.uint8), "clip")


def test_not_a_tensor():
    with pytest.raises(TypeError, match="expected a torch.Tensor or numpy.ndarray, got list"):
        video_to_frames([[1]])


@pytest.mark.parametrize("channels", [1, 3])
def test_mp4_has_every_frame_and_the_size(tmp_path, channels):
    frames = video_to_frames(random_video(7, channels, 16, 24))
    path = tmp_path / "clip.mp4"
    write_mp4(path, frames, fps=10)
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = next(reader)
    assert meta["size"] == (24, 16) and meta["fps"] == 10
    assert sum(1 for _ in reader) == 7


def test_mp4_pads_odd_sizes(tmp_path):
    path = tmp_path / "odd.mp4"
    write_mp4(path, video_to_frames(random_video(3, 3, 7, 9)), fps=30)
    reader = imageio_ffmpeg.read_frames(str(path))
    assert next(reader)["size"] == (10, 8)
    assert sum(1 for _ in reader) == 3


@pytest.mark.parametrize("channels", [1, 3])
def test_gif_has_every_frame_and_the_size(tmp_path, channels):
    frames = video_to_frames(random_video(6, channels, 10, 12))
    path = tmp_path / "clip.gif"
    write_gif(path, frames, fps=20)
    with Image.open(path) as image:
        assert image.n_frames == 6 and image.size == (12, 10)
        assert image.info["duration"] == 50
        image.seek(5)
        if channels == 1:  # grey levels survive the palette exactly
            np.testing.assert_array_equal(np.asarray(image.convert("L")), frames[5, ..., 0])


def test_gif_merges_repeated_frames_but_keeps_the_playing_time():
    frames = np.zeros((4, 4, 4, 3), np.uint8)
    frames[2:] = 200
    import io

    with Image.open(io.BytesIO(encode_gif(frames, fps=10))) as image:
        durations = []
        for index in range(image.n_frames):
            image.seek(index)
            durations.append(image.info["duration"])
    assert durations == [200, 200]


def test_missing_extra_says_what_to_install(monkeypatch, tmp_path):
    frames = video_to_frames(random_video(2, 3, 4, 4))
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)
    with pytest.raises(ImportError, match=r'writing mp4 videos needs .*pip install "cadence\[video\]"'):
        write_mp4(tmp_path / "x.mp4", frames, fps=30)
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with pytest.raises(ImportError, match=r'writing GIF videos needs .*pip install "cadence\[video\]"'):
        write_gif(tmp_path / "x.gif", frames, fps=30)
    assert not list(tmp_path.iterdir())

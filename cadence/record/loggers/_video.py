"""Video tensors to frames, and frames to mp4/GIF files: shared by the loggers.

Layouts accepted (what environments and ``VideoRecorder`` produce):

* ``[T, C, H, W]`` and ``[B, T, C, H, W]`` with ``C`` in 1 or 3 (channels first);
* ``[T, H, W, C]`` and ``[B, T, H, W, C]`` with ``C`` in 1 or 3 (channels last), used when
  the channels-first reading does not fit. A shape that fits both (``[T, 3, H, 3]``) is
  read channels first.

Dtypes: ``uint8`` as is; floating point is read as ``[0, 1]`` and scaled to ``[0, 255]``;
booleans give 0/255; other integers are clipped to ``[0, 255]``.

A batch of ``B`` videos becomes one video whose frames tile the ``B`` videos in a grid of
``ceil(sqrt(B))`` columns (row-major, unused cells black), the way TensorBoard shows them.

Encoders: mp4 (H.264, ``yuv420p``) through ``imageio-ffmpeg``, whose wheel carries an
``ffmpeg`` binary, and GIF through Pillow; both come with ``pip install "cadence[video]"``.
"""

from __future__ import annotations

import io
import math
import os
from typing import Any

import numpy as np
import torch

from cadence.record.loggers.common import import_optional

__all__ = ["video_to_frames", "tile_batch", "write_mp4", "write_gif", "encode_gif"]

_LAYOUTS = "[T, C, H, W] or [B, T, C, H, W] (C in 1 or 3), or channels last [T, H, W, C] / [B, T, H, W, C]"


def video_to_frames(video: Any, name: str = "video") -> np.ndarray:
    """Turns a video tensor or array into ``uint8`` frames ``[T, H, W, C]`` (``C`` in 1, 3).

    Args:
        video: a tensor or array in one of the layouts of this module's docstring.
        name: the video's name (for error messages).

    Returns:
        A C-contiguous ``uint8`` numpy array ``[T, H, W, C]``; a batch is tiled in a grid.

    Raises:
        TypeError: if ``video`` is not a tensor or array.
        ValueError: if its shape is none of the accepted layouts or it has no frames.

    Examples:
        >>> import torch
        >>> video_to_frames(torch.zeros(5, 3, 8, 6, dtype=torch.uint8)).shape
        (5, 8, 6, 3)
        >>> video_to_frames(torch.ones(2, 4, 1, 8, 8)).shape  # two videos side by side
        (4, 8, 16, 1)
        >>> int(video_to_frames(torch.ones(1, 4, 4, 3)).max())  # float in [0, 1]
        255
    """
    if isinstance(video, torch.Tensor):
        array = video.detach().cpu()
        if array.dtype == torch.bfloat16:
            array = array.float()
        array = array.numpy()
    elif isinstance(video, np.ndarray):
        array = video
    else:
        raise TypeError(f"video {name!r}: expected a torch.Tensor or numpy.ndarray, got {type(video).__name__}")
    if array.ndim == 4:
        array = array[None]
    if array.ndim != 5:
        raise ValueError(f"video {name!r}: expected {_LAYOUTS}; got shape {tuple(video.shape)}")
    if array.shape[2] in (1, 3):
        array = array.transpose(0, 1, 3, 4, 2)
    elif array.shape[4] not in (1, 3):
        raise ValueError(f"video {name!r}: expected {_LAYOUTS}; got shape {tuple(video.shape)}")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"video {name!r}: expected at least one video of one frame, got shape {tuple(video.shape)}")
    frames = tile_batch(_to_uint8(array))
    return np.ascontiguousarray(frames)


def _to_uint8(array: np.ndarray) -> np.ndarray:
    if array.dtype == np.uint8:
        return array
    if array.dtype == np.bool_:
        return array.astype(np.uint8) * 255
    if np.issubdtype(array.dtype, np.floating):
        return (np.clip(np.nan_to_num(array), 0.0, 1.0) * 255.0).round().astype(np.uint8)
    if np.issubdtype(array.dtype, np.integer):
        return np.clip(array, 0, 255).astype(np.uint8)
    raise TypeError(f"video: expected a numeric or boolean dtype, got {array.dtype}")


def tile_batch(videos: np.ndarray) -> np.ndarray:
    """Tiles ``B`` videos ``[B, T, H, W, C]`` into one video ``[T, rows * H, cols * W, C]``.

    ``cols = ceil(sqrt(B))`` and ``rows = ceil(B / cols)``; videos fill the grid row by
    row and unused cells stay black. One video (``B == 1``) is returned unchanged.

    Args:
        videos: the batch of videos.

    Returns:
        The tiled video.

    Examples:
        >>> import numpy as np
        >>> tile_batch(np.zeros((3, 2, 4, 5, 3), np.uint8)).shape  # 2 x 2 grid
        (2, 8, 10, 3)
    """
    batch, time, height, width, channels = videos.shape
    if batch == 1:
        return videos[0]
    cols = math.ceil(math.sqrt(batch))
    rows = math.ceil(batch / cols)
    grid = np.zeros((time, rows * height, cols * width, channels), dtype=videos.dtype)
    for index in range(batch):
        row, col = divmod(index, cols)
        grid[:, row * height : (row + 1) * height, col * width : (col + 1) * width] = videos[index]
    return grid


def write_mp4(path: str | os.PathLike[str], frames: np.ndarray, fps: float) -> None:
    """Writes ``uint8`` frames ``[T, H, W, C]`` to an H.264 mp4 file.

    H.264 in ``yuv420p`` needs even sizes: an odd height or width gets one black row or
    column at the bottom or right.

    Args:
        path: the file to write.
        frames: from :func:`video_to_frames`.
        fps: frames per second.

    Raises:
        ImportError: if ``imageio-ffmpeg`` is missing (``pip install "cadence[video]"``).

    Examples:
        >>> import os, tempfile, numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "clip.mp4")
        >>> write_mp4(path, np.zeros((4, 16, 16, 3), np.uint8), fps=10)
        >>> import imageio_ffmpeg
        >>> imageio_ffmpeg.count_frames_and_secs(path)[0]
        4
    """
    ffmpeg = import_optional(
        "imageio_ffmpeg", feature="writing mp4 videos", extra="video", package="imageio-ffmpeg"
    )
    _, height, width, channels = frames.shape
    pad_h, pad_w = height % 2, width % 2
    if pad_h or pad_w:
        frames = np.pad(frames, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)))
    writer = ffmpeg.write_frames(
        os.fspath(path),
        (width + pad_w, height + pad_h),
        pix_fmt_in="gray" if channels == 1 else "rgb24",
        fps=fps,
        codec="libx264",
        macro_block_size=1,
        ffmpeg_log_level="error",
    )
    writer.send(None)
    try:
        for frame in frames:
            writer.send(np.ascontiguousarray(frame).tobytes())
    finally:
        writer.close()


def encode_gif(frames: np.ndarray, fps: float) -> bytes:
    """Encodes ``uint8`` frames ``[T, H, W, C]`` as an animated, looping GIF.

    Each frame lasts ``1000 / fps`` milliseconds (GIF stores hundredths of a second).
    Pillow's encoder merges identical consecutive frames into one frame that lasts as long
    as they did together, so the file may hold fewer frames than given but plays for the
    same time.

    Args:
        frames: from :func:`video_to_frames`.
        fps: frames per second.

    Returns:
        The GIF file's bytes.

    Raises:
        ImportError: if Pillow is missing (``pip install "cadence[video]"``).

    Examples:
        >>> import numpy as np
        >>> frames = np.stack([np.full((4, 4, 3), 40 * t, np.uint8) for t in range(3)])
        >>> encode_gif(frames, fps=10)[:6]
        b'GIF89a'
    """
    image_module = import_optional("PIL.Image", feature="writing GIF videos", extra="video", package="pillow")
    mode = "L" if frames.shape[-1] == 1 else "RGB"
    images = [image_module.fromarray(frame[..., 0] if mode == "L" else frame) for frame in frames]
    buffer = io.BytesIO()
    images[0].save(
        buffer,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=max(1, round(1000.0 / fps)),
        loop=0,
    )
    return buffer.getvalue()


def write_gif(path: str | os.PathLike[str], frames: np.ndarray, fps: float) -> None:
    """Writes ``uint8`` frames ``[T, H, W, C]`` to an animated GIF (see :func:`encode_gif`).

    Args:
        path: the file to write.
        frames: from :func:`video_to_frames`.
        fps: frames per second.

    Raises:
        ImportError: if Pillow is missing (``pip install "cadence[video]"``).

    Examples:
        >>> import os, tempfile, numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "clip.gif")
        >>> frames = np.stack([np.full((4, 4, 3), 40 * t, np.uint8) for t in range(3)])
        >>> write_gif(path, frames, fps=10)
        >>> from PIL import Image
        >>> Image.open(path).n_frames
        3
    """
    data = encode_gif(frames, fps)
    with open(path, "wb") as file:
        file.write(data)

"""Recorder transforms: they register the data that passes through an env, for logging.

* :class:`VideoRecorder` caches the frames of its ``in_keys`` (``"pixels"``) and, on
  :meth:`VideoRecorder.dump`, writes them as one video with a logger's ``log_video``.
* :class:`TensorDictRecorder` caches the tensordicts an env emits and, on
  :meth:`TensorDictRecorder.dump`, saves them to disk as a memory-mapped tensordict.
* :class:`PixelRenderTransform` calls ``render()`` on the env it is appended to and writes
  the frame in the data (under ``"pixels"``), for envs that do not emit pixels themselves;
  on a ``SerialEnv``/``ParallelEnv`` it renders every worker and stacks the frames.

Examples:
    >>> import os, tempfile
    >>> from cadence.envs import GymEnv
    >>> from cadence.record import CSVLogger, PixelRenderTransform, VideoRecorder
    >>> logger = CSVLogger("exp", log_dir=tempfile.mkdtemp(), video_format="pt")
    >>> env = GymEnv("CartPole-v1", render_mode="rgb_array").append_transform(PixelRenderTransform())
    >>> env = env.append_transform(VideoRecorder(logger, tag="rendered", skip=1))
    >>> data = env.rollout(4)
    >>> env.transform[-1].dump()
    >>> sorted(os.listdir(os.path.join(logger.log_dir, "exp", "videos")))
    ['rendered_0.pt']
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from cadence.data import Bounded, Composite, NonTensor, Unbounded
from cadence.envs.common import EnvBase
from cadence.envs.transforms.base import Transform, TransformedEnv, key_list
from cadence.record.loggers.common import Logger

__all__ = ["PixelRenderTransform", "TensorDictRecorder", "VideoRecorder"]

NestedKey = str | tuple[str, ...]


def _owning_env(transform: Transform) -> TransformedEnv | None:
    """The ``TransformedEnv`` at the top of ``transform``'s containers, if any."""
    container = transform.container
    while container is not None and not isinstance(container, TransformedEnv):
        container = container.container
    return container


def _positive_int(name: str, value: Any, owner: str, allow_none: bool = True) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int{' or None' if allow_none else ''}, got {value!r}.")
    return value


def _time_dim(tensordict: TensorDictBase) -> int | None:
    """The index of a trailing batch dim named ``"time"`` (a rollout's), if there is one."""
    if not tensordict.batch_dims:
        return None
    try:
        names = tensordict.names
    except Exception:  # some tensordict kinds have no names
        return None
    return tensordict.batch_dims - 1 if names and names[-1] == "time" else None


def _key_name(key: NestedKey) -> str:
    return key if isinstance(key, str) else "_".join(key)


class VideoRecorder(Transform):
    """Caches the frames of ``in_keys`` as they pass and logs them as a video on :meth:`dump`.

    Frames are recorded from every reset and step of the env the recorder is appended
    to, and from every direct call (``recorder(tensordict)``). A direct call on a rollout
    (whose last batch dim is named ``"time"``) records each of its time steps as a frame.
    The data pass through unchanged (copied to ``out_keys`` if those differ).

    Frames may be ``[..., C, H, W]`` (torch layout) or ``[..., H, W, C]`` (numpy layout, as
    ``render()`` gives), with ``C`` in 1 or 3: channels last is chosen when the last dim
    is 1 or 3 and the third from last is not; a shape that fits both is read channels
    first. Leading dims are the env's batch dims. Frames are cached as ``uint8``
    ``[..., C, H, W]``: floating-point frames are read as ``[0, 1]`` (as ``ToTensorImage``
    makes them) and scaled to ``[0, 255]``, other integers are clipped to ``[0, 255]``.

    The cache grows until :meth:`dump` is called: call it regularly to bound memory.

    Args:
        logger: a logger that logs videos (``CSVLogger``, ``TensorboardLogger``, ...).
        tag: the video's name in the logger.
        in_keys: the entries holding frames; ``["pixels"]`` by default. Each key gets its
            own video, named ``tag`` for one key and ``f"{tag}_{key}"`` for several.
        skip: record one call in ``skip`` (the first, then every ``skip``-th). By default
            (``None``), as documented for the reference: 2 when the recorder is part of an
            env, 1 when it is used on its own.
        center_crop: crop each frame to its central ``center_crop x center_crop`` square.
        make_grid: tile the frames of a batch of envs into one grid image per time step
            (``ceil(sqrt(B))`` columns, row by row, unused cells black). With ``False`` a
            batch is logged as a batch of videos ``[B, T, C, H, W]`` (several leading batch
            dims are flattened), which the logger shows its own way.
        out_keys: where the (unchanged) frames are written; ``in_keys`` by default.
        fps: frames per second of the video; the logger's default if ``None``.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> from cadence.record import CSVLogger
        >>> logger = CSVLogger("exp", log_dir=tempfile.mkdtemp(), video_format="pt")
        >>> recorder = VideoRecorder(logger, tag="clip")
        >>> for t in range(4):  # numpy-style [H, W, C] frames, recorded one call in 1 (no env)
        ...     _ = recorder(TensorDict({"pixels": torch.full((8, 6, 3), t, dtype=torch.uint8)}, []))
        >>> recorder.dump()
        >>> video = torch.load(logger.experiment.video_path("clip", 0))
        >>> video.shape, video[:, 0, 0, 0].tolist()
        (torch.Size([4, 3, 8, 6]), [0, 1, 2, 3])
    """

    def __init__(
        self,
        logger: Logger,
        tag: str,
        in_keys: Sequence[NestedKey] | None = None,
        skip: int | None = None,
        center_crop: int | None = None,
        make_grid: bool = True,
        out_keys: Sequence[NestedKey] | None = None,
        fps: int | float | None = None,
    ) -> None:
        in_keys = ["pixels"] if in_keys is None else key_list(in_keys)
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        name = type(self).__name__
        if not hasattr(logger, "log_video"):
            raise TypeError(f"{name}: logger must have a log_video method, got {type(logger).__name__}.")
        if not isinstance(tag, str) or not tag:
            raise ValueError(f"{name}: tag must be a non-empty string, got {tag!r}.")
        if fps is not None and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0):
            raise ValueError(f"{name}: fps must be a positive number or None, got {fps!r}.")
        self.logger = logger
        self.tag = tag
        self._skip = _positive_int("skip", skip, name)
        self.center_crop = _positive_int("center_crop", center_crop, name)
        self.make_grid = bool(make_grid)
        self.fps = fps
        self.count = 0  #: the calls seen so far (recorded or skipped)
        self._frames: dict[NestedKey, list[torch.Tensor]] = {key: [] for key in self.in_keys}

    @property
    def skip(self) -> int:
        """Record one call in ``skip``: the value given, else 2 inside an env and 1 alone."""
        if self._skip is not None:
            return self._skip
        return 2 if _owning_env(self) is not None else 1

    @property
    def frames(self) -> dict[NestedKey, list[torch.Tensor]]:
        """The cached ``uint8`` frames ``[*batch, C, H, W]`` of each in_key, oldest first."""
        return self._frames

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        present = [(k, o, tensordict.get(k)) for k, o in zip(self.in_keys, self.out_keys) if k in tensordict.keys(True)]
        if not present:
            return tensordict
        time_dim = _time_dim(tensordict)
        steps = 1 if time_dim is None else tensordict.batch_size[time_dim]
        skip = self.skip
        for t in range(steps):
            if self.count % skip == 0:
                for key, _, value in present:
                    frame = value if time_dim is None else value.select(time_dim, t)
                    self._frames[key].append(self._to_frame(frame, key))
            self.count += 1
        for key, out_key, value in present:
            if out_key != key:
                tensordict.set(out_key, value)
        return tensordict

    def _to_frame(self, value: Any, key: NestedKey) -> torch.Tensor:
        """One frame (or a batch of them) as a ``uint8`` CPU tensor ``[*batch, C, H, W]``."""
        frame = torch.as_tensor(np.asarray(value)) if isinstance(value, np.ndarray) else value
        if not isinstance(frame, torch.Tensor):
            raise TypeError(
                f"{type(self).__name__}: {key!r} must hold a tensor or numpy array of frames, "
                f"got {type(value).__name__}."
            )
        shape = tuple(frame.shape)
        if frame.ndim >= 3 and frame.shape[-1] in (1, 3) and frame.shape[-3] not in (1, 3):
            frame = frame.movedim(-1, -3)
        elif frame.ndim < 3 or frame.shape[-3] not in (1, 3):
            raise ValueError(
                f"{type(self).__name__}: {key!r} must hold frames [..., C, H, W] or [..., H, W, C] "
                f"with C in 1 or 3, got shape {shape}."
            )
        if self.center_crop is not None:
            height, width = frame.shape[-2:]
            size = self.center_crop
            if size > height or size > width:
                raise ValueError(
                    f"{type(self).__name__}: center_crop={size} is larger than the frames of {key!r} "
                    f"({height} x {width})."
                )
            top, left = (height - size) // 2, (width - size) // 2
            frame = frame[..., top : top + size, left : left + size]
        frame = frame.detach().to("cpu")
        if frame.dtype == torch.uint8:
            return frame.clone()
        if frame.dtype == torch.bool:
            return frame.to(torch.uint8) * 255
        if frame.is_floating_point():
            return (frame.float().nan_to_num().clamp(0.0, 1.0) * 255.0).round().to(torch.uint8)
        return frame.clamp(0, 255).to(torch.uint8)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        """Copies the spec of each in_key to its out_key where they differ."""
        for key, out_key in zip(self.in_keys, self.out_keys):
            if out_key != key and key in observation_spec.keys(True, True):
                observation_spec[out_key] = observation_spec[key].clone()
        return observation_spec

    def dump(self, suffix: str | None = None) -> None:
        """Logs the cached frames as a video (one per in_key) and clears the cache.

        The video is ``[T, C, H, W]`` for unbatched frames or with ``make_grid``, and
        ``[B, T, C, H, W]`` for a batch without it; it is logged with
        ``logger.log_video(name, video, step=None)``, so that the logger numbers the
        successive videos of a name (``pixels_record_0.mp4``, ``pixels_record_1.mp4``...
        for ``CSVLogger``). Nothing is logged for a key without frames.

        Args:
            suffix: appended to the name as ``f"{name}_{suffix}"``.
        """
        for key, frames in self._frames.items():
            if not frames:
                continue
            name = self.tag if len(self.in_keys) == 1 else f"{self.tag}_{_key_name(key)}"
            if suffix is not None:
                name = f"{name}_{suffix}"
            shapes = {tuple(frame.shape) for frame in frames}
            if len(shapes) > 1:
                raise ValueError(
                    f"{type(self).__name__}: the frames of {key!r} changed shape during the recording "
                    f"({sorted(shapes)}); they cannot make one video."
                )
            video = torch.stack(frames, 0)  # [T, *batch, C, H, W]
            if video.ndim > 4:
                time, channels, height, width = video.shape[0], *video.shape[-3:]
                video = video.reshape(time, -1, channels, height, width).transpose(0, 1)  # [B, T, C, H, W]
                if self.make_grid:
                    video = _tile(video)
            kwargs = {} if self.fps is None else {"fps": self.fps}
            self.logger.log_video(name, video, step=None, **kwargs)
            frames.clear()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(tag={self.tag!r}, in_keys={self.in_keys}, skip={self._skip})"


def _tile(videos: torch.Tensor) -> torch.Tensor:
    """``[B, T, C, H, W]`` → ``[T, C, rows * H, cols * W]`` with ``cols = ceil(sqrt(B))``."""
    batch, time, channels, height, width = videos.shape
    if batch == 1:
        return videos[0]
    cols = math.ceil(math.sqrt(batch))
    rows = math.ceil(batch / cols)
    grid = videos.new_zeros(time, channels, rows * height, cols * width)
    for index in range(batch):
        row, col = divmod(index, cols)
        grid[..., row * height : (row + 1) * height, col * width : (col + 1) * width] = videos[index]
    return grid


class TensorDictRecorder(Transform):
    """Caches the tensordicts an env emits and saves them to disk on :meth:`dump`.

    Each step's output (the ``"next"`` data: observations, reward, done flags) is a
    candidate, and so is each reset's output unless ``skip_reset``; one candidate in
    ``skip`` is kept (the first, then every ``skip``-th), as a copy of its ``in_keys``
    (all entries if ``None``). A direct call (``recorder(tensordict)``) records its data.

    :meth:`dump` stacks the cache on a new leading dim and writes it as a memory-mapped
    tensordict (``TensorDict.memmap``): a directory, read back with
    ``TensorDict.load_memmap(path)``, no pickling involved.

    Args:
        out_file_base: the path the directories are named after:
            ``f"{out_file_base}_{suffix}"``, or ``f"{out_file_base}_{n}"`` for the ``n``-th
            dump (from 0) when no suffix is given.
        skip_reset: do not record the outputs of resets.
        skip: keep one candidate in ``skip``.
        in_keys: the entries to keep; all of them if ``None``.

    Examples:
        >>> import os, tempfile, torch
        >>> from tensordict import TensorDict
        >>> recorder = TensorDictRecorder(os.path.join(tempfile.mkdtemp(), "steps"), skip=2)
        >>> for t in range(5):
        ...     _ = recorder(TensorDict({"obs": torch.full((2,), float(t))}, []))
        >>> path = recorder.dump()
        >>> os.path.basename(path), TensorDict.load_memmap(path)["obs"][:, 0].tolist()  # calls 0, 2, 4
        ('steps_0', [0.0, 2.0, 4.0])
    """

    def __init__(
        self,
        out_file_base: str | os.PathLike[str],
        skip_reset: bool = True,
        skip: int = 4,
        in_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        self.in_keys = key_list(in_keys)  # read, never written: no out_keys
        self.out_file_base = os.fspath(out_file_base)
        self.skip_reset = bool(skip_reset)
        self.skip = _positive_int("skip", skip, type(self).__name__, allow_none=False)
        self.count = 0  #: the candidates seen so far (kept or skipped)
        self.dumps = 0  #: the dumps done so far
        self.cache: list[TensorDictBase] = []

    def _record(self, tensordict: TensorDictBase) -> None:
        if self.count % self.skip == 0:
            if self.in_keys:
                missing = [key for key in self.in_keys if key not in tensordict.keys(True)]
                if missing:
                    raise KeyError(
                        f"{type(self).__name__}: the data hold no {missing}; they hold "
                        f"{sorted(map(str, tensordict.keys(True, True)))}."
                    )
                tensordict = tensordict.select(*self.in_keys)
            self.cache.append(tensordict.clone())
        self.count += 1

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._record(tensordict)
        return tensordict

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        if not self.skip_reset:
            self._record(tensordict_reset)
        return tensordict_reset

    def dump(self, suffix: str | None = None) -> str | None:
        """Saves the cache (stacked on a new first dim) as a memmap directory and clears it.

        Args:
            suffix: the directory is ``f"{out_file_base}_{suffix}"``; by default the dump's
                number.

        Returns:
            The directory written, or ``None`` if the cache was empty.

        Raises:
            FileExistsError: if the directory already exists (it is never overwritten).
        """
        if not self.cache:
            return None
        path = f"{self.out_file_base}_{self.dumps if suffix is None else suffix}"
        if os.path.exists(path):
            raise FileExistsError(
                f"{type(self).__name__}: {path!r} already exists; pass another suffix to dump()."
            )
        try:
            data = torch.stack(self.cache, 0)
        except RuntimeError:  # entries of varying shapes: keep them apart
            data = LazyStackedTensorDict.lazy_stack(self.cache, 0)
        data.memmap(path)
        self.cache.clear()
        self.dumps += 1
        return path

    def __repr__(self) -> str:
        return f"{type(self).__name__}(out_file_base={self.out_file_base!r}, skip={self.skip}, in_keys={self.in_keys})"


def _frames_to_tensor(frames: Any) -> torch.Tensor:
    """A rendered frame, or a (nested) list of them from batched envs, as one tensor."""
    if isinstance(frames, torch.Tensor):
        return frames
    if isinstance(frames, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(frames))
    if isinstance(frames, (list, tuple)) and frames:
        return torch.stack([_frames_to_tensor(frame) for frame in frames], 0)
    raise TypeError(f"expected a frame (array or tensor) or a list of them, got {type(frames).__name__}: {frames!r}")


class PixelRenderTransform(Transform):
    """Renders the env it is appended to and writes the frame in its data.

    On every reset and step, ``render()`` (or ``render_method``) is called on the base env
    of the ``TransformedEnv`` holding this transform, and the frame is written under
    ``out_keys[0]``. A ``GymEnv`` must be built with ``render_mode="rgb_array"``; a
    ``SerialEnv``/``ParallelEnv`` passes the call to every worker and returns the list of
    their frames, which are stacked (``[B, H, W, C]``). The spec of the frame is read from
    one render when the transform joins the env (the base env is reset first if it cannot
    render yet): ``Bounded(0, 255)`` for ``uint8`` frames, ``Unbounded`` otherwise, of
    shape ``env.batch_size + frame.shape``.

    Args:
        out_keys: where the frame goes; ``["pixels"]`` by default (one key).
        preproc: applied to the frame tensor (after batched frames are stacked) before it
            is written; with ``as_non_tensor``, to the raw render output instead.
        as_non_tensor: write the render output as non-tensor data (``NonTensor`` spec),
            for frames that are not arrays or change shape.
        render_method: the name of the env's method to call.
        pass_tensordict: call ``render_method(tensordict)`` with the data being written
            (the same data for every worker of a batched env) rather than with no argument;
            the spec probe passes an empty tensordict of the env's batch size.

    Examples:
        >>> from cadence.envs import GymEnv, check_env_specs
        >>> env = GymEnv("CartPole-v1", render_mode="rgb_array").append_transform(PixelRenderTransform())
        >>> env.observation_spec["pixels"].shape, env.observation_spec["pixels"].dtype
        (torch.Size([400, 600, 3]), torch.uint8)
        >>> env.rollout(3)["next", "pixels"].shape
        torch.Size([3, 400, 600, 3])
        >>> check_env_specs(env)
    """

    def __init__(
        self,
        out_keys: Sequence[NestedKey] | None = None,
        preproc: Callable[[Any], Any] | None = None,
        as_non_tensor: bool = False,
        render_method: str = "render",
        pass_tensordict: bool = False,
    ) -> None:
        super().__init__()
        out_keys = ["pixels"] if out_keys is None else key_list(out_keys)
        if len(out_keys) != 1:
            raise ValueError(f"{type(self).__name__}: expected one out_key (the frame's), got {out_keys}.")
        if preproc is not None and not callable(preproc):
            raise TypeError(f"{type(self).__name__}: preproc must be callable, got {type(preproc).__name__}.")
        self.out_keys = out_keys
        self.preproc = preproc
        self.as_non_tensor = bool(as_non_tensor)
        self.render_method = render_method
        self.pass_tensordict = bool(pass_tensordict)

    def _render_env(self) -> EnvBase:
        env = _owning_env(self)
        if env is None:
            raise RuntimeError(
                f"{type(self).__name__} renders the env it belongs to, but it belongs to none: append it "
                f"to an env (env.append_transform(...)) first."
            )
        return env.base_env

    def _render(self, tensordict: TensorDictBase | None) -> Any:
        env = self._render_env()
        method = getattr(env, self.render_method, None)
        if not callable(method):
            raise AttributeError(
                f"{type(self).__name__}: {type(env).__name__} has no method {self.render_method!r} to render with."
            )
        raw = method(tensordict) if self.pass_tensordict else method()
        if self.as_non_tensor:
            return self.preproc(raw) if self.preproc is not None else raw
        try:
            frame = _frames_to_tensor(raw)
        except (TypeError, RuntimeError) as err:
            raise TypeError(
                f"{type(self).__name__}: {type(env).__name__}.{self.render_method}() must return a frame "
                f"(array or tensor; a list of them for a batched env): {err}. Was the env built with "
                f"render_mode='rgb_array'?"
            ) from err
        if self.preproc is not None:
            frame = self.preproc(frame)
            if not isinstance(frame, torch.Tensor):
                raise TypeError(
                    f"{type(self).__name__}: preproc must return a tensor, got {type(frame).__name__} "
                    f"(pass as_non_tensor=True to write other data)."
                )
        if tuple(frame.shape[: env.batch_dims]) != tuple(env.batch_size):
            raise ValueError(
                f"{type(self).__name__}: the frame written at {self.out_keys[0]!r} must lead with the env's "
                f"batch size {tuple(env.batch_size)}, got shape {tuple(frame.shape)}."
            )
        return frame if env.device is None else frame.to(env.device)

    def _write(self, tensordict: TensorDictBase) -> TensorDictBase:
        value = self._render(tensordict)
        if self.as_non_tensor:
            tensordict.set_non_tensor(self.out_keys[0], value)
        else:
            tensordict.set(self.out_keys[0], value)
        return tensordict

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._write(tensordict)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        """Adds the spec of the frame, read from one render."""
        env = self._render_env()
        probe = TensorDict({}, batch_size=env.batch_size, device=env.device)
        try:
            value = self._render(probe)
        except Exception:  # e.g. gymnasium renders only after a first reset
            env.reset()
            value = self._render(probe)
        shape = observation_spec.shape
        if self.as_non_tensor:
            spec: Any = NonTensor(shape=shape, device=observation_spec.device, example_data=value)
        elif value.dtype == torch.uint8:
            spec = Bounded(0, 255, shape=value.shape, dtype=torch.uint8, device=observation_spec.device)
        else:
            spec = Unbounded(shape=value.shape, dtype=value.dtype, device=observation_spec.device)
        observation_spec[self.out_keys[0]] = spec
        return observation_spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}(out_keys={self.out_keys}, render_method={self.render_method!r})"

"""Recorder transforms: VideoRecorder, TensorDictRecorder, PixelRenderTransform."""

from __future__ import annotations

import math

import imageio_ffmpeg
import numpy as np
import pytest
import torch
from PIL import Image
from tensordict import TensorDict, TensorDictBase

from cadence.envs import EnvCreator, GymEnv, ParallelEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import TransformedEnv
from cadence.record.loggers import CSVLogger
from cadence.record.recorder import PixelRenderTransform, TensorDictRecorder, VideoRecorder
from tests.fakes import CountingEnv


def make_env():
    env = GymEnv("CartPole-v1", render_mode="rgb_array")
    # Uncomment this line to execute per-env
    # env = env.append_transform(PixelRenderTransform())
    return env


def mp4_frames_and_size(path) -> tuple[int, tuple[int, int]]:
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = reader.__next__()
    count = sum(1 for _ in reader)
    return count, tuple(meta["size"])  # (width, height)


class RenderingCountingEnv(CountingEnv):
    """A CountingEnv whose ``render()`` gives a 4 x 5 RGB frame filled with the count."""

    def render(self, tensordict: TensorDictBase | None = None) -> np.ndarray:
        value = int(self.count.flatten()[0]) + (0 if tensordict is None else 100)
        return np.full((4, 5, 3), value, dtype=np.uint8)


class ListLogger:
    """Keeps what ``log_video`` receives."""

    def __init__(self) -> None:
        self.videos: list[tuple[str, torch.Tensor, dict]] = []

    def log_video(self, name, video, step=None, **kwargs) -> None:
        self.videos.append((name, video, {"step": step, **kwargs}))


# ---------------------------------------------------------------- the seed's examples
def test_seed_video_recorder_example(tmp_path):
    # The seed records GymEnv("ALE/Pong-v5"), which emits "pixels"; ALE is not installed, so
    # CartPole-v1 built with render_mode="rgb_array" plus PixelRenderTransform stands in.
    logger = CSVLogger("dummy-exp", video_format="mp4", log_dir=tmp_path)
    env = GymEnv("CartPole-v1", render_mode="rgb_array").append_transform(PixelRenderTransform())
    env = env.append_transform(VideoRecorder(logger, tag="rendered", in_keys=["pixels"]))
    data = env.rollout(10)
    # Cadence keeps an env's transforms in a Compose: env.transform.dump() of the seed
    # needs Compose to forward attributes (see test_compose_forwards_dump below).
    env.transform.dump()  # Save the video and clear cache
    calls = 1 + data.shape[-1]  # the reset and each step; skip is 2 inside an env
    count, size = mp4_frames_and_size(tmp_path / "dummy-exp" / "videos" / "rendered_0.mp4")
    assert count == math.ceil(calls / 2)
    assert size == (600, 400)
    assert env.transform[-1].frames["pixels"] == []


def test_seed_pixel_render_example(tmp_path):
    logger = CSVLogger("dummy", video_format="mp4", log_dir=tmp_path)

    # The seed uses 16 workers; 2 are enough (and faster) on the 2-core test machine.
    env = ParallelEnv(2, EnvCreator(make_env))
    env.start()
    # Comment this line to execute per-env
    env = env.append_transform(PixelRenderTransform())

    env = env.append_transform(VideoRecorder(logger=logger, tag="pixels_record"))
    env.rollout(3)

    check_env_specs(env)

    r = env.rollout(30)
    recorder = env.transform[-1]
    # calls: rollout(3) = 4, check_env_specs = two 3-step rollouts = 8, then 1 + T
    assert recorder.count == 13 + r.shape[-1]
    frames = recorder.frames["pixels"]
    n_frames = len(frames)
    assert n_frames == math.ceil(recorder.count / 2)
    # recorded calls are the even ones: the rollout's reset is call 12, its step t is call 13 + t
    recorded_steps = [t for t in range(r.shape[-1]) if (13 + t) % 2 == 0]
    expected = r["next", "pixels"][:, recorded_steps].permute(1, 0, 4, 2, 3)  # [T, B, C, H, W]
    assert torch.equal(torch.stack(frames[-len(recorded_steps):]), expected)
    env.transform.dump()
    env.close()
    count, size = mp4_frames_and_size(tmp_path / "dummy" / "videos" / "pixels_record_0.mp4")
    assert count == n_frames
    assert size == (1200, 400)  # the two workers side by side


def test_compose_forwards_dump(tmp_path):
    logger = ListLogger()
    env = TransformedEnv(CountingEnv(), VideoRecorder(logger, tag="x", in_keys=["count"]))
    env.transform.dump()  # the seed's call: Compose hands it to the recorder
    with pytest.raises(AttributeError):
        env.transform.no_such_method()


# ---------------------------------------------------------------- VideoRecorder
def test_numpy_and_torch_layouts_give_the_same_frames():
    hwc = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    recorder = VideoRecorder(ListLogger(), tag="x")
    recorder(TensorDict({"pixels": hwc}, []))
    recorder(TensorDict({"pixels": torch.from_numpy(hwc).permute(2, 0, 1)}, []))
    recorder(TensorDict({"pixels": torch.from_numpy(np.stack([hwc, hwc]))}, [2]))  # batched [B, H, W, C]
    first, second, batched = recorder.frames["pixels"]
    assert first.shape == (3, 4, 5) and torch.equal(first, second)
    assert batched.shape == (2, 3, 4, 5) and torch.equal(batched[1], first)
    ambiguous = VideoRecorder(ListLogger(), tag="x")  # [3, H, 3] fits both: read channels first
    ambiguous(TensorDict({"pixels": torch.zeros(3, 4, 3, dtype=torch.uint8)}, []))
    assert ambiguous.frames["pixels"][0].shape == (3, 4, 3)


def test_skip_default_and_values():
    recorder = VideoRecorder(ListLogger(), tag="x", skip=3)
    for t in range(7):
        recorder(TensorDict({"pixels": torch.full((1, 2, 2), t, dtype=torch.uint8)}, []))
    assert [int(f[0, 0, 0]) for f in recorder.frames["pixels"]] == [0, 3, 6]
    assert VideoRecorder(ListLogger(), tag="x").skip == 1
    env = TransformedEnv(CountingEnv(), VideoRecorder(ListLogger(), tag="x", in_keys=["count"]))
    assert env.transform[0].skip == 2
    with pytest.raises(ValueError, match="skip"):
        VideoRecorder(ListLogger(), tag="x", skip=0)


def test_center_crop_float_frames_and_errors():
    recorder = VideoRecorder(ListLogger(), tag="x", center_crop=2)
    frame = torch.zeros(1, 4, 6)
    frame[0, 1:3, 2:4] = 1.0
    recorder(TensorDict({"pixels": frame}, []))
    (cropped,) = recorder.frames["pixels"]
    assert cropped.dtype == torch.uint8 and cropped.tolist() == [[[255, 255], [255, 255]]]
    with pytest.raises(ValueError, match="center_crop=2 is larger"):
        VideoRecorder(ListLogger(), tag="x", center_crop=2)(TensorDict({"pixels": torch.zeros(3, 1, 4)}, []))
    with pytest.raises(ValueError, match=r"VideoRecorder: 'pixels' must hold frames .* got shape \(5, 4\)"):
        VideoRecorder(ListLogger(), tag="x")(TensorDict({"pixels": torch.zeros(5, 4)}, []))


def test_dump_grid_batch_suffix_fps_and_clearing():
    logger = ListLogger()
    recorder = VideoRecorder(logger, tag="x", fps=7)
    for t in range(2):
        recorder(TensorDict({"pixels": torch.full((3, 1, 2, 2), t, dtype=torch.uint8)}, [3]))
    recorder.dump(suffix="eval")
    name, video, kwargs = logger.videos[-1]
    assert name == "x_eval" and kwargs == {"step": None, "fps": 7}
    assert video.shape == (2, 1, 4, 4)  # 3 envs in a 2 x 2 grid, the last cell black
    assert video[1, 0, :2, :].tolist() == [[1, 1, 1, 1]] * 2 and video[1, 0, 2:, 2:].sum() == 0
    assert recorder.frames["pixels"] == []
    recorder.dump()  # nothing cached: nothing logged
    assert len(logger.videos) == 1
    flat = VideoRecorder(logger, tag="y", make_grid=False, in_keys=["a", "b"])
    flat(TensorDict({"a": torch.zeros(3, 1, 2, 2), "b": torch.zeros(3, 2, 2, 1)}, [3]))
    flat.dump()
    assert [(n, tuple(v.shape)) for n, v, _ in logger.videos[1:]] == [("y_a", (3, 1, 1, 2, 2)), ("y_b", (3, 1, 1, 2, 2))]


def test_a_rollout_is_recorded_along_its_time_dim():
    env = TransformedEnv(SerialEnv(2, lambda: RenderingCountingEnv(max_count=100)), PixelRenderTransform())
    data = env.rollout(4)
    assert data.names[-1] == "time"
    recorder = VideoRecorder(ListLogger(), tag="x")
    recorder(data.get("next"))
    frames = recorder.frames["pixels"]
    assert len(frames) == 4 and frames[0].shape == (2, 3, 4, 5)
    assert [int(f[0, 0, 0, 0]) for f in frames] == [1, 2, 3, 4]


def test_env_records_resets_and_steps_and_specs_pass(tmp_path):
    env = TransformedEnv(RenderingCountingEnv(max_count=3), PixelRenderTransform())
    env.append_transform(VideoRecorder(ListLogger(), tag="x", skip=1, out_keys=["copy"]))
    data = env.rollout(5, break_when_any_done=False)
    frames = env.transform[-1].frames["pixels"]
    # reset 0, steps 1 2 3, reset after the done step (0), steps 1 2
    assert [int(f[0, 0, 0]) for f in frames] == [0, 1, 2, 3, 0, 1, 2]
    assert torch.equal(data["next", "copy"], data["next", "pixels"])
    assert env.observation_spec["copy"] == env.observation_spec["pixels"]
    check_env_specs(env)
    check_env_specs(TransformedEnv(SerialEnv(2, lambda: RenderingCountingEnv(max_count=100)), PixelRenderTransform())
                    .append_transform(VideoRecorder(ListLogger(), tag="x")))

    def make() -> TransformedEnv:
        sub = TransformedEnv(RenderingCountingEnv(max_count=100), PixelRenderTransform())
        return sub.append_transform(VideoRecorder(ListLogger(), tag="x"))

    check_env_specs(SerialEnv(2, make))


def test_gif_video_of_a_batched_env(tmp_path):
    logger = CSVLogger("exp", video_format="gif", log_dir=tmp_path)
    env = TransformedEnv(SerialEnv(2, lambda: RenderingCountingEnv(max_count=100)), PixelRenderTransform())
    env.append_transform(VideoRecorder(logger, tag="counts", skip=1))
    env.rollout(5)
    env.transform[-1].dump()
    with Image.open(tmp_path / "exp" / "videos" / "counts_0.gif") as gif:
        assert gif.n_frames == 6 and gif.size == (10, 4)  # reset + 5 steps; 2 envs side by side
        gif.seek(3)
        assert np.asarray(gif.convert("RGB"))[0, 0].tolist() == [3, 3, 3]


def test_video_recorder_needs_a_video_logger_and_its_keys():
    with pytest.raises(TypeError, match="log_video"):
        VideoRecorder(object(), tag="x")
    with pytest.raises(KeyError, match="VideoRecorder reads 'pixels'"):
        TransformedEnv(CountingEnv(), VideoRecorder(ListLogger(), tag="x"))


# ---------------------------------------------------------------- PixelRenderTransform
def test_pixel_render_single_and_batched_gym_envs():
    env = GymEnv("CartPole-v1", render_mode="rgb_array").append_transform(PixelRenderTransform())
    spec = env.observation_spec["pixels"]
    assert spec.shape == (400, 600, 3) and spec.dtype == torch.uint8
    data = env.rollout(2)
    assert torch.equal(data["next", "pixels"][-1], torch.from_numpy(env.base_env.render()))
    check_env_specs(env)
    batched = SerialEnv(2, make_env).append_transform(PixelRenderTransform())
    assert batched.observation_spec["pixels"].shape == (2, 400, 600, 3)
    check_env_specs(batched)
    check_env_specs(SerialEnv(2, lambda: make_env().append_transform(PixelRenderTransform())))


def test_pixel_render_preproc_non_tensor_method_and_tensordict():
    shrink = PixelRenderTransform(out_keys=["small"], preproc=lambda frame: frame[..., ::2, ::2, :].float() / 255)
    env = TransformedEnv(RenderingCountingEnv(max_count=100), shrink)
    spec = env.observation_spec["small"]
    assert spec.shape == (2, 3, 3) and spec.dtype == torch.float32
    assert env.rollout(2)["next", "small"][-1, 0, 0, 0].item() == pytest.approx(2 / 255)
    check_env_specs(env)

    as_text = PixelRenderTransform(preproc=lambda frame: f"count={frame[0, 0, 0]}", as_non_tensor=True)
    env = TransformedEnv(RenderingCountingEnv(max_count=100), as_text)
    assert env.rollout(2)["next", "pixels"] == ["count=1", "count=2"]
    check_env_specs(env)

    with_td = PixelRenderTransform(pass_tensordict=True)
    env = TransformedEnv(RenderingCountingEnv(max_count=100), with_td)
    assert env.reset()["pixels"][0, 0, 0].item() == 100

    class OtherRender(RenderingCountingEnv):
        def snapshot(self) -> torch.Tensor:
            return torch.full((1, 2, 2), 9.0)

    env = TransformedEnv(OtherRender(), PixelRenderTransform(render_method="snapshot"))
    assert env.reset()["pixels"].tolist() == [[[9.0, 9.0], [9.0, 9.0]]]


def test_pixel_render_partial_reset_of_a_batched_env():
    env = TransformedEnv(SerialEnv(2, lambda: RenderingCountingEnv(max_count=100)), PixelRenderTransform())
    data = env.reset()
    for _ in range(2):
        data = env._step_mdp(env.step(env.rand_action(data)))
    data["_reset"] = torch.tensor([[True], [False]])
    out = env.reset(data)
    assert out["pixels"][:, 0, 0, 0].tolist() == [0, 2]


@pytest.mark.filterwarnings("ignore:.*render method without specifying any render mode")
def test_pixel_render_errors():
    with pytest.raises(RuntimeError, match="PixelRenderTransform renders the env it belongs to"):
        PixelRenderTransform()(TensorDict({}, []))
    with pytest.raises(ValueError, match="one out_key"):
        PixelRenderTransform(out_keys=["a", "b"])
    with pytest.raises(TypeError, match="render_mode='rgb_array'"):
        GymEnv("CartPole-v1").append_transform(PixelRenderTransform())
    with pytest.raises(AttributeError, match="no method 'draw'"):
        TransformedEnv(CountingEnv(), PixelRenderTransform(render_method="draw"))


# ---------------------------------------------------------------- TensorDictRecorder
def test_tensordict_recorder_skip_reset_keys_and_dump(tmp_path):
    base = tmp_path / "steps"
    env = TransformedEnv(CountingEnv(max_count=100), TensorDictRecorder(base, skip=2))
    env.rollout(5)
    recorder = env.transform[0]
    path = recorder.dump()
    assert path == f"{base}_0" and recorder.cache == []
    loaded = TensorDict.load_memmap(path)
    assert loaded["count"].squeeze(-1).tolist() == [1.0, 3.0, 5.0]
    assert set(loaded.keys()) == {"count", "reward", "done", "terminated"}
    assert recorder.dump() is None  # nothing cached

    with_resets = TransformedEnv(
        CountingEnv(max_count=100), TensorDictRecorder(base, skip_reset=False, skip=1, in_keys=["count"])
    )
    with_resets.rollout(2)
    path = with_resets.transform[0].dump(suffix="resets")
    loaded = TensorDict.load_memmap(path)
    assert path.endswith("steps_resets") and list(loaded.keys()) == ["count"]
    assert loaded["count"].squeeze(-1).tolist() == [0.0, 1.0, 2.0]
    with_resets.rollout(1)
    with pytest.raises(FileExistsError, match="steps_resets"):
        with_resets.transform[0].dump(suffix="resets")


def test_tensordict_recorder_on_a_batched_env_and_errors(tmp_path):
    env = TransformedEnv(SerialEnv(2, CountingEnv), TensorDictRecorder(tmp_path / "b", skip=1))
    env.rollout(3)
    check_env_specs(env)
    loaded = TensorDict.load_memmap(env.transform[0].dump())
    assert loaded.batch_size[1:] == (2,)
    with pytest.raises(ValueError, match="skip"):
        TensorDictRecorder(tmp_path / "c", skip=0)
    recorder = TensorDictRecorder(tmp_path / "d", skip=1, in_keys=["missing"])
    with pytest.raises(KeyError, match=r"TensorDictRecorder: the data hold no \['missing'\]"):
        recorder(TensorDict({"x": torch.zeros(1)}, []))

"""Image transforms: values on small known images, specs (single and batched, rendered
Pendulum included), resets."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Bounded, Composite, Unbounded
from cadence.envs import EnvBase, GymEnv, SerialEnv, check_env_specs
from cadence.envs.transforms import Compose, TransformedEnv
from cadence.envs.transforms.image import CenterCrop, Crop, GrayScale, Resize, ToTensorImage
from tests.fakes import CountingEnv


class ImageEnv(EnvBase):
    """Emits a 4x4 RGB ``uint8`` frame whose pixels all equal ``10 * steps`` (channel
    ``c`` adds ``c``), channel-last unless ``channel_first``; terminates after
    ``max_count`` steps."""

    def __init__(self, max_count: int = 100, channel_first: bool = False) -> None:
        super().__init__()
        self.max_count = max_count
        self.channel_first = channel_first
        shape = (3, 4, 4) if channel_first else (4, 4, 3)
        self.observation_spec = Composite(pixels=Bounded(0, 255, shape=shape, dtype=torch.uint8))
        self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
        self.count = 0

    def _frame(self) -> torch.Tensor:
        channels = torch.arange(3, dtype=torch.uint8) + 10 * self.count
        frame = channels.expand(4, 4, 3)
        return (frame.permute(2, 0, 1) if self.channel_first else frame).contiguous()

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self.count = 0
        return TensorDict({"pixels": self._frame()}, [])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count += 1
        done = torch.tensor([self.count >= self.max_count])
        return TensorDict({"pixels": self._frame(), "reward": torch.ones(1), "done": done}, [])


def _all_spec_checks(make_transform, make_env=ImageEnv):
    check_env_specs(TransformedEnv(make_env(), make_transform()))
    check_env_specs(TransformedEnv(SerialEnv(2, make_env), make_transform()))
    check_env_specs(SerialEnv(2, lambda: TransformedEnv(make_env(), make_transform())))


def _image_4x4() -> torch.Tensor:
    """A 4x4 RGB uint8 image: pixel (i, j) of channel c is 16 * c + 4 * i + j."""
    return (torch.arange(48, dtype=torch.uint8).reshape(3, 4, 4)).permute(1, 2, 0).contiguous()


def _td(pixels: torch.Tensor, batch: tuple[int, ...] = ()) -> TensorDict:
    return TensorDict({"pixels": pixels}, list(batch))


def test_to_tensor_image_values():
    image = _image_4x4()
    out = ToTensorImage()(_td(image))["pixels"]
    assert out.shape == (3, 4, 4) and out.dtype == torch.float32
    assert torch.equal(out, image.permute(2, 0, 1).float() / 255)
    assert out[1, 2, 3].item() == pytest.approx((16 + 8 + 3) / 255)
    # leading dims are kept
    frames = torch.stack([image, image // 2])
    assert torch.equal(ToTensorImage()(_td(frames, (2,)))["pixels"][1], (image // 2).permute(2, 0, 1).float() / 255)
    # from_int: never / always; dtype
    assert torch.equal(ToTensorImage(from_int=False)(_td(image))["pixels"], image.permute(2, 0, 1).float())
    floats = image.double()
    assert torch.equal(ToTensorImage(from_int=True, dtype=torch.float64)(_td(floats))["pixels"], floats.permute(2, 0, 1) / 255)
    assert torch.equal(ToTensorImage()(_td(floats))["pixels"], floats.permute(2, 0, 1).float())  # floats: not scaled
    # unsqueeze: only images without leading dims
    assert ToTensorImage(unsqueeze=True)(_td(image))["pixels"].shape == (1, 3, 4, 4)
    assert ToTensorImage(unsqueeze=True)(_td(frames, (2,)))["pixels"].shape == (2, 3, 4, 4)
    # shape_tolerant: channel-first images (last dim not 1 or 3) are only cast and scaled
    chw = torch.zeros(3, 5, 6, dtype=torch.uint8)
    assert ToTensorImage(shape_tolerant=True)(_td(chw))["pixels"].shape == (3, 5, 6)
    assert ToTensorImage(shape_tolerant=True)(_td(image))["pixels"].shape == (3, 4, 4)
    # out_keys
    out = ToTensorImage(in_keys=["pixels"], out_keys=["image"])(_td(image))
    assert out["pixels"].dtype == torch.uint8 and out["image"].shape == (3, 4, 4)


def test_to_tensor_image_errors():
    with pytest.raises(RuntimeError, match=r"ToTensorImage could not transform 'pixels'.*expected an image \[\.\.\., H, W, C\]"):
        ToTensorImage()(_td(torch.zeros(4, 4, dtype=torch.uint8)))
    with pytest.raises(ValueError, match="floating dtype"):
        ToTensorImage(dtype=torch.int64)
    with pytest.raises(ValueError, match=r"ToTensorImage cannot transform 'count'.*shape \(1,\)"):
        TransformedEnv(CountingEnv(), ToTensorImage(in_keys=["count"]))
    with pytest.raises(KeyError, match="ToTensorImage reads 'pixels'"):
        TransformedEnv(CountingEnv(), ToTensorImage())


def test_to_tensor_image_specs():
    env = TransformedEnv(ImageEnv(), ToTensorImage())
    spec = env.observation_spec["pixels"]
    assert isinstance(spec, Bounded) and spec.shape == (3, 4, 4) and spec.dtype == torch.float32
    assert spec.low.unique().tolist() == [0.0] and spec.high.unique().tolist() == [1.0]
    assert ImageEnv().observation_spec["pixels"].shape == (4, 4, 3)  # the base env's specs are left alone
    unscaled = TransformedEnv(ImageEnv(), ToTensorImage(from_int=False, dtype=torch.float64)).observation_spec["pixels"]
    assert unscaled.dtype == torch.float64 and unscaled.high.unique().tolist() == [255.0]
    unsqueezed = TransformedEnv(ImageEnv(), ToTensorImage(unsqueeze=True)).observation_spec["pixels"]
    assert unsqueezed.shape == (1, 3, 4, 4)
    _all_spec_checks(ToTensorImage)
    _all_spec_checks(lambda: ToTensorImage(unsqueeze=True))
    _all_spec_checks(lambda: ToTensorImage(shape_tolerant=True), lambda: ImageEnv(channel_first=True))


def test_resize_values():
    image = torch.arange(16.0).reshape(1, 4, 4)
    # bilinear halving averages 2x2 blocks
    half = Resize(2)(_td(image))["pixels"]
    assert half.tolist() == [[[2.5, 4.5], [10.5, 12.5]]]
    # nearest doubling repeats pixels; w is the width (last dim), h the height
    small = torch.tensor([[[0.0, 1.0], [2.0, 3.0]]])
    assert Resize(4, 2, interpolation="nearest")(_td(small))["pixels"].tolist() == [
        [[0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0]]
    ]
    assert Resize(6, 2)(_td(torch.zeros(5, 2, 3, 4, 4), (5,)))["pixels"].shape == (5, 2, 3, 2, 6)
    # a constant image stays constant, within its range (no rounding overshoot)
    ones = Resize(3, 7)(_td(torch.ones(3, 5, 5)))["pixels"]
    assert ones.max().item() <= 1.0 and ones.min().item() == pytest.approx(1.0)
    # integer images: resized in floats, rounded, cast back
    ints = Resize(2)(_td(torch.arange(16, dtype=torch.uint8).reshape(1, 4, 4)))["pixels"]
    assert ints.dtype == torch.uint8 and ints.tolist() == [[[2, 4], [10, 12]]]  # 2.5 -> 2, 4.5 -> 4 (round to even)
    bicubic = Resize(8, interpolation="bicubic")(_td(torch.tensor([[[0, 255], [255, 0]]], dtype=torch.uint8)))["pixels"]
    assert bicubic.dtype == torch.uint8 and bicubic.shape == (1, 8, 8)
    with pytest.raises(ValueError, match="interpolation must be one of"):
        Resize(4, interpolation="lanczos")
    with pytest.raises(ValueError, match="w must be a positive integer"):
        Resize(0)
    with pytest.raises(RuntimeError, match=r"Resize could not transform 'pixels'"):
        Resize(2)(_td(torch.zeros(4)))


def test_resize_specs():
    env = TransformedEnv(ImageEnv(), Compose(ToTensorImage(), Resize(2, 3)))
    spec = env.observation_spec["pixels"]
    assert isinstance(spec, Bounded) and spec.shape == (3, 3, 2) and spec.high.unique().tolist() == [1.0]
    bicubic = TransformedEnv(ImageEnv(), Compose(ToTensorImage(), Resize(2, interpolation="bicubic")))
    assert isinstance(bicubic.observation_spec["pixels"], Unbounded)
    _all_spec_checks(lambda: Compose(ToTensorImage(), Resize(8, 6)))
    _all_spec_checks(lambda: Resize(3, interpolation="area"), lambda: ImageEnv(channel_first=True))  # uint8 kept
    _all_spec_checks(lambda: Compose(ToTensorImage(), Resize(3, interpolation="bicubic")))


def test_center_crop_and_crop_values():
    image = torch.arange(16.0).reshape(1, 4, 4)
    assert CenterCrop(2)(_td(image))["pixels"].tolist() == [[[5.0, 6.0], [9.0, 10.0]]]
    # w=1 column, h=3 rows: rows 0-2 ((4 - 3) // 2 = 0), column 1
    assert CenterCrop(1, 3)(_td(image))["pixels"].flatten().tolist() == [1.0, 5.0, 9.0]
    assert Crop(2, 3, top=1, left=2)(_td(image))["pixels"].tolist() == [[[6.0, 7.0], [10.0, 11.0], [14.0, 15.0]]]
    assert Crop(4)(_td(image))["pixels"].tolist() == image.tolist()
    assert Crop(1, top=3, left=3)(_td(torch.zeros(2, 5, 3, 4, 4), (2,)))["pixels"].shape == (2, 5, 3, 1, 1)
    with pytest.raises(RuntimeError, match=r"CenterCrop could not transform 'pixels'.*5x5 window.*4x4"):
        CenterCrop(5)(_td(image))
    with pytest.raises(RuntimeError, match=r"2x2 window at row 3, column 0"):
        Crop(2, top=3)(_td(image))
    with pytest.raises(ValueError, match="top and left must be non-negative"):
        Crop(2, top=-1)
    with pytest.raises(ValueError, match=r"Crop cannot transform 'pixels'.*window"):
        TransformedEnv(ImageEnv(channel_first=True), Crop(2, top=3))


def test_crop_specs():
    env = TransformedEnv(ImageEnv(channel_first=True), Crop(3, 2, top=1, left=1))
    spec = env.observation_spec["pixels"]
    assert isinstance(spec, Bounded) and spec.shape == (3, 2, 3) and spec.dtype == torch.uint8
    assert TransformedEnv(ImageEnv(), Compose(ToTensorImage(), CenterCrop(2))).observation_spec["pixels"].shape == (3, 2, 2)
    _all_spec_checks(lambda: Crop(3, 2, top=1, left=1), lambda: ImageEnv(channel_first=True))
    _all_spec_checks(lambda: Compose(ToTensorImage(), CenterCrop(3, 1)))


def test_gray_scale_values():
    red, green, blue = [[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [0.0, 1.0]], [[0.0, 0.0], [0.0, 1.0]]
    rgb = torch.tensor([red, green, blue])  # red, green, black, white
    gray = GrayScale()(_td(rgb))["pixels"]
    assert gray.shape == (1, 2, 2)
    expected = [[0.2989, 0.587], [0.0, 0.2989 + 0.587 + 0.114]]
    assert torch.allclose(gray[0], torch.tensor(expected))
    white = torch.full((2, 3, 4, 4), 255, dtype=torch.uint8)
    out = GrayScale()(_td(white, (2,)))["pixels"]
    assert out.dtype == torch.uint8 and out.shape == (2, 1, 4, 4) and out.unique().tolist() == [255]  # 254.97 rounded
    one_channel = torch.rand(1, 4, 4)
    assert torch.equal(GrayScale()(_td(one_channel))["pixels"], one_channel)
    with pytest.raises(RuntimeError, match=r"GrayScale could not transform 'pixels'.*got 4 channels"):
        GrayScale()(_td(torch.zeros(4, 2, 2)))


def test_gray_scale_specs():
    env = TransformedEnv(ImageEnv(), Compose(ToTensorImage(), GrayScale()))
    spec = env.observation_spec["pixels"]
    assert isinstance(spec, Bounded) and spec.shape == (1, 4, 4) and spec.high.unique().tolist() == [1.0]
    value = env.rollout(2)["next", "pixels"][-1]  # count 2: channels 20, 21, 22
    assert torch.allclose(value, torch.full((1, 4, 4), (20 * 0.2989 + 21 * 0.587 + 22 * 0.114) / 255))
    with pytest.raises(ValueError, match=r"GrayScale cannot transform 'pixels'.*got 4 channels"):
        TransformedEnv(ImageEnv(), GrayScale())  # channel-last: dim -3 holds 4 rows, not channels
    _all_spec_checks(lambda: Compose(ToTensorImage(), GrayScale()))
    _all_spec_checks(GrayScale, lambda: ImageEnv(channel_first=True))  # uint8 gray


def test_resets_give_transformed_frames():
    env = TransformedEnv(ImageEnv(max_count=100), Compose(ToTensorImage(), Resize(2), GrayScale()))
    env.rollout(3)
    first = env.reset()["pixels"]
    assert first.shape == (1, 2, 2)
    assert torch.allclose(first, torch.full((1, 2, 2), (0.587 + 2 * 0.114) / 255))  # the count-0 frame
    batched = TransformedEnv(SerialEnv(2, ImageEnv), Compose(ToTensorImage(), CenterCrop(2)))
    data = batched.rollout(2)
    assert data["next", "pixels"].shape == (2, 2, 3, 2, 2)
    reset = batched.reset()["pixels"]
    assert reset.shape == (2, 3, 2, 2) and torch.equal(reset[:, :, 0, 0], torch.tensor([[0.0, 1.0, 2.0]] * 2) / 255)


def test_reset_after_termination_inside_a_rollout():
    env = TransformedEnv(ImageEnv(max_count=2), ToTensorImage())
    data = env.rollout(4, break_when_any_done=False)
    assert data["next", "pixels"][:, 0, 0, 0].mul(255).round().tolist() == [10.0, 20.0, 10.0, 20.0]


#: Pendulum-v1 renders its frames with pygame (the ``pixels`` extra)
needs_pygame = pytest.mark.skipif(
    importlib.util.find_spec("pygame") is None,
    reason="rendering Pendulum-v1 needs pygame: pip install 'cadence[pixels]'",
)


@needs_pygame
def test_seed_example_pendulum_pixels():
    """The seed's "Transformed environment" example (on CPU)."""
    base_env = GymEnv("Pendulum-v1", from_pixels=True, pixels_only=True)
    transform = Compose(ToTensorImage(in_keys=["pixels"]), Resize(64, 64, in_keys=["pixels"]))
    env = TransformedEnv(base_env, transform)
    spec = env.observation_spec["pixels"]
    assert isinstance(spec, Bounded) and spec.shape == (3, 64, 64) and spec.dtype == torch.float32
    assert base_env.observation_spec["pixels"].shape == (500, 500, 3)
    data = env.rollout(2)
    assert data["pixels"].shape == (2, 3, 64, 64) and 0.0 <= data["pixels"].min() <= data["pixels"].max() <= 1.0
    assert data["pixels"].std() > 0  # a rendered pendulum, not a blank frame
    check_env_specs(env)
    # the parent: the base env seen through the transforms before Resize
    resize_parent = env.transform[-1].parent
    assert resize_parent.observation_spec["pixels"].shape == (3, 500, 500)


@needs_pygame
def test_seed_example_batched():
    make_base = lambda: GymEnv("Pendulum-v1", from_pixels=True, pixels_only=True)
    make_transform = lambda: Compose(ToTensorImage(in_keys=["pixels"]), Resize(64, 64, in_keys=["pixels"]))
    env = TransformedEnv(SerialEnv(2, make_base), make_transform())
    assert env.observation_spec["pixels"].shape == (2, 3, 64, 64)
    check_env_specs(env)
    inner = SerialEnv(2, lambda: TransformedEnv(make_base(), make_transform()))
    check_env_specs(inner)
    assert inner.reset()["pixels"].shape == (2, 3, 64, 64)

"""Image transforms: ``ToTensorImage``, ``Resize``, ``CenterCrop``, ``Crop`` and ``GrayScale``.

They read ``"pixels"`` unless told otherwise. ``ToTensorImage`` turns channel-last
integer frames (``[*, H, W, C]``, as renderers give them) into channel-first floats in
``[0, 1]`` (``[*, C, H, W]``); the others work on channel-first images (the last two
dims are the height and the width) and keep any leading dims. Everything is done with
torch alone.

The specs of the transformed entries follow the data: new shapes and dtypes, and
bounds that hold for every value the transform can produce from values in the input's
bounds (a ``Bounded`` spec stays ``Bounded``; anything else becomes ``Unbounded``).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms import Compose
    >>> from cadence.envs.transforms.image import GrayScale, Resize, ToTensorImage
    >>> frames = TensorDict({"pixels": torch.full((2, 8, 8, 3), 255, dtype=torch.uint8)}, [2])
    >>> out = Compose(ToTensorImage(), Resize(4), GrayScale())(frames)
    >>> out["pixels"].shape, out["pixels"].dtype
    (torch.Size([2, 1, 4, 4]), torch.float32)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from cadence.data import Bounded, Composite, TensorSpec, Unbounded
from cadence.envs.transforms.base import NestedKey
from cadence.envs.transforms.observation import ObservationTransform

__all__ = ["CenterCrop", "Crop", "GrayScale", "Resize", "ToTensorImage"]

#: the luma weights of ITU-R BT.601 (red, green, blue)
_LUMA = (0.2989, 0.587, 0.114)
#: the F.interpolate modes whose outputs are weighted means of inputs (non-negative
#: weights summing to one): an output lies between the smallest and largest input
_CONVEX_MODES = ("nearest", "nearest-exact", "bilinear", "area")
_MODES = (*_CONVEX_MODES, "bicubic")


def _positive_int(owner: str, name: str, value: int) -> int:
    if isinstance(value, bool) or int(value) != value or int(value) <= 0:
        raise ValueError(f"{owner}: {name} must be a positive integer, got {value!r}.")
    return int(value)


def _to_dtype(value: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Casts float results back to ``dtype``: integers are rounded and clamped to the dtype's range."""
    if dtype.is_floating_point or value.dtype == dtype:
        return value.to(dtype)
    info = torch.iinfo(dtype)
    return value.round().clamp(info.min, info.max).to(dtype)


def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype computations run in: the input's if it is a float, else the default float."""
    return dtype if dtype.is_floating_point else torch.get_default_dtype()


class _ImageTransform(ObservationTransform):
    """The base of the image transforms: ``in_keys`` default to ``["pixels"]`` and each
    transformed observation spec is rebuilt by :meth:`_image_spec`."""

    steps_on_values = True  # the base _call: get and set

    #: the number of trailing dims an image has for this transform (e.g. ``H, W, C``)
    _image_dims = 2
    #: what those dims are, for error messages
    _layout = "[..., H, W]"

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(["pixels"] if in_keys is None else in_keys, out_keys)

    def _check_shape(self, shape: torch.Size) -> None:
        """Raises ``RuntimeError`` if an image of this ``shape`` (image dims last) cannot be transformed."""
        if len(shape) < self._image_dims:
            raise RuntimeError(f"expected an image {self._layout}, got {len(shape)} dim(s)")

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        batch_dims = len(observation_spec.shape)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key not in observation_spec.keys(True, True):
                continue
            leaf = observation_spec[in_key]
            try:
                self._check_shape(leaf.shape[batch_dims:])
            except RuntimeError as err:
                raise ValueError(
                    f"{type(self).__name__} cannot transform {in_key!r}, whose spec has shape "
                    f"{tuple(leaf.shape)} (env batch dims {tuple(observation_spec.shape)}): {err}."
                ) from None
            observation_spec[out_key] = self._image_spec(leaf)
        return observation_spec

    def _image_spec(self, leaf: TensorSpec) -> TensorSpec:
        """The spec of ``self._apply_transform`` applied to values of ``leaf``."""
        raise TypeError(f"{type(self).__name__} defines no _image_spec()")

    @staticmethod
    def _leaf(like: TensorSpec, low: torch.Tensor | None, high: torch.Tensor | None, shape: torch.Size,
              dtype: torch.dtype) -> TensorSpec:
        if low is None or high is None:
            return Unbounded(shape=shape, dtype=dtype, device=like.device)
        return Bounded(low.expand(shape), high.expand(shape), shape=shape, dtype=dtype, device=like.device)


class ToTensorImage(_ImageTransform):
    """Turns channel-last images (``[*, H, W, C]``, e.g. ``uint8`` frames) into channel-first
    float images (``[*, C, H, W]``), scaled from ``[0, 255]`` to ``[0, 1]``.

    The image's dims are permuted, cast to ``dtype`` and divided by 255 (if scaling).
    The output spec is the input's with the same map applied to its bounds: a
    ``Bounded(0, 255)`` ``uint8`` spec becomes ``Bounded(0, 1)`` of ``dtype``; an
    ``Unbounded`` ``uint8`` one too (its values lie in ``[0, 255]``); other specs
    become ``Unbounded``.

    Args:
        from_int: divide by 255: ``None`` does it for integer inputs only, ``True``
            always, ``False`` never.
        unsqueeze: add a leading dim of size 1 to images that have no leading dims
            (``[H, W, C]`` gives ``[1, C, H, W]``).
        dtype: the output dtype (``torch.get_default_dtype()`` by default).
        shape_tolerant: permute only images whose last dim looks like channels (1, 3 or
            4 of them); others are taken as channel-first already and only cast/scaled.
        in_keys: the images (``["pixels"]``).
        out_keys: where the results go (``in_keys``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> image = torch.tensor([[[0, 51, 255]]], dtype=torch.uint8)  # one pixel, H=W=1, C=3
        >>> out = ToTensorImage()(TensorDict({"pixels": image}, []))["pixels"]
        >>> out.shape, out.flatten().tolist()
        (torch.Size([3, 1, 1]), [0.0, 0.20000000298023224, 1.0])
    """

    _image_dims = 3
    _layout = "[..., H, W, C]"

    def __init__(
        self,
        from_int: bool | None = None,
        unsqueeze: bool = False,
        dtype: torch.dtype | None = None,
        shape_tolerant: bool = False,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys)
        self.from_int = from_int
        self.unsqueeze = unsqueeze
        self.dtype = torch.get_default_dtype() if dtype is None else dtype
        if not self.dtype.is_floating_point:
            raise ValueError(f"ToTensorImage: dtype must be a floating dtype, got {self.dtype}.")
        self.shape_tolerant = shape_tolerant

    def _permutes(self, shape: torch.Size) -> bool:
        return not self.shape_tolerant or shape[-1] in (1, 3, 4)

    def _scales(self, dtype: torch.dtype) -> bool:
        return bool(self.from_int) if self.from_int is not None else not dtype.is_floating_point

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        self._check_shape(value.shape)
        scale = self._scales(value.dtype)
        if self._permutes(value.shape):
            value = value.movedim(-1, -3)
        value = value.to(self.dtype)
        if scale:
            value = value / 255
        if self.unsqueeze and value.ndim == 3:
            value = value.unsqueeze(0)
        return value

    def _out_shape(self, shape: torch.Size) -> torch.Size:
        dims = list(shape)
        if self._permutes(shape):
            dims = [*dims[:-3], dims[-1], dims[-3], dims[-2]]
        if self.unsqueeze and len(dims) == 3:
            dims = [1, *dims]
        return torch.Size(dims)

    def _image_spec(self, leaf: TensorSpec) -> TensorSpec:
        # the bounds go through the very map the data goes through
        shape = self._out_shape(leaf.shape)
        if isinstance(leaf, Bounded):
            low, high = self._apply_transform(leaf.low), self._apply_transform(leaf.high)
        elif isinstance(leaf, Unbounded) and leaf.dtype == torch.uint8 and self._scales(leaf.dtype):
            low, high = torch.zeros((), dtype=self.dtype), torch.ones((), dtype=self.dtype)
        else:
            low = high = None
        return self._leaf(leaf, low, high, shape, self.dtype)

    def __repr__(self) -> str:
        return (
            f"ToTensorImage(in_keys={self.in_keys}, out_keys={self.out_keys}, from_int={self.from_int}, "
            f"unsqueeze={self.unsqueeze}, dtype={self.dtype}, shape_tolerant={self.shape_tolerant})"
        )


class Resize(_ImageTransform):
    """Resizes images (``[..., H, W]``, leading dims kept) to height ``h`` and width ``w``
    with ``torch.nn.functional.interpolate``.

    Integer images are resized in floating point, rounded and cast back. With the modes
    that average their inputs (``"nearest"``, ``"nearest-exact"``, ``"bilinear"``,
    ``"area"``) each output is clamped to the range of its image's values (which it
    lies in up to rounding), so a ``Bounded`` spec keeps its bounds (the smallest low
    and largest high of each image); ``"bicubic"`` may overshoot, and its specs become
    ``Unbounded``.

    Args:
        w: the resulting width (last dim).
        h: the resulting height (second-to-last dim); ``w`` if not given.
        interpolation: ``"bilinear"``, ``"bicubic"``, ``"nearest"``,
            ``"nearest-exact"`` or ``"area"``.
        in_keys: the images (``["pixels"]``).
        out_keys: where the results go (``in_keys``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> image = torch.tensor([[[0.0, 1.0], [2.0, 3.0]]])  # C=1, H=2, W=2
        >>> Resize(4, 1, interpolation="nearest")(TensorDict({"pixels": image}, []))["pixels"].tolist()
        [[[0.0, 0.0, 1.0, 1.0]]]
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        interpolation: str = "bilinear",
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys)
        self.w = _positive_int("Resize", "w", w)
        self.h = self.w if h is None else _positive_int("Resize", "h", h)
        if interpolation not in _MODES:
            raise ValueError(f"Resize: interpolation must be one of {list(_MODES)}, got {interpolation!r}.")
        self.interpolation = interpolation

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        self._check_shape(value.shape)
        *lead, height, width = value.shape
        flat = value.reshape(-1, 1, height, width).to(_work_dtype(value.dtype))
        kwargs = {"align_corners": False} if self.interpolation in ("bilinear", "bicubic") else {}
        out = F.interpolate(flat, size=(self.h, self.w), mode=self.interpolation, **kwargs)
        if self.interpolation in _CONVEX_MODES and flat.numel():
            out = out.clamp(flat.amin((-2, -1), keepdim=True), flat.amax((-2, -1), keepdim=True))
        return _to_dtype(out.reshape(*lead, self.h, self.w), value.dtype)

    def _image_spec(self, leaf: TensorSpec) -> TensorSpec:
        shape = torch.Size((*leaf.shape[:-2], self.h, self.w))
        if isinstance(leaf, Bounded) and self.interpolation in _CONVEX_MODES:
            low, high = leaf.low.amin((-2, -1), keepdim=True), leaf.high.amax((-2, -1), keepdim=True)
        else:
            low = high = None
        return self._leaf(leaf, low, high, shape, leaf.dtype)

    def __repr__(self) -> str:
        return (
            f"Resize(w={self.w}, h={self.h}, interpolation={self.interpolation!r}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys})"
        )


class Crop(_ImageTransform):
    """Crops images (``[..., H, W]``) to the ``h`` x ``w`` window whose top-left pixel is at
    row ``top``, column ``left``.

    The window must lie within the image. Bounded specs keep the bounds of the window's
    pixels.

    Args:
        w: the width of the window.
        h: its height (``w`` if not given).
        top: the row of its first pixel.
        left: the column of its first pixel.
        in_keys: the images (``["pixels"]``).
        out_keys: where the results go (``in_keys``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> image = torch.arange(16.0).reshape(1, 4, 4)
        >>> Crop(2, 1, top=1, left=2)(TensorDict({"pixels": image}, []))["pixels"].tolist()
        [[[6.0, 7.0]]]
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        top: int = 0,
        left: int = 0,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys)
        name = type(self).__name__
        self.w = _positive_int(name, "w", w)
        self.h = self.w if h is None else _positive_int(name, "h", h)
        if isinstance(top, bool) or isinstance(left, bool) or int(top) != top or int(left) != left or top < 0 or left < 0:
            raise ValueError(f"{name}: top and left must be non-negative integers, got top={top!r}, left={left!r}.")
        self.top, self.left = int(top), int(left)

    def _window(self, height: int, width: int) -> tuple[int, int]:
        """The window's top row and left column in an image of this size."""
        return self.top, self.left

    def _check_shape(self, shape: torch.Size) -> None:
        super()._check_shape(shape)
        height, width = shape[-2], shape[-1]
        if height < 0 or width < 0:
            raise RuntimeError("expected the image's height and width to be static (not -1)")
        top, left = self._window(height, width)
        if top + self.h > height or left + self.w > width:
            raise RuntimeError(
                f"expected the {self.h}x{self.w} window at row {top}, column {left} to lie within the "
                f"image, which is {height}x{width}"
            )

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        self._check_shape(value.shape)
        top, left = self._window(value.shape[-2], value.shape[-1])
        return value[..., top : top + self.h, left : left + self.w]

    def _image_spec(self, leaf: TensorSpec) -> TensorSpec:
        shape = torch.Size((*leaf.shape[:-2], self.h, self.w))
        if isinstance(leaf, Bounded):
            low, high = self._apply_transform(leaf.low), self._apply_transform(leaf.high)
        else:
            low = high = None
        return self._leaf(leaf, low, high, shape, leaf.dtype)

    def __repr__(self) -> str:
        return (
            f"Crop(w={self.w}, h={self.h}, top={self.top}, left={self.left}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys})"
        )


class CenterCrop(Crop):
    """Crops the central ``h`` x ``w`` window of images (``[..., H, W]``).

    The window starts at row ``(H - h) // 2`` and column ``(W - w) // 2``; it must fit
    in the image. Bounded specs keep the bounds of the window's pixels.

    Args:
        w: the width of the window.
        h: its height (``w`` if not given).
        in_keys: the images (``["pixels"]``).
        out_keys: where the results go (``in_keys``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> image = torch.arange(16.0).reshape(1, 4, 4)
        >>> CenterCrop(2)(TensorDict({"pixels": image}, []))["pixels"].tolist()
        [[[5.0, 6.0], [9.0, 10.0]]]
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(w, h, 0, 0, in_keys, out_keys)

    def _window(self, height: int, width: int) -> tuple[int, int]:
        return max(height - self.h, 0) // 2, max(width - self.w, 0) // 2

    def __repr__(self) -> str:
        return f"CenterCrop(w={self.w}, h={self.h}, in_keys={self.in_keys}, out_keys={self.out_keys})"


class GrayScale(_ImageTransform):
    """Turns channel-first RGB images (``[..., 3, H, W]``) into gray ones
    (``[..., 1, H, W]``): ``0.2989 R + 0.587 G + 0.114 B``.

    Images with one channel are left as they are. Integer images are converted in
    floating point, rounded and cast back. As the weights are non-negative and sum to
    less than one, a gray value lies between 0 and the pixel's channel values; it is
    clamped there (which only removes rounding errors), and a ``Bounded`` spec gets the
    bounds ``min(0, smallest low)`` and ``max(0, largest high)`` of each pixel.

    Args:
        in_keys: the images (``["pixels"]``).
        out_keys: where the results go (``in_keys``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> pixel = torch.tensor([1.0, 0.0, 0.0]).reshape(3, 1, 1)  # pure red
        >>> gray = GrayScale()(TensorDict({"pixels": pixel}, []))["pixels"]
        >>> gray.shape, round(gray.item(), 4)
        (torch.Size([1, 1, 1]), 0.2989)
    """

    _image_dims = 3
    _layout = "[..., C, H, W] with C = 1 or 3"

    def _check_shape(self, shape: torch.Size) -> None:
        super()._check_shape(shape)
        if shape[-3] not in (1, 3):
            raise RuntimeError(f"expected an image {self._layout}, got {shape[-3]} channels at dim -3")

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        self._check_shape(value.shape)
        if value.shape[-3] == 1:
            return value
        rgb = value.to(_work_dtype(value.dtype))
        red, green, blue = rgb.unbind(-3)
        gray = (red * _LUMA[0] + green * _LUMA[1] + blue * _LUMA[2]).unsqueeze(-3)
        low = rgb.amin(-3, keepdim=True).clamp_max(0)
        high = rgb.amax(-3, keepdim=True).clamp_min(0)
        return _to_dtype(torch.minimum(torch.maximum(gray, low), high), value.dtype)

    def _image_spec(self, leaf: TensorSpec) -> TensorSpec:
        if leaf.shape[-3] == 1:
            return leaf
        shape = torch.Size((*leaf.shape[:-3], 1, *leaf.shape[-2:]))
        if isinstance(leaf, Bounded):
            zero = torch.zeros((), dtype=leaf.dtype, device=leaf.low.device)
            low = torch.minimum(leaf.low.amin(-3, keepdim=True), zero)
            high = torch.maximum(leaf.high.amax(-3, keepdim=True), zero)
        else:
            low = high = None
        return self._leaf(leaf, low, high, shape, leaf.dtype)

    def __repr__(self) -> str:
        return f"GrayScale(in_keys={self.in_keys}, out_keys={self.out_keys})"

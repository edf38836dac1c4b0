"""What the pretrained-encoder transforms (R3M, VIP, VC-1) share: the transform that
runs an image encoder, the lookup and reading of its weights file, and the chain
that turns an env's frames into embeddings.

Weights are never fetched at run time. Each model has one weights file, looked for
in ``model_dir`` (by default the ``checkpoints`` folder of ``torch.hub.get_dir()``,
where a torch.hub download would have put it, so a cache filled by the reference
library is found) or given directly as ``weights_path``; a missing file raises a
``FileNotFoundError`` that says where to get it and where to put it. Files are read
with ``torch.load(path, weights_only=True, map_location="cpu")`` only: a checkpoint
that holds anything but tensors and plain containers is refused, with a way out.
``pretrained=False`` builds the network with random weights (from a generator seeded
with 0, the same every time) and reads no file: for tests, or to train an encoder
from scratch.

Unlike the reference library, whose encoder's batch norms stay in training mode,
a frozen encoder (``requires_grad=False``, the default) is kept in evaluation mode:
each frame's embedding depends on that frame alone, not on the batch it came in,
and a ``ParallelEnv`` gives what a ``SerialEnv`` gives.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms.pretrained import EncoderNet
    >>> net = EncoderNet(torch.nn.Flatten(), out_dim=12, in_keys=["pixels"], out_keys=["vec"])
    >>> net(TensorDict(pixels=torch.zeros(5, 3, 2, 2), batch_size=[5]))["vec"].shape
    torch.Size([5, 12])
"""

from __future__ import annotations

import copy
import os
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from cadence.data import Composite, Unbounded
from cadence.envs.transforms.base import Compose, NestedKey, Transform, key_list
from cadence.envs.transforms.image import ToTensorImage
from cadence.envs.transforms.keys import CatTensors, FlattenObservation, RenameTransform, UnsqueezeTransform

__all__ = [
    "EncoderModel",
    "EncoderNet",
    "PretrainedEncoderTransform",
    "WeightsFile",
    "default_model_dir",
    "encoder_state_dict",
    "read_weights_file",
]

PathLike = str | os.PathLike

#: The ImageNet statistics the encoders were trained with (per RGB channel).
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def default_model_dir() -> Path:
    """The folder weights files are looked for in when no ``model_dir`` is given:
    ``<torch.hub.get_dir()>/checkpoints`` (``$TORCH_HOME/hub/checkpoints``).

    Examples:
        >>> default_model_dir().name
        'checkpoints'
    """
    return Path(torch.hub.get_dir()) / "checkpoints"


@dataclass(frozen=True)
class WeightsFile:
    """The weights file of a model: its name in the model folder and where to get it.

    Args:
        file_name: the file's name (fixed per model, never built from user input).
        url: where the published weights can be downloaded from.

    Examples:
        >>> WeightsFile("r3m_18.pt", "https://example.org/r3m_18.pt").file_name
        'r3m_18.pt'
    """

    file_name: str
    url: str


@dataclass(frozen=True)
class EncoderModel:
    """One encoder a transform offers: how to build it, its embedding size, its weights.

    Args:
        name: the model's name as the transform takes it (e.g. ``"resnet50"``).
        build: builds the network: ``build(device=..., generator=...)``.
        out_dim: the size of the embedding of one image.
        weights: the published weights file (``None``: there is none; the network
            always starts from random weights unless a ``weights_path`` is given).

    Examples:
        >>> from cadence.modules.resnet import resnet18
        >>> EncoderModel("resnet18", lambda **kw: resnet18(None, **kw), 512, None).out_dim
        512
    """

    name: str
    build: Callable[..., nn.Module]
    out_dim: int
    weights: WeightsFile | None


def read_weights_file(path: Path, owner: str) -> Any:
    """Reads a checkpoint with ``torch.load(path, weights_only=True, map_location="cpu")``.

    Args:
        path: the file.
        owner: who reads it, for error messages.

    Raises:
        ValueError: the file is not a torch checkpoint, or it holds objects other than
            tensors and plain containers (``weights_only`` refuses them); the message
            says how to extract the weights once, in a trusted environment.

    Examples:
        >>> import tempfile, torch
        >>> from pathlib import Path
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = Path(folder) / "w.pt"
        ...     torch.save({"w": torch.ones(2)}, path)
        ...     read_weights_file(path, "example")["w"].tolist()
        [1.0, 1.0]
    """
    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as err:
        reason = _weights_only_reason(str(err))
        if "Unsupported global" not in reason:
            raise ValueError(f"{owner}: {str(path)!r} could not be read as a torch checkpoint ({reason}).") from err
        raise ValueError(
            f"{owner}: {str(path)!r} holds objects other than tensors and plain containers ({reason}), and Cadence "
            f"reads weights with torch.load(weights_only=True) only. If you trust the file, extract its weights "
            f"once, e.g. torch.save(torch.load(path, weights_only=False)['model'], new_path), and pass "
            f"weights_path=new_path."
        ) from err
    except (RuntimeError, EOFError, OSError) as err:
        raise ValueError(f"{owner}: {str(path)!r} could not be read as a torch checkpoint: {err}") from err


def _weights_only_reason(message: str) -> str:
    """The weights-only reader's own reason, out of torch's long message."""
    _, marker, rest = message.partition("WeightsUnpickler error:")
    lines = [line.strip() for line in rest.splitlines() if line.strip()] if marker else []
    reason = lines[0] if lines else message.strip().splitlines()[0]
    return reason.split(" was not an allowed global")[0]


def encoder_state_dict(
    checkpoint: Any,
    owner: str,
    container_keys: Sequence[str] = (),
    prefixes: Sequence[str] = (),
    skip: Callable[[str], bool] | None = None,
) -> dict[str, torch.Tensor]:
    """The encoder's state dict inside a checkpoint.

    The checkpoint is a state dict, or a dict holding one under the first of
    ``container_keys`` it has (``"r3m"``, ``"model"``, ...). If some keys start with one
    of ``prefixes`` (tried in order: ``"module.convnet."``, ...), only those are kept,
    without the prefix. Keys for which ``skip`` is true are left out.

    Args:
        checkpoint: what :func:`read_weights_file` read.
        owner: who reads it, for error messages.
        container_keys: the names a checkpoint may keep its state dict under.
        prefixes: the prefixes of the encoder's entries.
        skip: entries that do not belong to the encoder (a decoder, a classifier).

    Raises:
        ValueError: no mapping of names to tensors was found.

    Examples:
        >>> import torch
        >>> checkpoint = {"r3m": {"module.convnet.conv1.weight": torch.ones(1), "module.lang_enc.w": torch.ones(1)}}
        >>> list(encoder_state_dict(checkpoint, "example", ["r3m"], ["module.convnet."]))
        ['conv1.weight']
    """
    state = checkpoint
    if isinstance(state, Mapping):
        for container in container_keys:
            if isinstance(state.get(container), Mapping):
                state = state[container]
                break
    if not isinstance(state, Mapping):
        raise ValueError(
            f"{owner}: expected a state dict (names to tensors), or a dict holding one under "
            f"{list(container_keys)}; got {type(checkpoint).__name__}."
        )
    if not state:
        raise ValueError(f"{owner}: the state dict is empty (top-level entries: {sorted(map(str, checkpoint))}).")
    for prefix in prefixes:
        if any(isinstance(key, str) and key.startswith(prefix) for key in state):
            state = {key[len(prefix):]: value for key, value in state.items() if key.startswith(prefix)}
            break
    out = {key: value for key, value in state.items() if skip is None or not skip(key)}
    wrong = sorted(str(key) for key, value in out.items() if not isinstance(key, str) or not torch.is_tensor(value))
    if wrong:
        raise ValueError(f"{owner}: expected a state dict of tensors, but {wrong[:5]} are not named tensors.")
    return out


class EncoderNet(Transform):
    """Runs an image encoder: images ``[..., C, H, W]`` at ``in_keys`` become embeddings
    ``[..., out_dim]`` at ``out_keys`` (leading dims kept: batch, time, stacked images).

    A frozen encoder (``requires_grad=False``) runs under ``torch.no_grad()`` and stays
    in evaluation mode whatever ``train()`` says, so that batch norms use their running
    statistics. With ``requires_grad=True`` gradients flow and ``train()``/``eval()``
    apply, for fine-tuning.

    Args:
        network: the encoder: ``[B, C, H, W]`` to ``[B, out_dim]``.
        out_dim: the embedding size.
        in_keys: the images.
        out_keys: the embeddings (``in_keys`` if not given).
        drop_keys: entries to remove once the embeddings are written (the raw frames
            that were preprocessed into ``in_keys``).
        requires_grad: let gradients flow through the encoder.
        network_name: the attribute holding ``network`` (its prefix in the state dict).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> net = EncoderNet(torch.nn.Flatten(), 12, in_keys=["image"], out_keys=["vec"], drop_keys=["pixels"])
        >>> data = TensorDict(pixels=torch.zeros(2, 2, 3), image=torch.zeros(3, 2, 2), batch_size=[])
        >>> sorted(net(data).keys())
        ['image', 'vec']
    """

    steps_on_values = True  # get, set and exclude

    def __init__(
        self,
        network: nn.Module,
        out_dim: int,
        in_keys: NestedKey | Sequence[NestedKey],
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        drop_keys: NestedKey | Sequence[NestedKey] | None = None,
        requires_grad: bool = False,
        network_name: str = "network",
    ) -> None:
        super().__init__(in_keys, out_keys)
        self.out_dim = int(out_dim)
        self.drop_keys = key_list(drop_keys)
        self.requires_grad = requires_grad
        self.network_name = network_name
        self.add_module(network_name, network)
        self.train(self.training)

    @property
    def encoder(self) -> nn.Module:
        """The encoder."""
        return self._modules[self.network_name]

    def train(self, mode: bool = True) -> EncoderNet:
        """``nn.Module.train``, except that a frozen encoder (``requires_grad=False``) stays in eval
        mode: its normalisation uses running statistics, never a batch's.

        Examples:
            >>> import torch
            >>> net = EncoderNet(torch.nn.Flatten(), 12, in_keys=["image"])
            >>> net.train().training, net.encoder.training
            (True, False)
        """
        super().train(mode)
        if not self.requires_grad:
            self.encoder.eval()  # a frozen encoder: running statistics, never batch statistics
        return self

    def _call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict.get(in_key, None)
            if value is not None:
                tensordict.set(out_key, self._checked(self._apply_transform, value, in_key))
        return tensordict.exclude(*self.drop_keys) if self.drop_keys else tensordict

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        if value.ndim < 3:
            raise RuntimeError(f"expected images [..., C, H, W], got {value.ndim} dim(s)")
        lead = value.shape[:-3]
        flat = value.reshape(-1, *value.shape[-3:])
        if flat.shape[0] == 0:
            return value.new_zeros((*lead, self.out_dim), dtype=torch.get_default_dtype())
        with torch.set_grad_enabled(self.requires_grad and torch.is_grad_enabled()):
            out = self.encoder(flat)
        return out.reshape(*lead, self.out_dim)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        batch_dims = len(observation_spec.shape)
        keys = observation_spec.keys(True, True)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key not in keys:
                continue
            leaf = observation_spec[in_key]
            if len(leaf.shape) - batch_dims < 3:
                raise ValueError(
                    f"{type(self).__name__} embeds images [..., C, H, W], but {in_key!r} has shape "
                    f"{tuple(leaf.shape)} (env batch dims {tuple(observation_spec.shape)})."
                )
            shape = torch.Size((*leaf.shape[:-3], self.out_dim))
            observation_spec[out_key] = Unbounded(shape=shape, dtype=torch.get_default_dtype(), device=leaf.device)
        for key in self.drop_keys:
            if key in observation_spec.keys(True, True):
                del observation_spec[key]
        return observation_spec

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({type(self.encoder).__name__}, out_dim={self.out_dim}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys}, drop_keys={self.drop_keys})"
        )


def _unique_path_options(owner: str, model_dir: PathLike | None, download_path: PathLike | None) -> PathLike | None:
    if model_dir is not None and download_path is not None and Path(model_dir) != Path(download_path):
        raise ValueError(
            f"{owner}: model_dir={str(model_dir)!r} and download_path={str(download_path)!r} both name the "
            f"weights folder; give one."
        )
    return model_dir if model_dir is not None else download_path


class PretrainedEncoderTransform(Compose):
    """The chain of a pretrained image encoder: frames in, embeddings out.

    The chain is, for one image key (or ``stack_images=False``): optional copies of
    the raw frames (``tensor_pixels_keys``), ``ToTensorImage`` (channel-last ``uint8``
    to channel-first floats in ``[0, 1]``), the subclass's preprocessing (resize,
    crop, normalisation), then the encoder, whose embeddings go to ``out_keys``; the
    frames are dropped unless ``del_keys=False``. With several image keys and
    ``stack_images=True`` the images are preprocessed in place, stacked (in sorted key
    order, as the reference's ``CatTensors`` does) into ``out_keys[0]`` and encoded
    together, their embeddings concatenated; the frames are always consumed then.

    Subclasses (:class:`~cadence.envs.transforms.r3m.R3MTransform`,
    :class:`~cadence.envs.transforms.vip.VIPTransform`,
    :class:`~cadence.envs.transforms.vc1.VC1Transform`) say which models they offer,
    how their checkpoints are laid out and how images are preprocessed.

    Args:
        model: the encoder.
        in_keys: the frames (``["pixels"]`` if not given).
        out_keys: the embeddings (``[default_out_key]``, or one per frame key when not
            stacking, if not given).
        stack_images: encode several frame keys into one entry.
        del_keys: drop the frames (when they are not stacked).
        tensor_pixels_keys: keep a copy of each raw frame under these names.
        requires_grad: let gradients flow through the encoder (fine-tuning).
        pretrained: load the model's weights file; ``False`` gives random weights
            (seeded, the same every time) and reads no file.
        download: accepted for the reference's signature; ``True`` raises, since
            Cadence fetches nothing at run time (the message says where to put the file).
        model_dir: the folder holding the weights file (default: :func:`default_model_dir`).
        download_path: the reference's name for ``model_dir``.
        weights_path: the weights file itself (overrides ``model_dir``; read even with
            ``pretrained=False``).

    Raises:
        FileNotFoundError: ``pretrained`` and the weights file is missing.
        ValueError: ``download=True``; keys that do not pair up; a weights file that
            cannot be read or does not fit the network.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from cadence.envs.transforms.r3m import R3MTransform
        >>> r3m = R3MTransform("resnet18", in_keys=["pixels"], size=32, pretrained=False)
        >>> isinstance(r3m, PretrainedEncoderTransform), [type(t).__name__ for t in r3m]
        (True, ['ToTensorImage', 'ObservationNorm', 'Resize', 'EncoderNet'])
    """

    #: the name of the family, for messages
    family = "encoder"
    #: the embedding's key when ``out_keys`` is not given
    default_out_key = "vec"
    #: the attribute of :class:`EncoderNet` holding the network
    network_name = "network"

    def __init__(
        self,
        model: EncoderModel,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        *,
        stack_images: bool = True,
        del_keys: bool = True,
        tensor_pixels_keys: NestedKey | Sequence[NestedKey] | None = None,
        requires_grad: bool = False,
        pretrained: bool = True,
        download: bool | str = False,
        model_dir: PathLike | None = None,
        download_path: PathLike | None = None,
        weights_path: PathLike | None = None,
    ) -> None:
        owner = f"{type(self).__name__}({model.name!r})"
        in_keys = key_list(in_keys) or ["pixels"]
        out_keys = self._resolve_out_keys(in_keys, key_list(out_keys), stack_images)
        pixel_copies = key_list(tensor_pixels_keys)
        if pixel_copies and len(pixel_copies) != len(in_keys):
            raise ValueError(
                f"{owner}: tensor_pixels_keys must name one copy per image key {in_keys}, got {pixel_copies}."
            )
        folder = _unique_path_options(owner, model_dir, download_path)
        weights = None
        if download:
            raise ValueError(self._download_message(owner, model, folder, download))
        if weights_path is not None or (pretrained and model.weights is not None):
            weights = self._weights_file(owner, model, folder, weights_path)
        network = self._network(owner, model, weights)

        transforms: list[Transform] = []
        if pixel_copies:
            transforms.append(RenameTransform(in_keys, pixel_copies, create_copy=True))
        if stack_images and len(in_keys) > 1:
            transforms += [ToTensorImage(in_keys=in_keys), *self._preprocessing(in_keys)]
            transforms += [
                UnsqueezeTransform(-4, in_keys=in_keys),
                CatTensors(in_keys, out_keys[0], dim=-4, del_keys=True),
                EncoderNet(network, model.out_dim, out_keys, requires_grad=requires_grad,
                           network_name=self.network_name),
                FlattenObservation(-2, -1, in_keys=out_keys),
            ]
        else:
            # preprocessed into the outputs, so that the frames stay intact where they are kept
            dropped = [key for key in in_keys if key not in out_keys] if del_keys else []
            transforms += [ToTensorImage(in_keys=in_keys, out_keys=out_keys), *self._preprocessing(out_keys)]
            transforms.append(EncoderNet(network, model.out_dim, out_keys, drop_keys=dropped,
                                         requires_grad=requires_grad, network_name=self.network_name))
        super().__init__(*transforms)
        self.in_keys, self.out_keys = list(in_keys), list(out_keys)
        self.model_name = model.name
        self.stack_images = stack_images
        self.del_keys = del_keys
        self.tensor_pixels_keys = pixel_copies
        self.requires_grad = requires_grad
        self.weights_path = weights

    # ------------------------------------------------------------------ subclass hooks
    def _preprocessing(self, keys: list[NestedKey]) -> list[Transform]:
        """The transforms between ``ToTensorImage`` and the encoder, on ``keys``."""
        return []

    def _checkpoint_state_dict(self, checkpoint: Any, owner: str) -> dict[str, torch.Tensor]:
        """The encoder's state dict in a checkpoint of this family."""
        return encoder_state_dict(checkpoint, owner)

    # ------------------------------------------------------------------ keys and weights
    def _resolve_out_keys(self, in_keys: list[NestedKey], out_keys: list[NestedKey], stack_images: bool) -> list[NestedKey]:
        name = type(self).__name__
        if not out_keys:
            if stack_images or len(in_keys) == 1:
                return [self.default_out_key]
            return [f"{self.default_out_key}_{i}" for i in range(len(in_keys))]
        if stack_images and len(in_keys) > 1 and len(out_keys) != 1:
            raise ValueError(f"{name}: with stack_images=True out_keys must name one entry, got out_keys={out_keys}.")
        if (not stack_images or len(in_keys) == 1) and len(out_keys) != len(in_keys):
            raise ValueError(
                f"{name}: out_keys must name one embedding per image key when images are not stacked; got "
                f"in_keys={in_keys}, out_keys={out_keys}."
            )
        return out_keys

    def _model_path(self, model: EncoderModel, folder: PathLike | None) -> Path | None:
        if model.weights is None:
            return None
        return Path(folder if folder is not None else default_model_dir()) / model.weights.file_name

    def _download_message(self, owner: str, model: EncoderModel, folder: PathLike | None, download: bool | str) -> str:
        path = self._model_path(model, folder)
        if path is None or model.weights is None:
            where = "this model has no published weights; pass weights_path=... to load a file of your own"
        else:
            where = (
                f"download {model.weights.url} yourself and save it as {str(path)!r} (or pass model_dir=... for "
                f"another folder, or weights_path=... for the file); it is then loaded with download=False, "
                f"the default"
            )
        return f"{owner}: download={download!r}, but Cadence fetches nothing at run time: {where}."

    def _weights_file(self, owner: str, model: EncoderModel, folder: PathLike | None, weights_path: PathLike | None) -> Path:
        if weights_path is not None:
            path = Path(weights_path)
            if not path.is_file():
                raise FileNotFoundError(f"{owner}: weights_path={str(weights_path)!r} is not a file.")
            return path
        path = self._model_path(model, folder)
        assert path is not None and model.weights is not None  # only models with published weights get here
        if not path.is_file():
            raise FileNotFoundError(
                f"{owner} needs the {self.family} weights file {model.weights.file_name!r} at {str(path)!r}, which "
                f"does not exist; Cadence fetches nothing at run time. Download {model.weights.url} and save it "
                f"there (or pass model_dir=... for the folder holding it, or weights_path=... for the file), or "
                f"pass pretrained=False for an encoder with random weights."
            )
        return path

    def _network(self, owner: str, model: EncoderModel, weights: Path | None) -> nn.Module:
        if weights is None:
            return model.build()
        state = self._checkpoint_state_dict(read_weights_file(weights, owner), f"{owner}: {str(weights)!r}")
        network = model.build(device="meta").to_empty(device="cpu")  # every entry is overwritten below
        try:
            network.load_state_dict(state, strict=True)
        except RuntimeError as err:
            raise ValueError(
                f"{owner}: the weights in {str(weights)!r} do not fit the {model.name} encoder (another model's "
                f"weights?): {err}"
            ) from err
        return network

    # ------------------------------------------------------------------ copies
    def clone(self) -> PretrainedEncoderTransform:
        """A parent-less copy whose members are clones (sharing the encoder's weights)."""
        clone = copy.copy(self)
        clone.__dict__ = dict(self.__dict__)
        clone._buffers = dict(self._buffers)
        clone._parameters = dict(self._parameters)
        clone._modules = dict(self._modules)
        clone.__dict__["_container"] = None
        members = [transform.clone() for transform in self.transforms]
        for member in members:
            member.set_container(clone)
        clone._modules["transforms"] = nn.ModuleList(members)
        return clone

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model_name={self.model_name!r}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys}, weights={None if self.weights_path is None else str(self.weights_path)!r})"
        )


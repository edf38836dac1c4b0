"""``R3MTransform``: frames to R3M embeddings (ResNet-18, -34 or -50).

R3M (Nair et al., 2022, https://arxiv.org/abs/2203.12601) is a ResNet pre-trained on
Ego4D videos for robot manipulation. The transform converts the frames to floats,
normalises them with the ImageNet statistics, resizes them to ``size`` and runs the
ResNet without its classifier: 512 features (ResNet-18 and -34) or 2048 (ResNet-50).

The weights are the files the reference library downloads (``r3m_18.pt``,
``r3m_34.pt``, ``r3m_50.pt``: a dict holding the R3M state dict under ``"r3m"``, the
ResNet's entries prefixed ``module.convnet.``); Cadence downloads nothing: the file is
read from the model folder (see :mod:`cadence.envs.transforms.pretrained`) and a
missing one raises a ``FileNotFoundError`` that says where to put it. A plain
ResNet state dict (torchvision's names; its classifier ``fc`` is ignored) loads too.
``pretrained=False`` gives random weights.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms.r3m import R3MTransform
    >>> r3m = R3MTransform("resnet18", in_keys=["pixels"], size=32, pretrained=False)
    >>> frames = TensorDict(pixels=torch.zeros(4, 32, 32, 3, dtype=torch.uint8), batch_size=[4])
    >>> r3m(frames)["r3m_vec"].shape
    torch.Size([4, 512])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from cadence.envs.transforms.base import NestedKey, Transform
from cadence.envs.transforms.image import Resize
from cadence.envs.transforms.observation import ObservationNorm
from cadence.envs.transforms.pretrained import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    EncoderModel,
    PathLike,
    PretrainedEncoderTransform,
    WeightsFile,
    encoder_state_dict,
)
from cadence.modules.resnet import resnet18, resnet34, resnet50

__all__ = ["R3M_MODELS", "R3MTransform"]

_R3M_URL = "https://pytorch.s3.amazonaws.com/models/rl/r3m/{}.pt"

#: The R3M encoders: the ResNets without their classifier.
R3M_MODELS: dict[str, EncoderModel] = {
    "resnet18": EncoderModel(
        "resnet18", lambda **kw: resnet18(None, **kw), 512, WeightsFile("r3m_18.pt", _R3M_URL.format("r3m_18"))
    ),
    "resnet34": EncoderModel(
        "resnet34", lambda **kw: resnet34(None, **kw), 512, WeightsFile("r3m_34.pt", _R3M_URL.format("r3m_34"))
    ),
    "resnet50": EncoderModel(
        "resnet50", lambda **kw: resnet50(None, **kw), 2048, WeightsFile("r3m_50.pt", _R3M_URL.format("r3m_50"))
    ),
}


def resnet_preprocessing(keys: list[NestedKey], size: int) -> list[Transform]:
    """The reference's preprocessing for its ResNet encoders (R3M, VIP), after
    ``ToTensorImage``: ImageNet normalisation, then a bilinear resize to ``size`` x ``size``.

    Examples:
        >>> [type(t).__name__ for t in resnet_preprocessing(["pixels"], 224)]
        ['ObservationNorm', 'Resize']
    """
    normalize = ObservationNorm(
        loc=torch.tensor(IMAGENET_MEAN).view(3, 1, 1),
        scale=torch.tensor(IMAGENET_STD).view(3, 1, 1),
        in_keys=keys,
        standard_normal=True,
    )
    return [normalize, Resize(size, size, in_keys=keys)]


class R3MTransform(PretrainedEncoderTransform):
    """Embeds frames with R3M: ``ToTensorImage``, ImageNet ``ObservationNorm``,
    ``Resize(size, size)`` and the ResNet (a ``Compose`` of them).

    Images ``[..., H, W, 3]`` (``uint8`` frames, as renderers give them) at ``in_keys``
    become ``[..., 512]`` (``[..., 2048]`` for ResNet-50) float embeddings at
    ``out_keys``; the frames are dropped. Several image keys are stacked into one
    embedding (``[..., n * 512]``) unless ``stack_images=False``.

    Args:
        model_name: ``"resnet18"``, ``"resnet34"`` or ``"resnet50"``.
        in_keys: the frames (``["pixels"]``).
        out_keys: the embeddings (``["r3m_vec"]``, or ``"r3m_vec_{i}"`` per frame key
            without stacking).
        size: the side of the square images fed to the ResNet (244, the reference's default).
        stack_images: embed several frame keys into one entry.
        download: ``True`` raises: nothing is fetched at run time (the message says which
            file to download and where to put it).
        download_path: the folder holding the weights file (the reference's name;
            same as ``model_dir``).
        tensor_pixels_keys: keep a copy of each raw frame under these names.
        requires_grad: let gradients flow through the ResNet (fine-tuning); frozen
            by default (no gradients, evaluation mode).
        model_dir: the folder holding the weights file (default:
            ``<torch.hub.get_dir()>/checkpoints``).
        weights_path: the weights file itself (overrides ``model_dir``; read even with
            ``pretrained=False``).
        pretrained: load the R3M weights (default); ``False`` gives a ResNet with
            random weights (seeded: the same every time) and reads no file.

    Raises:
        FileNotFoundError: ``pretrained`` and the weights file is missing.
        ValueError: an unknown ``model_name``, ``download=True``, keys that do not pair
            up, or a weights file that cannot be read or does not fit the ResNet.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> r3m = R3MTransform("resnet18", in_keys=["left", "right"], size=32, pretrained=False)
        >>> frames = torch.zeros(2, 32, 32, 3, dtype=torch.uint8)
        >>> out = r3m(TensorDict(left=frames, right=frames, batch_size=[2]))
        >>> sorted(out.keys()), out["r3m_vec"].shape
        (['r3m_vec'], torch.Size([2, 1024]))
    """

    family = "R3M"
    default_out_key = "r3m_vec"
    network_name = "convnet"

    def __init__(
        self,
        model_name: str,
        in_keys: NestedKey | Sequence[NestedKey] | None = None,
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        size: int = 244,
        stack_images: bool = True,
        download: bool | str = False,
        download_path: PathLike | None = None,
        tensor_pixels_keys: NestedKey | Sequence[NestedKey] | None = None,
        requires_grad: bool = False,
        *,
        model_dir: PathLike | None = None,
        weights_path: PathLike | None = None,
        pretrained: bool = True,
    ) -> None:
        if model_name not in R3M_MODELS:
            raise ValueError(f"R3MTransform: model_name must be one of {sorted(R3M_MODELS)}, got {model_name!r}.")
        self.size = size
        super().__init__(
            R3M_MODELS[model_name],
            in_keys,
            out_keys,
            stack_images=stack_images,
            tensor_pixels_keys=tensor_pixels_keys,
            requires_grad=requires_grad,
            pretrained=pretrained,
            download=download,
            model_dir=model_dir,
            download_path=download_path,
            weights_path=weights_path,
        )

    def _preprocessing(self, keys: list[NestedKey]) -> list[Transform]:
        return resnet_preprocessing(keys, self.size)

    def _checkpoint_state_dict(self, checkpoint: Any, owner: str) -> dict[str, torch.Tensor]:
        # R3M keeps its convnet under "r3m" / "module.convnet."; its encoder has no classifier
        return encoder_state_dict(
            checkpoint, owner, ("r3m",), ("module.convnet.", "convnet."), skip=lambda key: key.startswith("fc.")
        )

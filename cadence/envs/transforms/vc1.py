"""``VC1Transform``: frames to VC-1 embeddings (ViT-B/16 or ViT-L/16).

VC-1 (Majumdar et al., 2023, https://arxiv.org/abs/2303.18240) is a Vision Transformer
pre-trained with masked auto-encoding on egocentric video and ImageNet for embodied
AI. The transform converts the frames to floats, resizes them to 256 x 256 (bicubic,
as VC-1's own preprocessing), crops the central 224 x 224, normalises them with the
ImageNet statistics and runs the ViT: its class token is the embedding (768 features
for the base model, 1024 for the large one).

The weights are VC-1's published files (``vc1_vitb.pth``, ``vc1_vitl.pth``: an MAE
checkpoint holding the state dict under ``"model"``, decoder included; the decoder's
entries are ignored), read from the model folder (see
:mod:`cadence.envs.transforms.pretrained`); nothing is downloaded, and a missing file
raises a ``FileNotFoundError`` that says where to put it. A checkpoint that also
pickles its training arguments cannot be read with ``weights_only=True``: the error
says how to extract the weights once. ``model_name="default"`` is the reference's
small untrained ViT for tests (16 features; see :meth:`VC1Transform.make_noload_model`).

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms.vc1 import VC1Transform
    >>> vc1 = VC1Transform(["pixels"], None, "default")
    >>> frames = TensorDict(pixels=torch.zeros(2, 64, 64, 3, dtype=torch.uint8), batch_size=[2])
    >>> vc1(frames)["VC1_vec"].shape
    torch.Size([2, 16])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from cadence.envs.transforms.base import NestedKey, Transform
from cadence.envs.transforms.image import CenterCrop, Resize
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
from cadence.modules.resnet import default_generator
from cadence.modules.vit import VisionTransformer, vit_base_patch16, vit_large_patch16

__all__ = ["VC1_MODELS", "VC1Transform"]

_VC1_URL = "https://dl.fbaipublicfiles.com/eai-vc/{}"
#: VC-1's input: frames resized to 256 x 256, then the central 224 x 224.
_RESIZE, _CROP = 256, 224


def _noload_vit(*, generator: torch.Generator | None = None, device: Any = None) -> VisionTransformer:
    # the reference's test model: ViT/16 at 224 with 16-wide tokens, 4 blocks of 4 heads
    return VisionTransformer(_CROP, 16, 3, 16, 4, 4, 4.0, True, generator=generator, device=device)


_BASE = EncoderModel("vc1_base", vit_base_patch16, 768, WeightsFile("vc1_vitb.pth", _VC1_URL.format("vc1_vitb.pth")))
_LARGE = EncoderModel("vc1_large", vit_large_patch16, 1024, WeightsFile("vc1_vitl.pth", _VC1_URL.format("vc1_vitl.pth")))

#: The VC-1 encoders by name: the reference's (``"base"``, ``"large"``, ``"default"``),
#: the brief ones and VC-1's own (``"vc1_vitb"``, ``"vc1_vitl"``).
VC1_MODELS: dict[str, EncoderModel] = {
    "base": _BASE,
    "vc1_base": _BASE,
    "vc1_vitb": _BASE,
    "large": _LARGE,
    "vc1_large": _LARGE,
    "vc1_vitl": _LARGE,
    "default": EncoderModel("default", _noload_vit, 16, None),
}


def _not_encoder(key: str) -> bool:
    """The entries of a VC-1 (MAE) checkpoint that the encoder does not have."""
    return "decoder" in key or "mask_token" in key or key.startswith("head.")


class VC1Transform(PretrainedEncoderTransform):
    """Embeds frames with VC-1: ``ToTensorImage``, ``Resize(256, 256)`` (bicubic),
    ``CenterCrop(224)``, ImageNet ``ObservationNorm`` and the ViT (a ``Compose`` of them).

    Images ``[..., H, W, 3]`` at ``in_keys`` become ``[..., embed_dim]`` float
    embeddings at ``out_keys``, one per frame key; the frames are dropped unless
    ``del_keys=False``.

    Args:
        in_keys: the frames (``["pixels"]``).
        out_keys: the embeddings, one per frame key (``["VC1_vec"]`` for one frame key,
            ``"VC1_vec_{i}"`` for several).
        model_name: ``"base"``/``"vc1_base"``/``"vc1_vitb"`` (ViT-B/16, 768 features),
            ``"large"``/``"vc1_large"``/``"vc1_vitl"`` (ViT-L/16, 1024 features), or
            ``"default"``: the reference's small untrained ViT (16 features) for tests,
            which never reads a file unless ``weights_path`` is given.
        del_keys: drop the frames.
        model_dir: the folder holding the weights file (default:
            ``<torch.hub.get_dir()>/checkpoints``).
        weights_path: the weights file itself (overrides ``model_dir``; read even with
            ``pretrained=False``).
        pretrained: load the VC-1 weights (default); ``False`` gives random weights
            (seeded: the same every time) and reads no file.
        download: ``True`` raises: nothing is fetched at run time (the message says which
            file to download and where to put it).

    Raises:
        FileNotFoundError: ``pretrained`` and the weights file is missing.
        ValueError: an unknown ``model_name``, ``download=True``, keys that do not pair
            up, or a weights file that cannot be read or does not fit the ViT.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> vc1 = VC1Transform(["pixels"], ["embedding"], "default", del_keys=False)
        >>> out = vc1(TensorDict(pixels=torch.zeros(300, 300, 3, dtype=torch.uint8)))
        >>> sorted(out.keys()), out["embedding"].shape
        (['embedding', 'pixels'], torch.Size([16]))
    """

    family = "VC-1"
    default_out_key = "VC1_vec"
    network_name = "model"

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | None,
        out_keys: NestedKey | Sequence[NestedKey] | None,
        model_name: str,
        del_keys: bool = True,
        *,
        model_dir: PathLike | None = None,
        weights_path: PathLike | None = None,
        pretrained: bool = True,
        download: bool = False,
    ) -> None:
        if model_name not in VC1_MODELS:
            raise ValueError(f"VC1Transform: model_name must be one of {sorted(VC1_MODELS)}, got {model_name!r}.")
        super().__init__(
            VC1_MODELS[model_name],
            in_keys,
            out_keys,
            stack_images=False,
            del_keys=del_keys,
            pretrained=pretrained,
            download=download,
            model_dir=model_dir,
            weights_path=weights_path,
        )

    @classmethod
    def make_noload_model(cls, generator: torch.Generator | None = None) -> VisionTransformer:
        """The reference's small untrained ViT (``model_name="default"``): ViT/16 at 224
        with 16-wide tokens and 4 blocks of 4 heads, random weights (seed 0 if no
        ``generator``).

        Examples:
            >>> VC1Transform.make_noload_model().embed_dim
            16
        """
        return _noload_vit(generator=default_generator(generator))

    def _preprocessing(self, keys: list[NestedKey]) -> list[Transform]:
        normalize = ObservationNorm(
            loc=torch.tensor(IMAGENET_MEAN).view(3, 1, 1),
            scale=torch.tensor(IMAGENET_STD).view(3, 1, 1),
            in_keys=keys,
            standard_normal=True,
        )
        return [Resize(_RESIZE, _RESIZE, interpolation="bicubic", in_keys=keys), CenterCrop(_CROP, in_keys=keys),
                normalize]

    def _checkpoint_state_dict(self, checkpoint: Any, owner: str) -> dict[str, torch.Tensor]:
        return encoder_state_dict(checkpoint, owner, ("model", "state_dict"), ("module.",), skip=_not_encoder)

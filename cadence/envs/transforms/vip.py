"""``VIPTransform`` (frames to VIP embeddings) and ``VIPRewardTransform`` (a reward
from the embeddings' distance to a goal image's).

VIP (Ma et al., 2022, https://arxiv.org/abs/2210.00030) is a ResNet-50 pre-trained on
Ego4D with a value-implicit objective, whose classifier is replaced by a linear map to
1024 features. The preprocessing is R3M's: floats, ImageNet normalisation, a resize
to ``size``.

The weights are the file the reference library downloads (``.../rl/vip/model.pt``: a
dict holding the VIP state dict under ``"vip"``, the ResNet's entries prefixed
``module.convnet.``), looked for as ``vip_50.pt`` in the model folder (see
:mod:`cadence.envs.transforms.pretrained`); nothing is downloaded, and a missing file
raises a ``FileNotFoundError`` that says where to put it. ``pretrained=False`` gives
random weights.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from cadence.envs.transforms.vip import VIPTransform
    >>> vip = VIPTransform("resnet50", in_keys=["pixels"], size=32, pretrained=False)
    >>> frames = TensorDict(pixels=torch.zeros(2, 32, 32, 3, dtype=torch.uint8), batch_size=[2])
    >>> vip(frames)["vip_vec"].shape
    torch.Size([2, 1024])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from cadence.data import Composite, TensorSpec, Unbounded
from cadence.envs.transforms.base import NestedKey, Transform
from cadence.envs.transforms.pretrained import (
    EncoderModel,
    PathLike,
    PretrainedEncoderTransform,
    WeightsFile,
    encoder_state_dict,
)
from cadence.envs.transforms.r3m import resnet_preprocessing
from cadence.modules.resnet import resnet50

__all__ = ["VIP_MODELS", "VIPRewardTransform", "VIPTransform"]

#: The VIP encoders: ResNet-50 with a 2048-to-1024 linear head.
VIP_MODELS: dict[str, EncoderModel] = {
    "resnet50": EncoderModel(
        "resnet50",
        lambda **kw: resnet50(1024, **kw),
        1024,
        WeightsFile("vip_50.pt", "https://pytorch.s3.amazonaws.com/models/rl/vip/model.pt"),
    ),
}

#: The reset input VIPRewardTransform reads its goal from, and where it keeps the goal's embedding.
GOAL_IMAGE_KEY = "goal_image"
GOAL_EMBEDDING_KEY = "goal_embedding"


class VIPTransform(PretrainedEncoderTransform):
    """Embeds frames with VIP: ``ToTensorImage``, ImageNet ``ObservationNorm``,
    ``Resize(size, size)`` and the ResNet-50 with its 1024-feature head (a ``Compose``
    of them).

    Images ``[..., H, W, 3]`` at ``in_keys`` become ``[..., 1024]`` float embeddings at
    ``out_keys``; the frames are dropped. Several image keys are stacked into one
    embedding (``[..., n * 1024]``) unless ``stack_images=False``.

    Args:
        model_name: ``"resnet50"`` (the only VIP model).
        in_keys: the frames (``["pixels"]``).
        out_keys: the embeddings (``["vip_vec"]``, or ``"vip_vec_{i}"`` per frame key
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
        model_dir: the folder holding ``vip_50.pt`` (default:
            ``<torch.hub.get_dir()>/checkpoints``).
        weights_path: the weights file itself (overrides ``model_dir``; read even with
            ``pretrained=False``).
        pretrained: load the VIP weights (default); ``False`` gives random weights
            (seeded: the same every time) and reads no file.

    Raises:
        FileNotFoundError: ``pretrained`` and the weights file is missing.
        ValueError: an unknown ``model_name``, ``download=True``, keys that do not pair
            up, or a weights file that cannot be read or does not fit the ResNet.

    Examples:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as empty:
        ...     VIPTransform("resnet50", model_dir=empty)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: VIPTransform('resnet50') needs the VIP weights file 'vip_50.pt' at ...
    """

    family = "VIP"
    default_out_key = "vip_vec"
    network_name = "convnet"

    def __init__(
        self,
        model_name: str = "resnet50",
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
        if model_name not in VIP_MODELS:
            raise ValueError(
                f"{type(self).__name__}: model_name must be one of {sorted(VIP_MODELS)}, got {model_name!r}."
            )
        self.size = size
        super().__init__(
            VIP_MODELS[model_name],
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
        return encoder_state_dict(checkpoint, owner, ("vip",), ("module.convnet.", "convnet."))


class VIPRewardTransform(VIPTransform):
    """``VIPTransform`` that also rewards progress towards a goal image.

    At reset, the goal image (``"goal_image"`` in the reset's input, a frame like the
    env's) is embedded and kept as the observation ``"goal_embedding"`` for the
    episode; a reset input that already holds ``"goal_embedding"`` (a partial reset of
    a batch, an auto-reset) keeps it. At each step the reward is the decrease of the
    distance to the goal in embedding space::

        reward = ||e(s_t) - e(g)|| - ||e(s_t+1) - e(g)||

    shaped and typed like the env's ``"reward"`` (whose spec becomes ``Unbounded``).
    ``"goal_image"`` joins the state spec (an input of reset; it is carried along in
    the data), with the spec of the env's frames.

    ``e(s_t)`` and ``e(g)`` are read from the step's input, as in the reference; where
    the input does not carry them (a ``ParallelEnv`` sends its workers the actions
    and the state only) the transform uses the ones it computed last, so that it works
    inside workers too.

    Args: as :class:`VIPTransform`; one frame key only.

    Raises:
        KeyError: a reset (or a step after none) without ``"goal_image"``.
        ValueError: as :class:`VIPTransform`; several frame keys; an env without a
            ``"reward"``.

    Examples:
        >>> import pytest; _ = pytest.importorskip("pygame")  # skips without pygame (rendering)
        >>> from tensordict import TensorDict
        >>> from cadence.envs import GymEnv
        >>> from cadence.envs.transforms import TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1", from_pixels=True, pixels_only=True),
        ...     VIPRewardTransform("resnet50", size=32, pretrained=False))
        >>> goal = TensorDict(goal_image=env.base_env.reset()["pixels"])
        >>> data = env.rollout(3, tensordict=goal)
        >>> data["next", "reward"].shape, data["goal_embedding"].shape
        (torch.Size([3, 1]), torch.Size([3, 1024]))
    """

    steps_on_values = False  # the reward reads the step's input and its output together
    steps_over_time = False

    def __init__(
        self,
        model_name: str = "resnet50",
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
        super().__init__(
            model_name, in_keys, out_keys, size, stack_images, download, download_path, tensor_pixels_keys,
            requires_grad, model_dir=model_dir, weights_path=weights_path, pretrained=pretrained,
        )
        if len(self.in_keys) != 1:
            raise ValueError(
                f"VIPRewardTransform compares one frame with one goal image: give one frame key, got {self.in_keys}."
            )
        self._goal_image_spec: TensorSpec | None = None
        # the goal's and the last frame's embeddings, for step inputs that do not carry them
        self._kept_goal: torch.Tensor | None = None
        self._kept_embedding: torch.Tensor | None = None
        self._reward_shape: torch.Size | None = None
        self._reward_dtype = torch.get_default_dtype()

    # ------------------------------------------------------------------ data
    def _embed_goal(self, goal_image: torch.Tensor, batch_size: torch.Size) -> torch.Tensor:
        """The embedding of ``goal_image`` (a frame, or a batch of them)."""
        data = TensorDict({self.in_keys[0]: goal_image}, batch_size=batch_size, device=goal_image.device)
        return super()._call(data).get(self.out_keys[0])

    def _goal(self, tensordict: TensorDictBase | None, where: str,
              kept: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The goal's embedding (the input's, else ``kept``, else computed from the input's
        goal image) and the input's goal image."""
        goal_image = None if tensordict is None else tensordict.get(GOAL_IMAGE_KEY, None)
        goal = None if tensordict is None else tensordict.get(GOAL_EMBEDDING_KEY, None)
        if goal is None:
            goal = kept
        if goal is None:
            if goal_image is None or tensordict is None:
                keys = [] if tensordict is None else sorted(map(str, tensordict.keys(True, True)))
                raise KeyError(
                    f"VIPRewardTransform: {where} needs a {GOAL_IMAGE_KEY!r} entry (a frame like {self.in_keys[0]!r}) "
                    f"in its input to reward progress towards it; got entries {keys}."
                )
            goal = self._embed_goal(goal_image, tensordict.batch_size)
        return goal, goal_image

    def _reset(self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase) -> TensorDictBase:
        goal, goal_image = self._goal(tensordict, "reset()")
        tensordict_reset = super()._reset(tensordict, tensordict_reset)
        tensordict_reset.set(GOAL_EMBEDDING_KEY, goal)
        if goal_image is not None:
            tensordict_reset.set(GOAL_IMAGE_KEY, goal_image)
        self._kept_goal, self._kept_embedding = goal, tensordict_reset.get(self.out_keys[0])
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        goal, _ = self._goal(tensordict, "step()", self._kept_goal)
        last = tensordict.get(self.out_keys[0], None)
        if last is None:  # a step input that carries the state only (a ParallelEnv worker's)
            last = self._kept_embedding
        next_tensordict = super()._step(tensordict, next_tensordict)
        current = next_tensordict.get(self.out_keys[0])
        next_tensordict.set(GOAL_EMBEDDING_KEY, goal)
        if last is not None:
            progress = torch.linalg.vector_norm(last - goal, dim=-1) - torch.linalg.vector_norm(current - goal, dim=-1)
            shape = progress.shape + (self._reward_shape if self._reward_shape is not None else torch.Size([1]))
            next_tensordict.set("reward", progress.reshape(shape).to(self._reward_dtype))
        self._kept_goal, self._kept_embedding = goal, current
        return next_tensordict

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        batch_dims = len(output_spec.shape)
        observations = output_spec["full_observation_spec"]
        in_key = self.in_keys[0]
        if in_key in observations.keys(True, True):
            self._goal_image_spec = observations[in_key].clone()
        rewards = output_spec["full_reward_spec"]
        if "reward" not in rewards.keys():
            raise ValueError(
                f"VIPRewardTransform writes the env's 'reward', but the env's rewards are "
                f"{sorted(map(str, rewards.keys(True, True)))}."
            )
        reward = rewards["reward"]
        self._reward_shape, self._reward_dtype = reward.shape[batch_dims:], reward.dtype
        output_spec = super().transform_output_spec(output_spec)
        observations = output_spec["full_observation_spec"]
        embedding = observations[self.out_keys[0]]
        observations[GOAL_EMBEDDING_KEY] = Unbounded(shape=embedding.shape, dtype=embedding.dtype, device=embedding.device)
        output_spec["full_observation_spec"] = observations
        rewards = output_spec["full_reward_spec"]
        rewards["reward"] = Unbounded(shape=reward.shape, dtype=reward.dtype, device=reward.device)
        output_spec["full_reward_spec"] = rewards
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        input_spec = super().transform_input_spec(input_spec)
        if self._goal_image_spec is not None:
            states = input_spec["full_state_spec"]
            states[GOAL_IMAGE_KEY] = self._goal_image_spec.clone()
            input_spec["full_state_spec"] = states
        return input_spec

"""Plain ``torch.nn`` networks: the multi-layer perceptron, the convolutional
network and the DDPG paper's actor and critic.

These are ordinary ``nn.Module`` objects that take and return tensors; wrap them
in :class:`~cadence.modules.Actor`, :class:`~cadence.modules.ValueOperator` or a
``tensordict.nn.TensorDictModule`` to read and write tensordict keys.

Examples:
    >>> import torch
    >>> from cadence.modules import MLP
    >>> net = MLP(out_features=2, num_cells=[16, 16])
    >>> net(torch.zeros(5, 3)).shape
    torch.Size([5, 2])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

__all__ = ["MLP", "ConvNet", "DdpgMlpActor", "DdpgMlpQNet", "SquashDims"]

DeviceLike = torch.device | str | int
LayerFactory = type[nn.Module] | Callable[..., nn.Module]

#: The depth an MLP gets when neither ``depth`` nor a sequence of ``num_cells`` says.
_DEFAULT_DEPTH = 3
#: The width of each hidden layer when ``num_cells`` is not given.
_DEFAULT_CELLS = 32
#: Half-width of the uniform initialisation of the DDPG networks' output layers
#: (section 7 of the DDPG paper), which keeps the first actions and values near zero.
DDPG_LAST_LAYER_INIT = 3e-3


def _per_layer_kwargs(kwargs: dict | Sequence[dict] | None, n_layers: int, name: str) -> list[dict]:
    """One kwargs dict per layer, from a single dict (shared) or a list of them."""
    if kwargs is None:
        return [{} for _ in range(n_layers)]
    if isinstance(kwargs, dict):
        return [dict(kwargs) for _ in range(n_layers)]
    kwargs = list(kwargs)
    if len(kwargs) != n_layers:
        raise ValueError(f"{name}: expected a dict or a list of {n_layers} dicts (one per layer), got {len(kwargs)} dicts")
    return [dict(k) for k in kwargs]


def _resolve_cells(depth: int | None, num_cells: Sequence[int] | int | None, name: str) -> list[int]:
    """The list of hidden widths from ``depth`` and ``num_cells``, checking that they agree."""
    if num_cells is None:
        num_cells = _DEFAULT_CELLS
    if isinstance(num_cells, int):
        if depth is None:
            depth = _DEFAULT_DEPTH
        if depth < 0:
            raise ValueError(f"{name}: expected depth >= 0, got {depth}")
        return [num_cells] * depth
    cells = [int(c) for c in num_cells]
    if depth is not None and depth != len(cells):
        raise ValueError(
            f"{name}: depth={depth} but num_cells has {len(cells)} entries ({cells}); they must agree "
            "(or leave depth out)"
        )
    return cells


class _SharedBias(nn.Module):
    """Adds one learnable scalar to every output (``single_bias_last_layer``)."""

    def __init__(self, device: DeviceLike | None = None) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(1, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bias


class _Reshape(nn.Module):
    """Reshapes the last dim of its input into ``shape`` (for tensor-shaped ``out_features``)."""

    def __init__(self, shape: torch.Size) -> None:
        super().__init__()
        self.shape = shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(*x.shape[:-1], *self.shape)

    def extra_repr(self) -> str:
        return f"shape={tuple(self.shape)}"


class MLP(nn.Sequential):
    """A multi-layer perceptron.

    Several inputs are concatenated along their last dim (after broadcasting the
    leading ones), so ``mlp(observation, action)`` computes a state-action value.

    Args:
        in_features: the input size; ``None`` makes the first layer lazy
            (``nn.LazyLinear``), sized by the first call.
        out_features: the output size; a sequence of ints reshapes the output's
            last dim to that shape.
        depth: the number of hidden layers (``0`` gives a single linear layer).
            Defaults to ``len(num_cells)`` when that is a sequence, else 3.
        num_cells: the width of every hidden layer (an int) or of each (a sequence).
            Default 32.
        activation_class: the activation after each hidden layer.
        activation_kwargs: its kwargs: one dict for all layers or one per layer.
        norm_class: an optional normalisation layer after each hidden linear layer
            (built as ``norm_class(width, **norm_kwargs)``).
        norm_kwargs: its kwargs: one dict or one per layer.
        dropout: if given, an ``nn.Dropout(dropout)`` after each activation.
        bias_last_layer: whether the output layer has a bias.
        single_bias_last_layer: give the output layer one scalar bias shared by all
            outputs instead of one per output.
        layer_class: the linear layer class, built as
            ``layer_class(in, out, bias=..., **layer_kwargs)``.
        layer_kwargs: extra kwargs of every layer.
        activate_last_layer: also apply normalisation and activation after the
            output layer.
        device: where the parameters are created.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from cadence.modules import MLP
        >>> net = MLP(in_features=4, out_features=(2, 3), depth=2, num_cells=8, activation_class=nn.ReLU)
        >>> net(torch.zeros(7, 4)).shape
        torch.Size([7, 2, 3])
        >>> q = MLP(out_features=1, num_cells=[16])  # lazy input size
        >>> q(torch.zeros(5, 3), torch.zeros(5, 1)).shape  # observation and action concatenated
        torch.Size([5, 1])
    """

    def __init__(
        self,
        in_features: int | None = None,
        out_features: int | Sequence[int] | torch.Size | None = None,
        depth: int | None = None,
        num_cells: Sequence[int] | int | None = None,
        activation_class: LayerFactory = nn.Tanh,
        activation_kwargs: dict | Sequence[dict] | None = None,
        norm_class: LayerFactory | None = None,
        norm_kwargs: dict | Sequence[dict] | None = None,
        dropout: float | None = None,
        bias_last_layer: bool = True,
        single_bias_last_layer: bool = False,
        layer_class: LayerFactory = nn.Linear,
        layer_kwargs: dict | None = None,
        activate_last_layer: bool = False,
        device: DeviceLike | None = None,
    ) -> None:
        if out_features is None:
            raise ValueError("MLP: out_features is required (an int or a shape), got None")
        if isinstance(out_features, int):
            out_shape = torch.Size([out_features])
        else:
            out_shape = torch.Size(out_features)
        out_total = math.prod(out_shape)
        cells = _resolve_cells(depth, num_cells, "MLP")
        n_activated = len(cells) + (1 if activate_last_layer else 0)
        act_kwargs = _per_layer_kwargs(activation_kwargs, n_activated, "MLP activation_kwargs")
        nrm_kwargs = _per_layer_kwargs(norm_kwargs, n_activated, "MLP norm_kwargs")
        if in_features is None and layer_class is not nn.Linear:
            raise ValueError(
                f"MLP: in_features=None needs the lazy nn.Linear layer; give in_features to use layer_class={layer_class!r}"
            )
        layer_kwargs = dict(layer_kwargs or {})
        widths_in: list[int | None] = [in_features, *cells]
        widths_out = [*cells, out_total]
        layers: list[nn.Module] = []
        for i, (w_in, w_out) in enumerate(zip(widths_in, widths_out)):
            is_last = i == len(cells)
            bias = (bias_last_layer and not single_bias_last_layer) if is_last else True
            if w_in is None:
                layers.append(nn.LazyLinear(w_out, bias=bias, device=device, **layer_kwargs))
            else:
                layers.append(layer_class(w_in, w_out, bias=bias, device=device, **layer_kwargs))
            if is_last and single_bias_last_layer:
                layers.append(_SharedBias(device=device))
            if not is_last or activate_last_layer:
                if norm_class is not None:
                    layers.append(norm_class(w_out, device=device, **nrm_kwargs[i]))
                layers.append(activation_class(**act_kwargs[i]))
                if dropout is not None:
                    layers.append(nn.Dropout(dropout))
        if len(out_shape) != 1:
            layers.append(_Reshape(out_shape))
        super().__init__(*layers)
        self.in_features = in_features
        self.out_features = out_shape if len(out_shape) != 1 else out_total
        self.depth = len(cells)
        self.num_cells = cells

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Runs the network on the concatenation (last dim) of ``inputs``."""
        if len(inputs) == 0:
            raise TypeError("MLP.forward: expected at least one input tensor, got none")
        if len(inputs) > 1:
            lead = torch.broadcast_shapes(*(t.shape[:-1] for t in inputs))
            x = torch.cat([t.expand(*lead, t.shape[-1]) for t in inputs], dim=-1)
        else:
            x = inputs[0]
        return super().forward(x)


class SquashDims(nn.Module):
    """Flattens the last ``ndims_in`` dims into one (a conv net's channels, height, width).

    Args:
        ndims_in: how many trailing dims to merge.

    Examples:
        >>> import torch
        >>> from cadence.modules import SquashDims
        >>> SquashDims()(torch.zeros(2, 4, 5, 6)).shape
        torch.Size([2, 120])
    """

    def __init__(self, ndims_in: int = 3) -> None:
        super().__init__()
        self.ndims_in = ndims_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(-self.ndims_in, -1)


class ConvNet(nn.Sequential):
    """A 2-d convolutional network that ends by squashing its output to a flat vector.

    Inputs are ``[*batch, C, H, W]`` with any number of batch dims (including none).

    Args:
        in_features: the number of input channels; ``None`` makes the first layer
            an ``nn.LazyConv2d``.
        depth: the number of conv layers; defaults to ``len(num_cells)`` when that is
            a sequence, else 3.
        num_cells: the output channels of every layer (an int) or of each (a sequence);
            default 32.
        kernel_sizes: the kernel size of every layer (an int) or of each.
        strides: the stride of every layer or of each.
        paddings: the padding of every layer or of each.
        activation_class: the activation after each conv layer (the last included).
        activation_kwargs: its kwargs: one dict or one per layer.
        norm_class: an optional normalisation layer after each conv layer, built as
            ``norm_class(channels, **norm_kwargs)`` (e.g. ``nn.BatchNorm2d``).
        norm_kwargs: its kwargs: one dict or one per layer.
        bias_last_layer: whether the last conv layer has a bias.
        aggregator_class: the module that turns the feature maps into the output
            (default :class:`SquashDims`, which flattens them); ``None`` keeps maps.
        aggregator_kwargs: its kwargs.
        squeeze_output: squeeze trailing singleton dims of the output (e.g. after
            an ``nn.AdaptiveAvgPool2d(1)`` aggregator).
        device: where the parameters are created.

    Examples:
        >>> import torch
        >>> from cadence.modules import ConvNet
        >>> net = ConvNet(num_cells=[8, 16], kernel_sizes=3, strides=[1, 2], paddings=1)
        >>> net(torch.zeros(4, 3, 8, 8)).shape  # 16 channels of 4x4, flattened
        torch.Size([4, 256])
        >>> net(torch.zeros(2, 5, 3, 8, 8)).shape  # extra batch dims are kept
        torch.Size([2, 5, 256])
    """

    def __init__(
        self,
        in_features: int | None = None,
        depth: int | None = None,
        num_cells: Sequence[int] | int | None = None,
        kernel_sizes: Sequence[int] | int = 3,
        strides: Sequence[int] | int = 1,
        paddings: Sequence[int] | int = 0,
        activation_class: LayerFactory = nn.ELU,
        activation_kwargs: dict | Sequence[dict] | None = None,
        norm_class: LayerFactory | None = None,
        norm_kwargs: dict | Sequence[dict] | None = None,
        bias_last_layer: bool = True,
        aggregator_class: LayerFactory | None = SquashDims,
        aggregator_kwargs: dict | None = None,
        squeeze_output: bool = False,
        device: DeviceLike | None = None,
    ) -> None:
        cells = _resolve_cells(depth, num_cells, "ConvNet")
        if not cells:
            raise ValueError("ConvNet: expected at least one conv layer, got depth 0")
        n = len(cells)

        def per_layer(value: Sequence[int] | int, name: str) -> list[int]:
            if isinstance(value, int):
                return [value] * n
            value = [int(v) for v in value]
            if len(value) != n:
                raise ValueError(f"ConvNet: {name} has {len(value)} entries but the network has {n} layers")
            return value

        kernels = per_layer(kernel_sizes, "kernel_sizes")
        stride_list = per_layer(strides, "strides")
        padding_list = per_layer(paddings, "paddings")
        act_kwargs = _per_layer_kwargs(activation_kwargs, n, "ConvNet activation_kwargs")
        nrm_kwargs = _per_layer_kwargs(norm_kwargs, n, "ConvNet norm_kwargs")
        layers: list[nn.Module] = []
        channels_in: int | None = in_features
        for i, channels_out in enumerate(cells):
            bias = bias_last_layer if i == n - 1 else True
            conv_kwargs: dict[str, Any] = dict(
                kernel_size=kernels[i], stride=stride_list[i], padding=padding_list[i], bias=bias, device=device
            )
            if channels_in is None:
                layers.append(nn.LazyConv2d(channels_out, **conv_kwargs))
            else:
                layers.append(nn.Conv2d(channels_in, channels_out, **conv_kwargs))
            if norm_class is not None:
                layers.append(norm_class(channels_out, device=device, **nrm_kwargs[i]))
            layers.append(activation_class(**act_kwargs[i]))
            channels_in = channels_out
        if aggregator_class is not None:
            layers.append(aggregator_class(**(aggregator_kwargs or {})))
        super().__init__(*layers)
        self.in_features = in_features
        self.num_cells = cells
        self.depth = n
        self.squeeze_output = squeeze_output

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Runs the network on ``[*batch, C, H, W]`` images."""
        if x.ndim < 3:
            raise ValueError(f"ConvNet: expected an input of shape [*batch, C, H, W], got shape {tuple(x.shape)}")
        batch = x.shape[:-3]
        # Conv2d takes exactly one batch dim: fold all of them into one and unfold after.
        out = super().forward(x.reshape(-1, *x.shape[-3:]))
        out = out.reshape(*batch, *out.shape[1:])
        if self.squeeze_output:
            while out.ndim > len(batch) + 1 and out.shape[-1] == 1:
                out = out.squeeze(-1)
        return out


def _init_last_layer(net: nn.Sequential, bound: float) -> None:
    """Initialises the output linear layer of ``net`` uniformly in ``[-bound, bound]``.

    A lazy output layer (``depth=0`` without ``in_features``) has no weights yet, so it
    is initialised by a hook that runs once, right after it materialises.
    """
    last = [m for m in net.modules() if isinstance(m, nn.Linear)][-1]
    if isinstance(last, nn.modules.lazy.LazyModuleMixin) and last.has_uninitialized_params():
        handles: list[Any] = []

        def init_once(module: nn.Module, args: Any) -> None:
            # LazyModuleMixin's own pre-hook was registered first, so the weights exist here.
            _uniform_(module, bound)
            handles.pop().remove()

        handles.append(last.register_forward_pre_hook(init_once))
        return
    _uniform_(last, bound)


def _uniform_(layer: nn.Module, bound: float) -> None:
    with torch.no_grad():
        layer.weight.uniform_(-bound, bound)  # type: ignore[operator]
        if layer.bias is not None:
            layer.bias.uniform_(-bound, bound)  # type: ignore[operator]


class DdpgMlpActor(nn.Module):
    """The DDPG paper's actor: observation -> 400 -> 300 -> action (Lillicrap et al., 2015).

    The output is unsquashed; bound it with a :class:`~cadence.modules.TanhDelta`
    distribution or a :class:`~cadence.modules.TanhModule`. The last layer starts
    uniform in ``[-3e-3, 3e-3]`` so that the first actions are near zero.

    Args:
        action_dim: the length of the action vector.
        mlp_net_kwargs: :class:`MLP` kwargs overriding the defaults
            ``in_features=None, out_features=action_dim, depth=2, num_cells=[400, 300],
            activation_class=nn.ELU, bias_last_layer=True``.
        device: where the parameters are created.

    Examples:
        >>> import torch
        >>> from cadence.modules import DdpgMlpActor
        >>> actor = DdpgMlpActor(action_dim=4)
        >>> actor(torch.zeros(10, 6)).shape
        torch.Size([10, 4])
        >>> bool(actor.mlp[-1].weight.abs().max() <= 3e-3)
        True
    """

    def __init__(self, action_dim: int, mlp_net_kwargs: dict | None = None, device: DeviceLike | None = None) -> None:
        super().__init__()
        kwargs: dict[str, Any] = {
            "in_features": None,
            "out_features": action_dim,
            "depth": 2,
            "num_cells": [400, 300],
            "activation_class": nn.ELU,
            "bias_last_layer": True,
        }
        kwargs.update(mlp_net_kwargs or {})
        self.mlp = MLP(device=device, **kwargs)
        _init_last_layer(self.mlp, DDPG_LAST_LAYER_INIT)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """The unsquashed action for ``observation``."""
        return self.mlp(observation)


class DdpgMlpQNet(nn.Module):
    """The DDPG paper's critic: the action joins the network at its second layer.

    ``observation -> 400`` (``mlp1``), then ``[h, action] -> 300 -> 1`` (``mlp2``);
    the output layer starts uniform in ``[-3e-3, 3e-3]``.

    Args:
        mlp_net_kwargs_net1: :class:`MLP` kwargs of the observation layer, overriding
            ``in_features=None, out_features=400, depth=0, num_cells=[],
            activation_class=nn.ELU, bias_last_layer=True, activate_last_layer=True``.
        mlp_net_kwargs_net2: :class:`MLP` kwargs of the head, overriding
            ``in_features=None, out_features=1, depth=1, num_cells=[300],
            activation_class=nn.ELU, bias_last_layer=True``.
        device: where the parameters are created.

    Examples:
        >>> import torch
        >>> from cadence.modules import DdpgMlpQNet
        >>> qnet = DdpgMlpQNet()
        >>> qnet(torch.zeros(10, 6), torch.zeros(10, 2)).shape
        torch.Size([10, 1])
        >>> qnet.mlp2[0].in_features  # 400 observation features + 2 action dims
        402
    """

    def __init__(
        self,
        mlp_net_kwargs_net1: dict | None = None,
        mlp_net_kwargs_net2: dict | None = None,
        device: DeviceLike | None = None,
    ) -> None:
        super().__init__()
        kwargs1: dict[str, Any] = {
            "in_features": None,
            "out_features": 400,
            "depth": 0,
            "num_cells": [],
            "activation_class": nn.ELU,
            "bias_last_layer": True,
            "activate_last_layer": True,
        }
        kwargs1.update(mlp_net_kwargs_net1 or {})
        kwargs2: dict[str, Any] = {
            "in_features": None,
            "out_features": 1,
            "depth": 1,
            "num_cells": [300],
            "activation_class": nn.ELU,
            "bias_last_layer": True,
        }
        kwargs2.update(mlp_net_kwargs_net2 or {})
        self.mlp1 = MLP(device=device, **kwargs1)
        self.mlp2 = MLP(device=device, **kwargs2)
        _init_last_layer(self.mlp2, DDPG_LAST_LAYER_INIT)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The state-action value ``Q(observation, action)``, of shape ``[*batch, 1]``."""
        return self.mlp2(self.mlp1(observation), action)

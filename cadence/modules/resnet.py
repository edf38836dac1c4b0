"""Residual networks (ResNet-18, -34 and -50), written in plain torch.

The layout and the parameter names are torchvision's (``conv1``, ``bn1``,
``layer1.0.conv1``, ``layer2.0.downsample.0``, ``fc``, ...), so that a state dict saved
from a torchvision ResNet, or the convnet of an R3M or VIP checkpoint once its
``module.convnet.`` prefix is stripped, loads with ``load_state_dict``. ResNet-50 uses
the bottleneck blocks with the stride on their 3x3 convolution ("ResNet v1.5").

Random initialisation draws from an explicit ``torch.Generator`` (a fresh one seeded
with 0 when none is given), never from the global random state: two networks built
the same way hold the same weights. The layers are first created on the ``meta``
device (no memory, no random draws) and then filled in, which also keeps building a
network whose weights are about to be loaded cheap.

Examples:
    >>> import torch
    >>> from cadence.modules.resnet import resnet18
    >>> net = resnet18(num_classes=None).eval()  # no classifier: 512 features
    >>> net(torch.zeros(2, 3, 64, 64)).shape
    torch.Size([2, 512])
    >>> "layer2.0.downsample.0.weight" in net.state_dict()
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet34", "resnet50"]

DeviceLike = torch.device | str | None

#: The widths of the four stages' blocks (before a bottleneck's expansion).
_STAGE_WIDTHS = (64, 128, 256, 512)


def default_generator(generator: torch.Generator | None) -> torch.Generator:
    """``generator``, or a fresh CPU generator seeded with 0 (the same weights every time).

    Examples:
        >>> a, b = default_generator(None), default_generator(None)
        >>> torch.rand(1, generator=a).item() == torch.rand(1, generator=b).item()
        True
    """
    return generator if generator is not None else torch.Generator().manual_seed(0)


def _conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a skip connection (ResNet-18 and -34).

    Args:
        in_planes: the input channels.
        planes: the output channels.
        stride: the stride of the first convolution (and of ``downsample``).
        downsample: maps the input onto the output's shape for the skip connection,
            where the two differ.

    Examples:
        >>> import torch
        >>> with torch.device("meta"):  # the layout only: ResNet fills the weights in
        ...     block = BasicBlock(8, 8)
        >>> block.to_empty(device="cpu").eval()(torch.zeros(1, 8, 4, 4)).shape
        torch.Size([1, 8, 4, 4])
    """

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """A 1x1 reduction, a 3x3 convolution (carrying the stride) and a 1x1 expansion by
    4, with a skip connection (ResNet-50).

    Args:
        in_planes: the input channels.
        planes: the width of the 3x3 convolution; the output has ``4 * planes`` channels.
        stride: the stride of the 3x3 convolution (and of ``downsample``).
        downsample: maps the input onto the output's shape for the skip connection,
            where the two differ.

    Examples:
        >>> import torch
        >>> with torch.device("meta"):  # the layout only: ResNet fills the weights in
        ...     block = Bottleneck(16, 4)
        >>> block.to_empty(device="cpu").eval()(torch.zeros(1, 16, 4, 4)).shape
        torch.Size([1, 16, 4, 4])
    """

    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv1x1(in_planes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = _conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = _conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """A residual network: a 7x7 stem, four stages of blocks, global average pooling
    and, optionally, a linear classifier ``fc``.

    Args:
        block: :class:`BasicBlock` or :class:`Bottleneck`.
        layers: the number of blocks of each of the four stages.
        num_classes: the outputs of ``fc``; ``None`` replaces ``fc`` with an identity,
            so that the network returns its pooled features (``512 * block.expansion``).
        generator: the random source of the initial weights (a fresh one seeded with 0
            if not given).
        device: where the weights live; ``"meta"`` builds the layout only (no
            weights, no random draws).

    Examples:
        >>> import torch
        >>> net = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10).eval()
        >>> net(torch.zeros(1, 3, 32, 32)).shape, net.feature_dim
        (torch.Size([1, 10]), 512)
    """

    def __init__(
        self,
        block: type[BasicBlock] | type[Bottleneck],
        layers: Sequence[int],
        num_classes: int | None = 1000,
        *,
        generator: torch.Generator | None = None,
        device: DeviceLike = None,
    ) -> None:
        super().__init__()
        if len(layers) != len(_STAGE_WIDTHS) or any(int(n) < 1 for n in layers):
            raise ValueError(f"ResNet: layers must hold four positive block counts, got {list(layers)!r}.")
        if num_classes is not None and (isinstance(num_classes, bool) or int(num_classes) < 1):
            raise ValueError(f"ResNet: num_classes must be a positive int or None, got {num_classes!r}.")
        #: the number of pooled features (the input of ``fc``)
        self.feature_dim = 512 * block.expansion
        with torch.device("meta"):  # the layout first; the weights are filled in below
            self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            in_planes = 64
            for index, (width, count) in enumerate(zip(_STAGE_WIDTHS, layers)):
                stride = 1 if index == 0 else 2
                stage, in_planes = self._stage(block, in_planes, width, int(count), stride)
                self.add_module(f"layer{index + 1}", stage)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc: nn.Module = nn.Identity() if num_classes is None else nn.Linear(self.feature_dim, int(num_classes))
        target = torch.device("cpu") if device is None else torch.device(device)
        if target.type != "meta":
            self.to_empty(device=target)
            self.reset_parameters(generator)

    @staticmethod
    def _stage(
        block: type[BasicBlock] | type[Bottleneck], in_planes: int, planes: int, count: int, stride: int
    ) -> tuple[nn.Sequential, int]:
        out_planes = planes * block.expansion
        downsample = None
        if stride != 1 or in_planes != out_planes:
            downsample = nn.Sequential(_conv1x1(in_planes, out_planes, stride), nn.BatchNorm2d(out_planes))
        blocks = [block(in_planes, planes, stride, downsample)]
        blocks += [block(out_planes, planes) for _ in range(count - 1)]
        return nn.Sequential(*blocks), out_planes

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draws fresh weights: He-normal convolutions (fan-out), unit batch norms with
        fresh running statistics, and a classifier initialised as ``nn.Linear`` does.

        Args:
            generator: the random source (a fresh one seeded with 0 if not given).

        Examples:
            >>> a, b = resnet18(num_classes=None), resnet18(num_classes=None)
            >>> b.reset_parameters(torch.Generator().manual_seed(1))
            >>> torch.equal(a.conv1.weight, b.conv1.weight)
            False
        """
        generator = default_generator(generator)
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, nn.Conv2d):
                    nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu", generator=generator)
                elif isinstance(module, nn.BatchNorm2d):
                    module.reset_running_stats()
                    nn.init.ones_(module.weight)
                    nn.init.zeros_(module.bias)
                elif isinstance(module, nn.Linear):
                    # nn.Linear's own scheme (uniform in +-1/sqrt(fan_in)), from our generator
                    bound = 1 / math.sqrt(module.in_features)
                    nn.init.uniform_(module.weight, -bound, bound, generator=generator)
                    nn.init.uniform_(module.bias, -bound, bound, generator=generator)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Maps images ``[B, 3, H, W]`` to ``[B, num_classes]`` (or ``[B, feature_dim]``)."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"ResNet expects images of shape [B, 3, H, W], got shape {tuple(x.shape)}.")
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(
    num_classes: int | None = 1000, *, generator: torch.Generator | None = None, device: DeviceLike = None
) -> ResNet:
    """ResNet-18: basic blocks ``[2, 2, 2, 2]``, 512 features.

    Args:
        num_classes: the classifier's outputs; ``None`` for no classifier (features out).
        generator: the random source of the initial weights (seed 0 if not given).
        device: where the weights live (``"meta"``: layout only).

    Examples:
        >>> sum(p.numel() for p in resnet18(device="meta").parameters())
        11689512
    """
    return ResNet(BasicBlock, (2, 2, 2, 2), num_classes, generator=generator, device=device)


def resnet34(
    num_classes: int | None = 1000, *, generator: torch.Generator | None = None, device: DeviceLike = None
) -> ResNet:
    """ResNet-34: basic blocks ``[3, 4, 6, 3]``, 512 features.

    Args:
        num_classes: the classifier's outputs; ``None`` for no classifier (features out).
        generator: the random source of the initial weights (seed 0 if not given).
        device: where the weights live (``"meta"``: layout only).

    Examples:
        >>> sum(p.numel() for p in resnet34(device="meta").parameters())
        21797672
    """
    return ResNet(BasicBlock, (3, 4, 6, 3), num_classes, generator=generator, device=device)


def resnet50(
    num_classes: int | None = 1000, *, generator: torch.Generator | None = None, device: DeviceLike = None
) -> ResNet:
    """ResNet-50: bottleneck blocks ``[3, 4, 6, 3]``, 2048 features.

    Args:
        num_classes: the classifier's outputs; ``None`` for no classifier (features out).
        generator: the random source of the initial weights (seed 0 if not given).
        device: where the weights live (``"meta"``: layout only).

    Examples:
        >>> sum(p.numel() for p in resnet50(device="meta").parameters())
        25557032
    """
    return ResNet(Bottleneck, (3, 4, 6, 3), num_classes, generator=generator, device=device)

"""The built-in networks, written in the project: LeNet-5, CIFAR ResNet-18, MobileNetV3-small, VGG-11.

Each follows its paper's layer table; the CIFAR variants use the usual 3x3 stem without the ImageNet
max-pool so 32x32 inputs keep enough resolution. Constructors take ``num_classes`` and nothing else.
"""

from __future__ import annotations

import torch
from torch import nn


class LeNet5(nn.Module):
    """LeNet-5 (LeCun et al. 1998) for 1x28x28 inputs: the 28x28 image is padded to the original 32x32."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(16 * 5 * 5, 120), nn.ReLU(inplace=True),
            nn.Linear(120, 84), nn.ReLU(inplace=True), nn.Linear(84, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with a residual connection (He et al. 2016); 1x1 projection when the shape changes."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.relu1 = nn.ReLU(inplace=True)
        self.relu2 = nn.ReLU(inplace=True)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, bias=False),
                                          nn.BatchNorm2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu2(out + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for 3x32x32 inputs: 3x3 stem, four stages of two basic blocks (64-128-256-512)."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True))
        stages, in_ch = [], 64
        for out_ch, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages += [BasicBlock(in_ch, out_ch, stride), BasicBlock(out_ch, out_ch, 1)]
            in_ch = out_ch
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def _divisible(channels: float, divisor: int = 8) -> int:
    """Round a channel count to a multiple of ``divisor`` without losing more than 10% (MobileNet rule)."""
    rounded = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * channels else rounded


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation with a hard-sigmoid gate, squeeze width = expansion / 4."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        squeeze = _divisible(channels / 4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.gate = nn.Hardsigmoid(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))


class InvertedResidual(nn.Module):
    """MobileNetV3 bneck: 1x1 expand, kxk depthwise, optional SE, 1x1 project; residual when shapes match."""

    def __init__(self, in_ch: int, kernel: int, expand: int, out_ch: int, se: bool, hswish: bool,
                 stride: int) -> None:
        super().__init__()
        act = nn.Hardswish if hswish else nn.ReLU
        layers: list[nn.Module] = []
        if expand != in_ch:
            layers += [nn.Conv2d(in_ch, expand, 1, bias=False), nn.BatchNorm2d(expand), act(inplace=True)]
        layers += [nn.Conv2d(expand, expand, kernel, stride, kernel // 2, groups=expand, bias=False),
                   nn.BatchNorm2d(expand), act(inplace=True)]
        if se:
            layers.append(SqueezeExcite(expand))
        layers += [nn.Conv2d(expand, out_ch, 1, bias=False), nn.BatchNorm2d(out_ch)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and in_ch == out_ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.block(x)
        return out + x if self.residual else out


#: MobileNetV3-small bneck table (Howard et al. 2019, Table 2): kernel, expansion, out, SE, h-swish, stride.
MOBILENETV3_SMALL = (
    (3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
    (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
    (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
    (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1),
)


class MobileNetV3Small(nn.Module):
    """MobileNetV3-small for 3x224x224 inputs (width 1.0, 1024-wide head, dropout 0.2)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16),
                                   nn.Hardswish(inplace=True)]
        in_ch = 16
        for kernel, expand, out_ch, se, hswish, stride in MOBILENETV3_SMALL:
            layers.append(InvertedResidual(in_ch, kernel, expand, out_ch, se, hswish, stride))
            in_ch = out_ch
        layers += [nn.Conv2d(in_ch, 576, 1, bias=False), nn.BatchNorm2d(576), nn.Hardswish(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(inplace=True),
                                        nn.Dropout(0.2), nn.Linear(1024, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


#: VGG-11 (Simonyan & Zisserman 2015, configuration A): conv widths, "M" = 2x2 max-pool.
VGG11 = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class VGG11BN(nn.Module):
    """VGG-11 with batch norm for 3x32x32 inputs: five pools leave 512x1x1, then one linear classifier."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 3
        for v in VGG11:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(in_ch, int(v), 3, padding=1, bias=False), nn.BatchNorm2d(int(v)),
                           nn.ReLU(inplace=True)]
                in_ch = int(v)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def count_params(model: nn.Module) -> int:
    """Trainable parameters (elements)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = ["LeNet5", "ResNet18", "MobileNetV3Small", "VGG11BN", "count_params"]

"""The built-in networks: output shapes, parameter counts of the published architectures, training."""

from __future__ import annotations

import pytest
import torch
from jetpredict.profiler import nets

pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.mark.parametrize(("cls", "shape", "classes", "params"), [
    # Parameter counts of the reference implementations (LeNet-5 with a 10-way head; CIFAR ResNet-18;
    # torchvision's mobilenet_v3_small at 1000 classes; VGG-11-BN with a single 512->10 classifier).
    (nets.LeNet5, (1, 28, 28), 10, 61_706),
    (nets.ResNet18, (3, 32, 32), 10, 11_173_962),
    (nets.MobileNetV3Small, (3, 224, 224), 1000, 2_542_856),
    (nets.VGG11BN, (3, 32, 32), 10, 9_228_362),
])
def test_shapes_and_parameter_counts(cls, shape, classes, params):
    model = cls(classes)
    assert nets.count_params(model) == params
    model.eval()
    with torch.no_grad():
        out = model(torch.randn(2, *shape))
    assert out.shape == (2, classes)


def test_class_count_changes_only_the_head():
    assert nets.count_params(nets.MobileNetV3Small(203)) == 2_542_856 - 1025 * (1000 - 203)


def test_lenet_learns_a_fixed_batch():
    torch.manual_seed(0)
    model = nets.LeNet5(10)
    x, y = torch.randn(8, 1, 28, 28), torch.arange(8) % 10
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]


def test_resnet_blocks_keep_residual_shapes():
    block = nets.BasicBlock(64, 128, 2)
    assert block(torch.randn(1, 64, 8, 8)).shape == (1, 128, 4, 4)
    assert len(block.shortcut) == 2  # projection when the shape changes
    assert len(nets.BasicBlock(64, 64, 1).shortcut) == 0


def test_divisible_rounding():
    assert nets._divisible(72 / 4) == 24  # 16 would lose more than 10% of 18
    assert nets._divisible(240 / 4) == 64
    assert nets._divisible(16 / 4) == 8

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


def test_residual_blocks_add_their_input():
    """With the last batch norm's scale at zero a block's branch gives 0, so the output is the skip path alone:
    relu(x) for a ResNet basic block, x for a MobileNetV3 bneck of equal shape (a block that dropped its
    residual gives zeros yet keeps every shape and parameter count)."""
    x = torch.randn(2, 16, 8, 8)
    basic, bneck = nets.BasicBlock(16, 16, 1), nets.InvertedResidual(16, 3, 64, 16, True, True, 1)
    for block, last_bn in ((basic, basic.bn2), (bneck, bneck.block[-1])):
        torch.nn.init.zeros_(last_bn.weight)
        block.eval()
    with torch.no_grad():
        assert torch.allclose(basic(x), torch.relu(x)) and torch.allclose(bneck(x), x)


def test_vgg11_is_configuration_a_with_max_pooling():
    """Eight 3x3 convolutions and five 2x2 max-pools (an average pool keeps every shape and parameter count)."""
    layers = list(nets.VGG11BN(10).features)
    assert [m.out_channels for m in layers if isinstance(m, torch.nn.Conv2d)] == [64, 128, 256, 256, 512, 512, 512, 512]
    pools = [m for m in layers if "Pool" in type(m).__name__]
    assert len(pools) == 5 and all(isinstance(m, torch.nn.MaxPool2d) and m.kernel_size == 2 for m in pools)

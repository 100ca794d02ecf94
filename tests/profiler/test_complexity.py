"""Complexity: exact counts on a model small enough to count by hand, published sizes, soft failures."""

from __future__ import annotations

import pytest
import torch
from jetpredict.profiler import nets
from jetpredict.profiler.complexity import TRAIN_FLOPS_PER_MAC, measure_complexity
from torch import nn

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_counts_a_linear_layer_by_hand():
    model = nn.Sequential(nn.Linear(8, 4, bias=False))
    c = measure_complexity(model, torch.zeros(1, 8))
    assert c.macs_fwd == 32                       # 8 x 4 multiply-accumulates per sample
    assert c.flops_train == 6 * 32 == TRAIN_FLOPS_PER_MAC * c.macs_fwd
    assert c.params == 32 and c.param_bytes == 32 * 4
    assert c.activation_bytes == 4 * 4            # one fp32 output of 4 values
    assert c.leaf_modules == 1
    assert c.kernel_count == 1 + 2 + 1            # forward, two backward (input and weight), one update
    assert c.null_reason is None


def test_frozen_parameters_are_stored_but_not_counted_as_trained():
    """``params`` and the optimizer kernels count what trains; ``param_bytes`` all that is stored (a frozen
    backbone of a fine-tuned model counted as trained made its parameter count the whole model's)."""
    model = nn.Sequential(nn.Linear(8, 4, bias=False), nn.Linear(4, 2, bias=False))
    model[0].weight.requires_grad_(False)
    c = measure_complexity(model, torch.zeros(1, 8))
    assert c.params == 8 and c.param_bytes == (32 + 8) * 4
    assert c.macs_fwd == 32 + 8 and c.kernel_count == 2 * (1 + 2) + 1


def test_reused_modules_count_every_call():
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.act = nn.ReLU()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return self.act(self.fc(self.act(x)))

    c = measure_complexity(Twice(), torch.zeros(1, 4))
    assert c.leaf_modules == 2
    assert c.kernel_count == (1 + 1) * 2 + (1 + 2) + 2  # two ReLU calls, one Linear, two parameter tensors


def test_resnet18_matches_the_published_size_and_leaves_the_model_alone():
    model = nets.ResNet18(10)
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    c = measure_complexity(model, torch.zeros(1, 3, 32, 32))
    assert 0.55e9 < c.macs_fwd < 0.57e9          # CIFAR ResNet-18: ~0.56 GMAC per image
    assert c.params == 11_173_962
    assert c.leaf_modules == 64
    assert c.activation_bytes > 4 * 64 * 32 * 32  # at least the first feature map
    assert model.training
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_models_that_cannot_be_traced_fail_soft():
    class NeedsTwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x, y):
            return self.fc(x) + y

    c = measure_complexity(NeedsTwoInputs(), torch.zeros(1, 3))
    assert c.macs_fwd is None and c.flops_train is None and c.kernel_count is None
    assert c.params == 12 and c.leaf_modules == 1
    assert "ptflops could not trace" in c.null_reason and "forward pass" in c.null_reason


def test_a_ptflops_that_fails_to_load_leaves_the_macs_null_with_its_reason(tmp_path, monkeypatch):
    """ptflops imports torchvision.ops, and a torchvision built for another torch raises RuntimeError there:
    every profile failed ("operator torchvision::nms does not exist"); now only the MACs are null, said why."""
    import sys

    import ptflops  # noqa: F401  loaded, so that its modules are put back after the test

    (tmp_path / "torchvision").mkdir()
    (tmp_path / "torchvision" / "__init__.py").write_text('raise RuntimeError("operator torchvision::nms does not exist")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.split(".")[0] in ("ptflops", "torchvision")]:
        monkeypatch.delitem(sys.modules, name)
    c = measure_complexity(nn.Sequential(nn.Linear(8, 4, bias=False)), torch.zeros(1, 8))
    assert c.macs_fwd is None and c.params == 32 and c.kernel_count == 4
    assert "ptflops does not import here (RuntimeError: operator torchvision::nms does not exist)" in c.null_reason


def test_lstm_language_model_counts(monkeypatch):
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    from user_models import LstmLanguageModel

    c = measure_complexity(LstmLanguageModel(), torch.zeros(1, 12, dtype=torch.long))
    assert c.macs_fwd and c.macs_fwd > 12 * 16 * 50   # at least the output head per token
    assert c.null_reason is None
    del sys.modules["user_models"]

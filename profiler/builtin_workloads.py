"""The built-in workloads as data, without importing torch: :mod:`profiler.workloads` builds them and
``jetpredict profile --help`` lists them (its parser is built before torch loads)."""

from __future__ import annotations

from dataclasses import dataclass

from jetpredict.models.errors import UnknownWorkloadError


@dataclass(frozen=True)
class BuiltinWorkload:
    """One built-in workload: ``net`` names its network class in :mod:`profiler.nets`; ``train_samples``
    is the training set's size (samples per epoch)."""

    net: str
    input_shape: tuple[int, int, int]
    num_classes: int
    train_samples: int
    dataset: str


BUILTIN_WORKLOADS: dict[str, BuiltinWorkload] = {
    "lenet5-mnist": BuiltinWorkload("LeNet5", (1, 28, 28), 10, 60_000, "MNIST"),
    "resnet18-cifar10": BuiltinWorkload("ResNet18", (3, 32, 32), 10, 50_000, "CIFAR-10"),
    "mobilenetv3-small-gld23k": BuiltinWorkload("MobileNetV3Small", (3, 224, 224), 203, 23_080, "GLD-23k"),
    "vgg11-cifar10": BuiltinWorkload("VGG11BN", (3, 32, 32), 10, 50_000, "CIFAR-10"),
}
#: Epoch size (samples) of a user classification workload on synthetic data without ``dataset_size``:
#: CIFAR-10's, from its entry (``profile --help`` says it too, without importing torch).
DEFAULT_SYNTHETIC_SAMPLES = BUILTIN_WORKLOADS["resnet18-cifar10"].train_samples


def unknown_workload(name: str) -> UnknownWorkloadError:
    """The refusal of a workload name that is neither built in, ``torchvision:NAME`` nor ``module.path:factory``
    (said without importing torch: a Flower node's twin checks its name before any round)."""
    return UnknownWorkloadError(f"unknown workload {name!r}; valid: {', '.join(BUILTIN_WORKLOADS)}, torchvision:NAME, "
                                "or module.path:factory", "workload")

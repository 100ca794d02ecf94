"""The learning task of the Flower fleet example: scikit-learn's digits, a small CNN, 50 clients.

Data: the 1,797 8x8 images of ``sklearn.datasets.load_digits`` (ships with scikit-learn), split 80/20
(stratified, fixed seed) into a federation set and a held-out test set. The federation set is split
over the clients IID in labels with log-normal sizes (a fixed seed: the fleet is the same in every run).

Jetson side (simulated): client ``p`` is a Jetson of type ``DEVICES[p % 6]``. Its local epoch is costed
by the digital twin as LeNet-5/MNIST (``lenet5-mnist``, the twin workload closest to this CNN) on its
share of MNIST's 60,000 training images: the federation's data stand for one MNIST epoch, so a client
holding a fraction ``s`` of the federation set has ``epoch_scale = s``. The CNN really trains here, on the
host CPU; only the Jetson time and energy are simulated.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

DEVICES = ("agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano")
NUM_CLIENTS = 50
TWIN_WORKLOAD = "lenet5-mnist"
DATA_SEED = 7
#: Log-normal sigma of client dataset sizes (relative spread of local data).
SIZE_SIGMA = 0.5
MIN_SAMPLES = 8
BATCH_SIZE = 16
LEARNING_RATE = 0.1
MOMENTUM = 0.9
#: Input standardisation (pixel values scaled to 0..1 have about this mean and SD over the digits set).
PIXEL_MEAN, PIXEL_SD = 0.3, 0.4

# Two shared cores: one intra-op thread per training process.
torch.set_num_threads(1)


def device_of(partition_id: int) -> str:
    """The Jetson type of client ``partition_id`` (deterministic: round-robin over the six types)."""
    return DEVICES[int(partition_id) % len(DEVICES)]


@lru_cache(maxsize=1)
def _split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]  # N x 1 x 8 x 8, pixel values 0..16
    y = digits.target.astype(np.int64)
    return tuple(train_test_split(x, y, test_size=0.2, stratify=y, random_state=DATA_SEED))  # type: ignore[return-value]


@lru_cache(maxsize=4)
def _partitions(num_clients: int) -> list[np.ndarray]:
    """Index arrays into the federation set, one per client (log-normal sizes, shuffled labels)."""
    x_train = _split()[0]
    rng = np.random.default_rng(DATA_SEED)
    weights = rng.lognormal(0.0, SIZE_SIGMA, num_clients)
    free = len(x_train) - MIN_SAMPLES * num_clients
    sizes = MIN_SAMPLES + np.floor(weights / weights.sum() * free).astype(int)
    sizes[: len(x_train) - sizes.sum()] += 1  # hand out the rounding remainder
    order = rng.permutation(len(x_train))
    return np.split(order, np.cumsum(sizes)[:-1])


def client_data(partition_id: int, num_clients: int = NUM_CLIENTS) -> tuple[np.ndarray, np.ndarray]:
    x_train, _, y_train, _ = _split()
    idx = _partitions(num_clients)[int(partition_id)]
    return x_train[idx], y_train[idx]


def epoch_scale(partition_id: int, num_clients: int = NUM_CLIENTS) -> float:
    """The client's local epoch in MNIST epochs of the twin workload: its share of the federation set."""
    return len(_partitions(num_clients)[int(partition_id)]) / len(_split()[0])


def test_data() -> tuple[np.ndarray, np.ndarray]:
    _, x_test, _, y_test = _split()
    return x_test, y_test


class Net(nn.Module):
    """Two 3x3 convolutions (16, 32 channels) with pooling and a linear classifier (6,090 parameters)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features((x - PIXEL_MEAN) / PIXEL_SD).flatten(1))


def train_local(model: Net, x: np.ndarray, y: np.ndarray, epochs: int, seed: int) -> float:
    """``epochs`` epochs of minibatch SGD with momentum; returns the mean training loss of the last epoch."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM)
    loss_fn = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    model.train()
    losses: list[float] = []
    for _ in range(epochs):
        losses = []
        perm = torch.randperm(len(xt), generator=gen)
        for start in range(0, len(xt), BATCH_SIZE):
            batch = perm[start:start + BATCH_SIZE]
            opt.zero_grad()
            loss = loss_fn(model(xt[batch]), yt[batch])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return float(np.mean(losses))


def accuracy(model: Net, x: np.ndarray, y: np.ndarray) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(torch.from_numpy(x)).argmax(1).numpy() == y).mean())

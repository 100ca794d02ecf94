"""The learning task of the Flower fleet example: scikit-learn's digits, a small CNN, any number of clients.

Data: the 1,797 8x8 images of ``sklearn.datasets.load_digits`` (ships with scikit-learn), split 80/20
(stratified, fixed seed) into a federation set (1,437 images) and a held-out test set. The federation set
is split over ``num_clients`` clients, each holding at least one image (so at most 1,437 clients):

- ``iid``: labels shuffled, client sizes log-normal (sigma :data:`SIZE_SIGMA`);
- ``dirichlet``: per label, the label's images are shared out in Dirichlet(``alpha``) proportions, the
  usual non-IID benchmark split (small ``alpha``: each client holds few labels, sizes vary widely).

Jetson side (simulated): client ``p`` is a Jetson of type ``DEVICES[p % 6]`` unless its node config names
one. Its local epoch is costed by the digital twin as LeNet-5/MNIST (``lenet5-mnist``, the twin workload
closest to this CNN) on ``epoch_scale`` MNIST epochs: the average client holds :data:`MEAN_CLIENT_SHARE`
of MNIST's 60,000 training images (1,200), and a client's share is that times its size over the mean
size. The work per client therefore does not shrink as the federation grows (a bigger federation has
more data, not thinner clients), so deadlines mean the same at 50 and 500 clients. The CNN really
trains here, on the host CPU; only the Jetson time and energy are simulated.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

DEVICES = ("agx-xavier", "xavier-nx", "nano", "orin-agx", "orin-nx", "orin-nano")
TWIN_WORKLOAD = "lenet5-mnist"
SPLITS = ("iid", "dirichlet")
DATA_SEED = 7
#: Log-normal sigma of client dataset sizes in the IID split (relative spread of local data).
SIZE_SIGMA = 0.5
#: The mean client's local epoch, in MNIST epochs of the twin workload (1/50: 1,200 of 60,000 images).
MEAN_CLIENT_SHARE = 1 / 50
BATCH_SIZE = 16
LEARNING_RATE = 0.1
MOMENTUM = 0.9
#: Input standardisation (pixel values scaled to 0..1 have about this mean and SD over the digits set).
PIXEL_MEAN, PIXEL_SD = 0.3, 0.4

# Two shared cores: one intra-op thread per training process.
torch.set_num_threads(1)


def device_of(partition_id: int) -> str:
    """The simulated Jetson type of client ``partition_id`` (round-robin over the six types)."""
    return DEVICES[int(partition_id) % len(DEVICES)]


@lru_cache(maxsize=1)
def _split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]  # N x 1 x 8 x 8, pixel values 0..16
    y = digits.target.astype(np.int64)
    return tuple(train_test_split(x, y, test_size=0.2, stratify=y, random_state=DATA_SEED))  # type: ignore[return-value]


def federation_size() -> int:
    """Images in the federation set: the largest number of clients a split supports."""
    return len(_split()[0])


def check_split(num_clients: int, split: str, alpha: float) -> None:
    """ValueError naming the setting when the federation cannot be split as asked."""
    if isinstance(num_clients, bool) or not isinstance(num_clients, int | np.integer) or num_clients < 1:
        raise ValueError(f"num_clients must be a whole number >= 1, got {num_clients!r}")
    if num_clients > federation_size():
        raise ValueError(f"num_clients must be at most {federation_size()} (every client holds at least one of "
                         f"the federation's {federation_size()} images), got {num_clients}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if split == "dirichlet" and not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"dirichlet alpha must be a finite number > 0, got {alpha!r}")


def _iid(n: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    weights = rng.lognormal(0.0, SIZE_SIGMA, num_clients)
    sizes = 1 + np.floor(weights / weights.sum() * (n - num_clients)).astype(int)
    sizes[: n - sizes.sum()] += 1  # hand out the rounding remainder
    return np.split(rng.permutation(n), np.cumsum(sizes)[:-1])


def _dirichlet(y: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator) -> list[np.ndarray]:
    parts: list[list[int]] = [[] for _ in range(num_clients)]
    for label in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == label))
        share = rng.dirichlet(np.full(num_clients, alpha))
        cuts = np.floor(np.cumsum(share)[:-1] * len(idx)).astype(int)
        for client, chunk in enumerate(np.split(idx, cuts)):
            parts[client].extend(chunk.tolist())
    # Every client holds at least one image: an empty one takes an image from the largest.
    for client in range(num_clients):
        if not parts[client]:
            donor = max(range(num_clients), key=lambda c: len(parts[c]))
            parts[client].append(parts[donor].pop())
    return [np.sort(np.asarray(p, dtype=int)) for p in parts]


@lru_cache(maxsize=8)
def partitions(num_clients: int, split: str = "iid", alpha: float = 0.5) -> tuple[np.ndarray, ...]:
    """Index arrays into the federation set, one per client (fixed seed: the same fleet in every run)."""
    check_split(num_clients, split, alpha)
    y_train = _split()[2]
    rng = np.random.default_rng(DATA_SEED)
    parts = _iid(len(y_train), num_clients, rng) if split == "iid" else _dirichlet(y_train, num_clients, alpha, rng)
    return tuple(parts)


def client_data(partition_id: int, num_clients: int, split: str = "iid", alpha: float = 0.5
                ) -> tuple[np.ndarray, np.ndarray]:
    """The images and labels of client ``partition_id`` (IndexError-free: the id is checked)."""
    parts = partitions(num_clients, split, alpha)
    if not 0 <= int(partition_id) < num_clients:
        raise ValueError(f"partition_id must be in 0..{num_clients - 1}, got {partition_id!r}")
    x_train, _, y_train, _ = _split()
    idx = parts[int(partition_id)]
    return x_train[idx], y_train[idx]


def epoch_scale(partition_id: int, num_clients: int, split: str = "iid", alpha: float = 0.5) -> float:
    """The client's local epoch in MNIST epochs of the twin workload (see the module docstring)."""
    parts = partitions(num_clients, split, alpha)
    mean_size = federation_size() / num_clients
    return MEAN_CLIENT_SHARE * len(parts[int(partition_id)]) / mean_size


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
    """Share of ``x`` classified as ``y``."""
    model.eval()
    with torch.no_grad():
        return float((model(torch.from_numpy(x)).argmax(1).numpy() == y).mean())

"""User workloads for the ``module:factory`` tests: none of this is part of jetpredict.

``lstm_language_model`` brings its own dataset and loss (next-token prediction), as a language model
would; ``tiny_classifier`` is the classification form ``(model, input_shape, num_classes)``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

VOCAB = 50
SEQ_LEN = 12


class TokenStream(Dataset):
    """Deterministic pseudo-text: sample ``i`` is a token window and the same window shifted by one."""

    def __init__(self, size: int = 256) -> None:
        g = torch.Generator().manual_seed(7)
        self.tokens = torch.randint(0, VOCAB, (size + SEQ_LEN + 1,), generator=g)
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.tokens[i:i + SEQ_LEN], self.tokens[i + 1:i + SEQ_LEN + 1]


class LstmLanguageModel(nn.Module):
    def __init__(self, vocab: int = VOCAB, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def lstm_language_model() -> dict:
    return {"model": LstmLanguageModel(), "dataset": TokenStream(), "loss": next_token_loss,
            "optimizer": lambda params: torch.optim.Adam(params, lr=1e-3)}


def tiny_classifier() -> tuple[nn.Module, tuple[int, ...], int]:
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 5))
    return model, (3, 8, 8), 5


def model_only() -> nn.Module:
    return nn.Linear(2, 2)


def dataset_without_loss() -> dict:
    return {"model": LstmLanguageModel(), "dataset": TokenStream()}

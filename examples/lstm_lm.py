"""An LSTM language model as a jetpredict workload: a model that is not an image classifier.

jetpredict profiles any PyTorch model given as ``module.path:factory``. A factory returns either
``(model, input_shape, num_classes)`` for a classifier, or a mapping with its own ``dataset`` (or
``batches``) and ``loss``, as here: token windows and next-token cross-entropy. From the repository root::

    jetpredict profile --device sim:agx-xavier --workload examples.lstm_lm:lstm_language_model \\
        --modes MAXN,MODE_15W --minibatches 20 --out lstm.csv      # on the digital twin
    jetpredict profile --device host --workload examples.lstm_lm:lstm_language_model --out lstm-host.csv

Your own module works the same way from the directory that holds it (``mymodels:make``). The data here
are deterministic pseudo-text, so the example needs no download; swap in your tokenised corpus.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

VOCAB = 50  # tokens
SEQ_LEN = 12  # tokens per training window
WINDOWS = 2048  # training windows per epoch


class TokenStream(Dataset):
    """Sample ``i`` is a window of tokens and the same window shifted by one (the next-token targets)."""

    def __init__(self, size: int = WINDOWS, seed: int = 7) -> None:
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(0, VOCAB, (size + SEQ_LEN + 1,), generator=g)
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.tokens[i:i + SEQ_LEN], self.tokens[i + 1:i + SEQ_LEN + 1]


class LstmLanguageModel(nn.Module):
    """Embedding, one LSTM layer, a linear head over the vocabulary."""

    def __init__(self, vocab: int = VOCAB, dim: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return self.head(out)


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of every position's prediction of the next token."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def lstm_language_model() -> dict:
    """The factory jetpredict calls: model, dataset, loss and optimiser."""
    return {"model": LstmLanguageModel(), "dataset": TokenStream(), "loss": next_token_loss,
            "optimizer": lambda params: torch.optim.Adam(params, lr=1e-3)}
